// POSIX file access with errors as Status values that name the path and the operation.
#ifndef PACKREC_LIB_CORE_FILE_IO_H_
#define PACKREC_LIB_CORE_FILE_IO_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/status.h"

namespace packrec {

class Xxh64Stream;

// "open /a/b: No such file or directory" as an IOError (NotFound for ENOENT).
Status ErrnoStatus(std::string_view operation, const std::filesystem::path& path, int error);

Result<std::vector<std::byte>> ReadWholeFile(const std::filesystem::path& path);

// A file's size and modification time, as one read saw them (to notice it changed later).
struct FileStamp {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
// ReadWholeFile, also giving the stamp of what was read.
Result<std::vector<std::byte>> ReadWholeFile(const std::filesystem::path& path, FileStamp* stamp);
// The stamp of `path` now (stat).
Result<FileStamp> StampOf(const std::filesystem::path& path);

// A file's bytes as text (a view into `bytes`).
inline std::string_view AsText(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// The lines of a text file's bytes, split at '\n' (a last line without one counts; the views
// point into `text`).
std::vector<std::string_view> SplitLines(std::string_view text);

// Whether `path` is a regular file (following symlinks): false when nothing is there, an
// IOError when it cannot be told (EACCES on a directory above it, EIO), so a caller that sniffs
// formats does not take an unreadable dataset for something else.
Result<bool> IsRegularFile(const std::filesystem::path& path);

// Writes all of [data, data + size) to `fd`, retrying short writes and EINTR: 0, or the errno.
int WriteAll(int fd, const std::byte* data, std::size_t size);

// Owns a file descriptor: closed on destruction (fd < 0 holds nothing). Movable (a moved-from
// one holds nothing), not copyable.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ~ScopedFd();
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// An append-only file, created exclusively (O_EXCL), written through a buffer.
class WritableFile {
 public:
  static Result<std::unique_ptr<WritableFile>> Create(const std::filesystem::path& path);
  // Writes into an existing file from `offset` on (a region another library reserved in it).
  static Result<std::unique_ptr<WritableFile>> OpenAt(const std::filesystem::path& path,
                                                      std::uint64_t offset);
  ~WritableFile();
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;

  Status Append(std::span<const std::byte> bytes);
  Status AppendZeros(std::size_t count);
  // Keeps an xxHash64 of everything appended from now on.
  void EnableChecksum();
  // Hands each full buffer to a thread of this file's own, which writes it while the caller
  // fills the next one: the kernel's copy (page allocation included) leaves the caller's thread,
  // an import's busiest before. A failed write is returned by a later Append, Sync or Close,
  // naming the path. Call before the first Append.
  void EnableWriteBehind();
  // REQUIRES: EnableChecksum() was called before the first Append; Sync() or Close() since the
  // last Append.
  std::uint64_t checksum() const;
  // Flushes the buffer and fsyncs.
  Status Sync();
  Status Close();
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  struct WriteBehind;

  WritableFile(std::filesystem::path path, int fd);
  Status FlushBuffer();
  // Writes `bytes` at the end of the file: on the write-behind thread when there is one (the
  // checksum stays on the caller's thread).
  Status WriteOnly(std::span<const std::byte> bytes);
  // Waits for the write-behind thread to finish what it was handed; its first error.
  Status Drain();
  void StopWriteBehind();

  std::filesystem::path path_;
  int fd_;
  std::vector<std::byte> buffer_;
  std::size_t buffered_ = 0;
  std::uint64_t size_ = 0;
  std::unique_ptr<Xxh64Stream> checksum_;
  std::unique_ptr<WriteBehind> behind_;  // null unless EnableWriteBehind()
};

// A file read with pread: positioned reads from any thread, no mapping to fault in.
class RandomAccessFile {
 public:
  static Result<std::unique_ptr<RandomAccessFile>> Open(const std::filesystem::path& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;
  // The file's size; InvalidInput when it is not a regular file.
  Result<std::uint64_t> RegularFileSize() const;
  // InvalidInput when the file is no longer what RegularFileSize saw (its size or modification
  // time moved: someone is writing it).
  Status CheckUnchanged() const;
  // Size and modification time as RegularFileSize saw them.
  FileStamp Stamp() const {
    return {static_cast<std::uint64_t>(seen_size_.load()), seen_mtime_ns_.load()};
  }
  // Fills `out` from `offset`. Truncated when the file ends first.
  Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const;
  // One read into `out` from `offset`: how many bytes came, fewer near the end, 0 past it.
  Result<std::size_t> ReadSome(std::uint64_t offset, std::span<std::byte> out) const;
  // Hint that [offset, offset + length) will be read soon and in order.
  void AdviseSequential(std::uint64_t offset, std::uint64_t length) const;
  // Asks the kernel to start reading [offset, offset + length) now, without waiting for it.
  void AdviseWillNeed(std::uint64_t offset, std::uint64_t length) const;

 private:
  RandomAccessFile(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::filesystem::path path_;
  int fd_;
  // As RegularFileSize saw the file (atomic: reads may come from any thread).
  mutable std::atomic<std::int64_t> seen_size_{-1};
  mutable std::atomic<std::int64_t> seen_mtime_ns_{0};
};

// A whole file mapped read-only. Move-only.
class MappedFile {
 public:
  static Result<MappedFile> Open(const std::filesystem::path& path);
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  // Starts reading the whole mapping in the background (a hint).
  void AdviseWillNeed() const;

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

Status RenamePath(const std::filesystem::path& from, const std::filesystem::path& to);
Status SyncDirectory(const std::filesystem::path& dir);
// fsync of a file written by someone else (a library that closed it without syncing).
Status SyncFile(const std::filesystem::path& file);
// Writes `bytes` to path.tmp, fsyncs, renames over `path`, fsyncs the directory.
Status WriteFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes);
// Writes a new file (fails if it exists unless overwrite) without the rename dance.
Status WriteWholeFile(const std::filesystem::path& path, std::span<const std::byte> bytes,
                      bool overwrite);

inline std::span<const std::byte> AsBytes(std::string_view text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_FILE_IO_H_
