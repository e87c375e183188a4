#include "core/tree_writer.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace packrec {

namespace fs = std::filesystem;

Result<TreeWriter> TreeWriter::Open(const fs::path& root) {
  std::error_code error;
  fs::create_directories(root, error);
  if (error) return ErrnoStatus("create directory", root, error.value());
  TreeWriter writer;
  writer.root_ = root;
  writer.root_fd_ = ScopedFd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (writer.root_fd_.get() < 0) return ErrnoStatus("open directory", root, errno);
  return writer;
}

Result<int> TreeWriter::Directory(std::string_view relative_dir) {
  if (relative_dir.empty()) return root_fd_.get();
  if (cached_fd_.get() >= 0 && relative_dir == cached_dir_) return cached_fd_.get();
  ScopedFd current;
  int parent = root_fd_.get();
  std::size_t start = 0;
  while (start < relative_dir.size()) {
    std::size_t end = relative_dir.find('/', start);
    if (end == std::string_view::npos) end = relative_dir.size();
    const std::string part(relative_dir.substr(start, end - start));
    const fs::path shown = root_ / std::string(relative_dir.substr(0, end));
    if (part.empty() || part == "." || part == "..") {
      return Status::InvalidArgument(shown.string() + ": not a plain path below " + root_.string() +
                                     "; refusing");
    }
    if (::mkdirat(parent, part.c_str(), 0777) != 0 && errno != EEXIST) {
      return ErrnoStatus("create directory", shown, errno);
    }
    ScopedFd next(::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      if (errno == ELOOP || errno == ENOTDIR) {
        return Status::InvalidArgument(shown.string() +
                                       " is a symbolic link or not a directory; refusing to "
                                       "write through it (it could lead outside " +
                                       root_.string() + ")");
      }
      return ErrnoStatus("open directory", shown, errno);
    }
    current = std::move(next);
    parent = current.get();
    start = end + 1;
  }
  cached_dir_ = std::string(relative_dir);
  cached_fd_ = std::move(current);
  return cached_fd_.get();
}

Status TreeWriter::Write(std::string_view relative, std::span<const std::byte> bytes,
                         bool overwrite) {
  const std::size_t slash = relative.rfind('/');
  const std::string_view dir =
      slash == std::string_view::npos ? std::string_view() : relative.substr(0, slash);
  const std::string name(slash == std::string_view::npos ? relative : relative.substr(slash + 1));
  const fs::path target = root_ / std::string(relative);
  if (name.empty() || name == "." || name == "..") {
    return Status::InvalidArgument(target.string() + ": not a plain path below " + root_.string() +
                                   "; refusing");
  }
  PACKREC_ASSIGN_OR_RETURN(const int dir_fd, Directory(dir));
  // Hidden, and unique to this process and file, so no key of the dataset can name it.
  const std::string temporary = ".packrec-extract-" + std::to_string(::getpid()) + "-" +
                                std::to_string(temporaries_++) + ".tmp";
  const int fd = ::openat(dir_fd, temporary.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create", target, errno);
  const int write_error = WriteAll(fd, bytes.data(), bytes.size());
  const int close_error = ::close(fd) != 0 ? errno : 0;
  if (write_error != 0 || close_error != 0) {
    ::unlinkat(dir_fd, temporary.c_str(), 0);
    return ErrnoStatus("write", target, write_error != 0 ? write_error : close_error);
  }
  // rename(2) replaces the directory entry, whatever it was (a file, a hard link, a symbolic
  // link), and never opens it: nothing outside the tree is written.
  int renamed =
      overwrite ? ::renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str())
                : ::renameat2(dir_fd, temporary.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE);
  if (renamed != 0 && !overwrite && (errno == EINVAL || errno == ENOSYS)) {
    // A file system without RENAME_NOREPLACE: link(2) refuses an existing name too.
    renamed = ::linkat(dir_fd, temporary.c_str(), dir_fd, name.c_str(), 0);
    const int link_error = errno;
    if (renamed == 0) ::unlinkat(dir_fd, temporary.c_str(), 0);
    errno = link_error;
  }
  if (renamed != 0) {
    const int rename_error = errno;
    ::unlinkat(dir_fd, temporary.c_str(), 0);
    if (rename_error == EEXIST) {
      return Status::AlreadyExists(target.string() + " exists")
          .WithRemedy(Remedy::kOverwriteToReplace);
    }
    return ErrnoStatus("create", target, rename_error);
  }
  return Status::OK();
}

}  // namespace packrec
