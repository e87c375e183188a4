#include "core/output_dir.h"

#include <system_error>

#include "core/file_io.h"

namespace packrec {

Status PrepareOutputDirectory(const std::filesystem::path& dir, const char* marker_file,
                              bool overwrite, bool* created) {
  namespace fs = std::filesystem;
  *created = false;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(dir, error);
  if (!fs::exists(status)) {
    fs::create_directories(dir, error);
    if (error) return ErrnoStatus("create directory", dir, error.value());
    *created = true;
    return Status::OK();
  }
  if (!fs::is_directory(fs::status(dir, error))) {
    return Status::AlreadyExists(dir.string() + " exists and is not a directory");
  }
  if (fs::is_empty(dir, error)) return Status::OK();
  if (!fs::exists(dir / marker_file)) {
    return Status::AlreadyExists(dir.string() +
                                 " exists, is not empty and is not a packrec dataset; refusing "
                                 "to write into it (choose another output path)");
  }
  if (!overwrite) {
    return Status::AlreadyExists(dir.string() +
                                 " already holds a dataset (pass --overwrite to replace it)");
  }
  fs::remove(dir / marker_file, error);
  if (error) return ErrnoStatus("remove", dir / marker_file, error.value());
  PACKREC_RETURN_IF_ERROR(SyncDirectory(dir));
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    fs::remove_all(entry.path(), error);
    if (error) return ErrnoStatus("remove", entry.path(), error.value());
  }
  if (error) return ErrnoStatus("list", dir, error.value());
  return Status::OK();
}

}  // namespace packrec
