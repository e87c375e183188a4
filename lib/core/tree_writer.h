// Files written below one directory without ever following a link out of it (extract).
#ifndef PACKREC_LIB_CORE_TREE_WRITER_H_
#define PACKREC_LIB_CORE_TREE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "core/file_io.h"
#include "packrec/status.h"

namespace packrec {

// Each directory is created and opened from its parent's descriptor with O_NOFOLLOW (mkdirat,
// openat), so a symbolic link planted in the tree, or a directory swapped for one while files are
// written, is refused instead of followed: nothing is created outside the root. Each file is
// written under a temporary name in its directory and renamed into place, so an existing file is
// replaced, never written through: a hard link to a file elsewhere keeps that file's bytes, a
// symbolic link is replaced by the file. Not thread-safe (one writer per tree).
class TreeWriter {
 public:
  // The root is created (with parents) when missing. A root that is itself a symbolic link is
  // followed: the caller named it.
  static Result<TreeWriter> Open(const std::filesystem::path& root);

  // Writes `bytes` to `relative` ('/'-separated; no empty, "." or ".." component), creating its
  // directories. An existing file is AlreadyExists unless `overwrite`; a link or a non-directory
  // on the way is InvalidArgument, naming it. Nothing of a failed write is left.
  Status Write(std::string_view relative, std::span<const std::byte> bytes, bool overwrite);

 private:
  TreeWriter() = default;
  // The descriptor of `relative_dir` below the root ("" is the root), created as needed; the
  // last one is kept, since records of one directory mostly come together.
  Result<int> Directory(std::string_view relative_dir);

  std::filesystem::path root_;
  ScopedFd root_fd_;
  std::string cached_dir_;
  ScopedFd cached_fd_;
  std::uint64_t temporaries_ = 0;  // for unique temporary names
};

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_TREE_WRITER_H_
