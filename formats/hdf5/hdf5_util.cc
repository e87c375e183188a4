#include "hdf5/hdf5_util.h"

#include <pthread.h>

#include <array>
#include <charconv>
#include <cstring>
#include <string_view>

#include "core/checksum.h"
#include "core/endian.h"

namespace packrec::hdf5 {

std::uint64_t RecordMetaChecksum(std::uint64_t index, const RecordMeta& meta,
                                 std::string_view key) {
  std::array<std::byte, 28> fixed{};
  StoreLE<std::int64_t>(&fixed[0], meta.label);
  StoreLE<std::uint32_t>(&fixed[8], meta.width);
  StoreLE<std::uint32_t>(&fixed[12], meta.height);
  fixed[16] = std::byte{meta.channels};
  fixed[17] = std::byte{meta.encoding};
  fixed[18] = std::byte{meta.flags};
  StoreLE<std::uint64_t>(&fixed[20], meta.raw_size);
  return Xxh64(key, Xxh64(fixed, index));
}

std::mutex& LibraryMutex() {
  static std::mutex mutex;
  // fork() while another thread holds the lock (inside HDF5) left the child with a lock nobody
  // would release: its first HDF5 open waited for ever (22 of 30 forks taken during another
  // thread's opens). The handlers take the lock around fork(), so no packrec thread is inside
  // HDF5 when the child is made (HDF5's own state is then quiescent too), and release it on both
  // sides. Registered with the lock's first use, before any thread can hold it.
  static const bool registered = [] {
    return pthread_atfork([] { mutex.lock(); }, [] { mutex.unlock(); }, [] { mutex.unlock(); }) ==
           0;
  }();
  (void)registered;
  return mutex;
}

void PrepareLibrary() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Fails, harmlessly, when the library was initialized already (h5py in the same process).
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

namespace {

// HDF5's file driver reports a failed system call (open, read, write) over several lines:
// "file read failed: time = ..., filename = '...', file descriptor = 4, errno = 5, error
// message = 'Input/output error', buf = ...". Kept: what failed and the system's reason
// ("file read failed: Input/output error").
void ShortenSystemError(LibraryError& error) {
  static constexpr std::string_view kErrno = "errno = ";
  const std::size_t at = error.text.find(kErrno);
  if (at == std::string::npos) return;
  int number = 0;
  const char* first = error.text.data() + at + kErrno.size();
  const auto [end, parsed] = std::from_chars(first, error.text.data() + error.text.size(), number);
  if (parsed != std::errc() || end == first || number <= 0) return;
  error.system_error = number;
  error.text = error.text.substr(0, error.text.find(':')) + ": " + std::strerror(number);
}

}  // namespace

LibraryError LastError() {
  LibraryError error;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* entry, void* out) -> herr_t {
        auto* innermost = static_cast<LibraryError*>(out);
        if (innermost->text.empty() && entry->desc != nullptr) {
          innermost->text = entry->desc;
          ShortenSystemError(*innermost);
        }
        return 0;
      },
      &error);
  return error;
}

Status Hdf5Error(StatusCode code, const std::string& operation, const std::filesystem::path& path) {
  std::string message = "hdf5 " + operation + " " + path.string();
  const LibraryError error = LastError();
  if (!error.text.empty()) message += ": " + error.text;
  if (error.system_error != 0) {
    code = StatusCode::kIOError;
  } else if (error.text.find("truncated") != std::string::npos) {
    // HDF5's "truncated file: eof = ...": the file is shorter than its superblock says.
    code = StatusCode::kTruncated;
  }
  return {code, std::move(message)};
}

}  // namespace packrec::hdf5
