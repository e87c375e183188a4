#include "core/output_dir.h"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <system_error>

#include "core/file_io.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

// Marks a staging directory as ours, so a leftover of a killed run may be removed.
constexpr char kStagingMarker[] = ".packrec-staging";

fs::path StagingPath(const fs::path& dir) {
  fs::path staging = dir;
  staging += ".packrec-staging";
  return staging;
}

}  // namespace

Result<OutputDirectory> OutputDirectory::Prepare(const fs::path& dir, const char* marker_file,
                                                 bool overwrite) {
  OutputDirectory out;
  out.final_dir_ = dir;
  out.write_dir_ = dir;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(dir, error);
  if (!fs::exists(status)) {
    fs::create_directories(dir, error);
    if (error) return ErrnoStatus("create directory", dir, error.value());
    out.created_ = true;
    return out;
  }
  if (!fs::is_directory(fs::status(dir, error))) {
    return Status::AlreadyExists(dir.string() + " exists and is not a directory");
  }
  // A run killed while writing its first journal leaves only that journal's temporary file.
  const fs::path first_journal = dir / (std::string(kResumeJournalName) + ".tmp");
  if (fs::exists(first_journal, error) && !fs::exists(dir / kResumeJournalName, error)) {
    std::size_t entries = 0;
    for (auto it = fs::directory_iterator(dir, error); !error && it != fs::directory_iterator();
         it.increment(error)) {
      ++entries;
    }
    if (entries == 1) fs::remove(first_journal, error);
  }
  if (fs::is_empty(dir, error)) return out;
  if (fs::exists(dir / kResumeJournalName, error)) {
    if (!overwrite) {
      return Status::AlreadyExists(
          dir.string() +
          " holds an interrupted conversion: pass --resume to continue it, or --overwrite to "
          "start again");
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
      fs::remove_all(entry.path(), error);
      if (error) return ErrnoStatus("remove", entry.path(), error.value());
    }
    return out;
  }
  if (!fs::exists(dir / marker_file)) {
    return Status::AlreadyExists(dir.string() +
                                 " exists, is not empty and is not a packrec dataset; refusing "
                                 "to write into it (choose another output path)");
  }
  if (!overwrite) {
    return Status::AlreadyExists(dir.string() +
                                 " already holds a dataset (pass --overwrite to replace it)");
  }
  const fs::path staging = StagingPath(dir);
  if (fs::exists(staging, error)) {
    if (!fs::exists(staging / kStagingMarker, error)) {
      return Status::AlreadyExists(
          staging.string() + " exists and is not packrec's; remove it to replace " + dir.string());
    }
    fs::remove_all(staging, error);  // left by a run that was killed
    if (error) return ErrnoStatus("remove", staging, error.value());
  }
  fs::create_directory(staging, error);
  if (error) return ErrnoStatus("create directory", staging, error.value());
  PACKREC_RETURN_IF_ERROR(WriteWholeFile(staging / kStagingMarker, {}, false));
  out.write_dir_ = staging;
  out.staged_ = true;
  return out;
}

Result<OutputDirectory> OutputDirectory::Reopen(const fs::path& dir) {
  OutputDirectory out;
  out.final_dir_ = dir;
  std::error_code error;
  if (fs::exists(dir / kResumeJournalName, error)) {
    out.write_dir_ = dir;
    return out;
  }
  const fs::path staging = StagingPath(dir);
  if (fs::exists(staging / kStagingMarker, error) &&
      fs::exists(staging / kResumeJournalName, error)) {
    out.write_dir_ = staging;
    out.staged_ = true;
    return out;
  }
  return Status::NotFound("no interrupted conversion at " + dir.string() + " (no " +
                          kResumeJournalName + ")");
}

Status OutputDirectory::Commit() {
  if (settled_) return Status::Internal("output directory committed twice");
  settled_ = true;
  if (!staged_) return Status::OK();
  std::error_code error;
  fs::remove(write_dir_ / kStagingMarker, error);
  // RENAME_EXCHANGE swaps both names in one step: the path always holds a whole dataset.
  if (::renameat2(AT_FDCWD, write_dir_.c_str(), AT_FDCWD, final_dir_.c_str(), RENAME_EXCHANGE) !=
      0) {
    if (errno != EINVAL && errno != ENOSYS) {
      return ErrnoStatus("exchange with " + final_dir_.string() + " the new dataset", write_dir_,
                         errno);
    }
    // A file system without the exchange: move the old one aside, then the new one in.
    fs::path old = final_dir_;
    old += ".packrec-old";
    fs::remove_all(old, error);
    PACKREC_RETURN_IF_ERROR(RenamePath(final_dir_, old));
    PACKREC_RETURN_IF_ERROR(RenamePath(write_dir_, final_dir_));
    fs::remove_all(old, error);
  } else {
    fs::remove_all(write_dir_, error);  // now the old dataset
  }
  const fs::path parent = final_dir_.has_parent_path() ? final_dir_.parent_path() : ".";
  return SyncDirectory(parent);
}

void OutputDirectory::Abort() {
  if (settled_) return;
  settled_ = true;
  std::error_code ignored;
  if (staged_ || created_) {
    fs::remove_all(write_dir_, ignored);
  } else {
    // An existing directory that was empty before we wrote into it.
    for (const fs::directory_entry& entry : fs::directory_iterator(write_dir_, ignored)) {
      fs::remove_all(entry.path(), ignored);
    }
  }
}

}  // namespace packrec
