// Small pieces every record source shares: labels written as text, class names gathered while
// reading, where a record came from.
#ifndef PACKREC_LIB_STORAGE_SOURCE_UTIL_H_
#define PACKREC_LIB_STORAGE_SOURCE_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_io.h"
#include "packrec/source.h"

namespace packrec {

// A non-negative decimal integer below 2^32, surrounding whitespace allowed ("3", " 7\n"), or a
// float with no fraction ("3.000000", as im2rec writes labels).
bool ParseLabelText(std::string_view text, std::uint32_t* label);

// `text` with A-Z made a-z (file extensions, member names; not locale-dependent).
std::string AsciiLower(std::string text);

// "jpg", "png", "webp" from the first bytes, else "bin": for keys of sources that store none.
std::string_view SniffImageExtension(std::span<const std::byte> bytes);

// "FILE record N at byte B".
std::string RecordOrigin(const std::filesystem::path& file, std::uint64_t record,
                         std::uint64_t offset);

// Class names seen beside labels. Complete() is the class list when every label from 0 to the
// largest seen has exactly one name, else empty (a partial or contradictory map is no map).
class ClassNameCollector {
 public:
  void Note(std::uint32_t label, std::string_view name);
  std::vector<std::string> Complete() const;

 private:
  std::map<std::uint32_t, std::string> names_;
  bool contradicted_ = false;
};

// Keeps the kernel reading ahead of a sequential reader: the next kWindow bytes are requested
// (POSIX_FADV_WILLNEED) whenever the reader passes the middle of what was requested, so a cold
// source streams at the storage's speed instead of waiting on each record's read.
class ReadAhead {
 public:
  static constexpr std::uint64_t kWindow = 32ull << 20;
  // Off for good (SourceOptions::read_ahead): At does nothing.
  void Disable() { enabled_ = false; }
  void Reset() { requested_end_ = 0; }
  template <typename File>
  void At(const File& file, std::uint64_t position, std::uint64_t size) {
    if (!enabled_) return;
    if (position + kWindow / 2 < requested_end_ || requested_end_ >= size) return;
    const std::uint64_t from = std::max(position, requested_end_);
    requested_end_ = std::min(size, position + kWindow);
    if (requested_end_ > from) file.AdviseWillNeed(from, requested_end_ - from);
  }

 private:
  std::uint64_t requested_end_ = 0;
  bool enabled_ = true;
};

// One file of a source read front to back with pread, the kernel kept reading ahead.
// Read and AppendTo go through a window of kWindowBytes filled by one pread: a pread for each
// header and each record, and a zero-filled vector for every record to land in, had cost the
// reading thread (the import's busiest) more than the copy out of a window still in cache.
struct SequentialFile {
  static constexpr std::size_t kWindowBytes = 256 << 10;

  std::unique_ptr<RandomAccessFile> file;
  std::uint64_t size = 0;
  std::uint64_t position = 0;
  std::uint64_t number = 0;  // records begun in this file
  ReadAhead read_ahead;

  // On failure (no such file, not a regular file, ...) it stays closed.
  Status Open(const std::filesystem::path& path);
  bool is_open() const { return file != nullptr; }
  bool at_end() const { return position >= size; }
  void Close() { file.reset(); }
  // Call before each record: keeps ReadAhead::kWindow requested ahead of `position`.
  void Prefetch() { read_ahead.At(*file, position, size); }
  // Fills `out` from `offset`. Truncated past the end of the file.
  // A failed Read or AppendTo ends the file (at_end()): the file shrank while it was read, or an
  // I/O error, and reading on from the same place would fail the same way, a rejected record each
  // time, for ever.
  Status Read(std::uint64_t offset, std::span<std::byte> out);
  // Appends the `length` bytes at `offset` to `out`.
  Status AppendTo(std::uint64_t offset, std::size_t length, std::vector<std::byte>& out);

 private:
  Status EndIfFailed(Status read);
  // The window's bytes from `from`: empty when `from` lies outside it.
  std::span<const std::byte> Windowed(std::uint64_t from) const;
  Status FillWindow(std::uint64_t from);

  std::vector<std::byte> window_;
  std::uint64_t window_offset_ = 0;
  std::size_t window_size_ = 0;
};

// The base of the sources that read a list of files, one after the other.
class FileListSource : public RecordSource {
 public:
  const std::vector<std::filesystem::path>& files() const override { return files_; }
  std::uint64_t bytes_read() const override { return files_behind_bytes_ + position_in_file(); }

 protected:
  explicit FileListSource(std::vector<std::filesystem::path> files) : files_(std::move(files)) {}
  // Where the source is in the file it has open; 0 when none is.
  virtual std::uint64_t position_in_file() const = 0;
  // Done with the current file (read to its end, or given up on): it counts whole in bytes_read.
  void LeaveFile(std::uint64_t file_size) {
    files_behind_bytes_ += file_size;
    ++file_index_;
  }
  // The current file cannot be opened (removed since it was listed, no permission, not a regular
  // file): `record` becomes one reject naming it and `why`, and the next file is read. A loose
  // image that cannot be opened is one reject too, so under --on-error skip the rest of the
  // source converts and the rejects report says which file was left out.
  void RejectUnopenedFile(SourceRecord& record, const Status& why);
  // The current file where it can be read: itself, or its local copy when it is at a URL
  // (SourceOptions::local_copy), waiting for the download.
  Result<std::filesystem::path> LocalFile(const SourceOptions& options) const {
    if (options.local_copy) return options.local_copy(file_index_);
    return files_[file_index_];
  }
  // Opens the current file (LocalFile) in `in`.
  Status OpenCurrent(SequentialFile& in, const SourceOptions& options) const {
    PACKREC_ASSIGN_OR_RETURN(const std::filesystem::path local, LocalFile(options));
    return in.Open(local);
  }

  std::vector<std::filesystem::path> files_;
  std::size_t file_index_ = 0;  // the file read now, or files_.size() at the end

 private:
  std::uint64_t files_behind_bytes_ = 0;
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_SOURCE_UTIL_H_
