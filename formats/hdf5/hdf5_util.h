// Small helpers over the HDF5 C API: owned identifiers, the library lock, error text.
#ifndef PACKREC_FORMATS_HDF5_HDF5_UTIL_H_
#define PACKREC_FORMATS_HDF5_HDF5_UTIL_H_

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "packrec/status.h"

namespace packrec::hdf5 {

// 2: /meta_checksums covers each record's label, sizes, flags and key. Version 1 files still
// read; their metadata is under no checksum.
// 3: records carry fields, one group /fields/<name> each (docs/formats/hdf5.md). Written only
// for a dataset with fields; a dataset without is version 2, byte for byte as before.
inline constexpr std::uint32_t kHdf5FormatVersion = 3;
inline constexpr std::uint32_t kHdf5VersionWithoutFields = 2;
// 4: the manifest's version of a file with WebP records (encoding 4), with or without fields (the
// manifest's `fields` says which): its datasets are those of version 2 or 3, but readers before
// WebP must refuse it as *not supported*. The newest version read.
inline constexpr std::uint32_t kHdf5VersionWithWebp = 4;
inline constexpr char kFieldsGroup[] = "fields";
inline constexpr char kManifestFormatName[] = "packrec-hdf5";
inline constexpr char kManifestAttribute[] = "packrec_manifest";
inline constexpr char kClassesAttribute[] = "classes";
// Dataset names: docs/formats/hdf5.md.
inline constexpr char kData[] = "data";
inline constexpr char kOffsets[] = "offsets";
inline constexpr char kLabels[] = "labels";
inline constexpr char kKeys[] = "keys";
// The keys again, as one byte blob and N + 1 offsets: HDF5 reads variable-length strings one heap
// object at a time (17 ms for 10,000 keys, more than the rest of an open), these in two reads.
inline constexpr char kKeyBytes[] = "key_bytes";
inline constexpr char kKeyOffsets[] = "key_offsets";
inline constexpr char kWidth[] = "width";
inline constexpr char kHeight[] = "height";
inline constexpr char kChannels[] = "channels";
inline constexpr char kEncoding[] = "encoding";
inline constexpr char kFlags[] = "flags";
inline constexpr char kSubsampling[] = "subsampling";
inline constexpr char kChecksums[] = "checksums";
inline constexpr char kRawSizes[] = "raw_sizes";
inline constexpr char kMetaChecksums[] = "meta_checksums";  // version 2
inline constexpr char kImages[] = "images";  // the pixels layout's N x H x W x 3 dataset

enum RecordFlags : std::uint8_t {
  kFlagProgressive = 1u << 0,
  kFlagZstd = 1u << 1,
};

// What /meta_checksums holds for record `index` (docs/formats/hdf5.md): XXH64 of the key, seeded
// with XXH64 of the record's other metadata as 28 little-endian bytes (label int64, width uint32,
// height uint32, channels, encoding, flags uint8, a zero byte, raw size uint64), seeded with the
// record index.
struct RecordMeta {
  std::int64_t label = 0;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint8_t channels = 0;
  std::uint8_t encoding = 0;
  std::uint8_t flags = 0;
  std::uint64_t raw_size = 0;
};
std::uint64_t RecordMetaChecksum(std::uint64_t index, const RecordMeta& meta, std::string_view key);

// Every HDF5 call in packrec holds this lock: a library built without thread safety must not be
// entered from two threads, and only open and write use HDF5 at all (reads go through the map).
// It is also held across fork() (pthread_atfork), so a child never starts with it taken.
std::mutex& LibraryMutex();

// Once, before packrec's first other HDF5 call: turns off HDF5's printing of its error stack to
// stderr (errors become Status values), and its clean-up at exit. HDF5 1.10.8 keeps a dangling
// file identifier after an H5Fclose that failed to write (a full disk), and its clean-up at exit
// then crashes on it (SIGSEGV in H5F__close_cb, found by reliability/fault_test.cc); every file
// packrec opens is closed explicitly, so the clean-up has nothing to do.
void PrepareLibrary();

// The innermost error of the current HDF5 error stack.
struct LibraryError {
  std::string text;      // "" when there is none
  int system_error = 0;  // the errno of a failed system call on the file (open, read, write)
};
LibraryError LastError();

// An HDF5 identifier closed with `close` on destruction.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { Reset(); }
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      close_ = other.close_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and says whether that worked: closing a dataset or attribute written to flushes
  // its buffered bytes, so a failed write may first show here (a full disk, an I/O error).
  [[nodiscard]] herr_t Close() {
    const herr_t result = id_ >= 0 && close_ != nullptr ? close_(id_) : 0;
    id_ = H5I_INVALID_HID;
    return result;
  }
  // Forgets the identifier without closing it (it was closed by hand).
  void Release() { id_ = H5I_INVALID_HID; }
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// "hdf5 OPERATION PATH: DETAIL" with the last error's text, as `code`, except: an IOError when
// that error is a failed system call (a disk error is not corruption), Truncated when HDF5 found
// the file shorter than it says.
Status Hdf5Error(StatusCode code, const std::string& operation, const std::filesystem::path& path);

}  // namespace packrec::hdf5

#endif  // PACKREC_FORMATS_HDF5_HDF5_UTIL_H_
