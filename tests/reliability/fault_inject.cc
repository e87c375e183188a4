// An LD_PRELOAD shim that makes one chosen write, fsync, open or read of a file under a chosen
// directory fail, the way a full disk, a failing device or a file without read permission does,
// and logs every call it counts. The tests run the packrec CLI under it (fault_test.cc).
//   PACKREC_FAULT_DIR=/path        only files under it count
//   PACKREC_FAULT=write:N:ENOSPC   the Nth counted write (write, pwrite, writev, pwritev) fails
//   PACKREC_FAULT=fsync:N:EIO      the Nth counted fsync or fdatasync fails
//   PACKREC_FAULT=open:N:EACCES    the Nth counted open of a file (open, openat; by the path
//                                  given; directories are not counted) fails: an unreadable file,
//                                  even for root, whom mode 000 does not stop
//   PACKREC_FAULT=read:N:EIO       the Nth counted read or pread fails
//   PACKREC_FAULT=thread:N:EAGAIN  the Nth pthread_create and every later one fail, as they do
//                                  once a user's process limit is reached (which root, who runs
//                                  the tests, is not held to); not limited to PACKREC_FAULT_DIR
//   PACKREC_FAULT_LOG=/path/log    one line per counted call: "KIND N PATH ok|ERRNO"
// Hand-written because no Debian package interposes on these calls for a test (libfiu is not in
// Debian 12); it is kept to what the tests need.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

struct Config {
  std::string dir;
  std::string kind;  // "write", "fsync", "open" or "read"
  long target = 0;
  int error = 0;
  std::FILE* log = nullptr;
};

const Config& GetConfig() {
  static const Config config = [] {
    Config c;
    if (const char* dir = std::getenv("PACKREC_FAULT_DIR")) c.dir = dir;
    if (const char* fault = std::getenv("PACKREC_FAULT")) {
      const std::string spec = fault;
      const std::size_t first = spec.find(':');
      const std::size_t second = spec.find(':', first + 1);
      if (first != std::string::npos && second != std::string::npos) {
        c.kind = spec.substr(0, first);
        c.target = std::atol(spec.substr(first + 1, second - first - 1).c_str());
        const std::string name = spec.substr(second + 1);
        c.error = name == "ENOSPC"   ? ENOSPC
                  : name == "EDQUOT" ? EDQUOT
                  : name == "EACCES" ? EACCES
                  : name == "EAGAIN" ? EAGAIN
                                     : EIO;
      }
    }
    if (const char* log = std::getenv("PACKREC_FAULT_LOG")) c.log = std::fopen(log, "a");
    return c;
  }();
  return config;
}

std::atomic<long> write_calls{0};
std::atomic<long> fsync_calls{0};
std::atomic<long> open_calls{0};
std::atomic<long> read_calls{0};
std::atomic<long> thread_calls{0};
std::mutex log_mutex;

// The file's path when it lies under PACKREC_FAULT_DIR; empty otherwise.
std::string CountedPath(int fd) {
  const Config& config = GetConfig();
  if (config.dir.empty() || fd < 0) return "";
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[4096];
  // readlink is not interposed, so this does not recurse.
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  if (n <= 0) return "";
  target[n] = '\0';
  if (std::strncmp(target, config.dir.c_str(), config.dir.size()) != 0) return "";
  // A run's lock file holds only its pid, for the message a second run gets; a failed write of
  // it changes nothing, so it is not one of the writes the tests fail in turn.
  const std::size_t length = std::strlen(target);
  constexpr char kLockSuffix[] = ".packrec-lock";
  if (length >= sizeof kLockSuffix - 1 &&
      std::strcmp(target + length - (sizeof kLockSuffix - 1), kLockSuffix) == 0) {
    return "";
  }
  return target;
}

// The path when an open of it counts: it names a file under PACKREC_FAULT_DIR (the tests pass
// absolute paths; a relative one counts only if it is spelled from the directory itself), and it
// is not opened as a directory (listing the tree is not what the open faults are about).
std::string CountedPath(const char* path, int flags) {
  const Config& config = GetConfig();
  if (config.dir.empty() || path == nullptr || (flags & O_DIRECTORY) != 0) return "";
  if (std::strncmp(path, config.dir.c_str(), config.dir.size()) != 0) return "";
  return path;
}

// Counts the call on `path` (empty: not counted); true (with errno set) when this one is to fail.
bool ShouldFail(const char* kind, std::atomic<long>& counter, const std::string& path) {
  if (path.empty()) return false;
  const Config& config = GetConfig();
  const long n = ++counter;
  const bool fail = config.kind == kind && n == config.target;
  if (config.log != nullptr) {
    std::lock_guard lock(log_mutex);
    std::fprintf(config.log, "%s %ld %s %s\n", kind, n, path.c_str(),
                 fail ? std::strerror(config.error) : "ok");
    std::fflush(config.log);
  }
  if (fail) errno = config.error;
  return fail;
}

bool ShouldFail(const char* kind, std::atomic<long>& counter, int fd) {
  return ShouldFail(kind, counter, CountedPath(fd));
}

// open's mode argument is there only when the flags can create a file.
mode_t ModeArgument(int flags, va_list args) {
  return (flags & (O_CREAT | O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(args, int)) : 0;
}

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

using OpenFunction = int (*)(const char*, int, ...);

// open and open64 differ only in the libc symbol they pass on to.
int CountedOpen(OpenFunction real, const char* path, int flags, mode_t mode) {
  if (ShouldFail("open", open_calls, CountedPath(path, flags))) return -1;
  return real(path, flags, mode);
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buffer, size_t size) {
  static const auto real = Next<ssize_t (*)(int, const void*, size_t)>("write");
  if (ShouldFail("write", write_calls, fd)) return -1;
  return real(fd, buffer, size);
}

ssize_t pwrite(int fd, const void* buffer, size_t size, off_t offset) {
  static const auto real = Next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  if (ShouldFail("write", write_calls, fd)) return -1;
  return real(fd, buffer, size, offset);
}

ssize_t pwrite64(int fd, const void* buffer, size_t size, off64_t offset) {
  static const auto real = Next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  if (ShouldFail("write", write_calls, fd)) return -1;
  return real(fd, buffer, size, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  static const auto real = Next<ssize_t (*)(int, const struct iovec*, int)>("writev");
  if (ShouldFail("write", write_calls, fd)) return -1;
  return real(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
  static const auto real = Next<ssize_t (*)(int, const struct iovec*, int, off_t)>("pwritev");
  if (ShouldFail("write", write_calls, fd)) return -1;
  return real(fd, iov, count, offset);
}

ssize_t pwritev64(int fd, const struct iovec* iov, int count, off64_t offset) {
  static const auto real = Next<ssize_t (*)(int, const struct iovec*, int, off64_t)>("pwritev64");
  if (ShouldFail("write", write_calls, fd)) return -1;
  return real(fd, iov, count, offset);
}

int fsync(int fd) {
  static const auto real = Next<int (*)(int)>("fsync");
  if (ShouldFail("fsync", fsync_calls, fd)) return -1;
  return real(fd);
}

int fdatasync(int fd) {
  static const auto real = Next<int (*)(int)>("fdatasync");
  if (ShouldFail("fsync", fsync_calls, fd)) return -1;
  return real(fd);
}

int open(const char* path, int flags, ...) {
  static const auto real = Next<OpenFunction>("open");
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeArgument(flags, args);
  va_end(args);
  return CountedOpen(real, path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  static const auto real = Next<OpenFunction>("open64");
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeArgument(flags, args);
  va_end(args);
  return CountedOpen(real, path, flags, mode);
}

int openat(int dir_fd, const char* path, int flags, ...) {
  static const auto real = Next<int (*)(int, const char*, int, ...)>("openat");
  va_list args;
  va_start(args, flags);
  const mode_t mode = ModeArgument(flags, args);
  va_end(args);
  if (ShouldFail("open", open_calls, CountedPath(path, flags))) return -1;
  return real(dir_fd, path, flags, mode);
}

ssize_t read(int fd, void* buffer, size_t size) {
  static const auto real = Next<ssize_t (*)(int, void*, size_t)>("read");
  if (ShouldFail("read", read_calls, fd)) return -1;
  return real(fd, buffer, size);
}

ssize_t pread(int fd, void* buffer, size_t size, off_t offset) {
  static const auto real = Next<ssize_t (*)(int, void*, size_t, off_t)>("pread");
  if (ShouldFail("read", read_calls, fd)) return -1;
  return real(fd, buffer, size, offset);
}

ssize_t pread64(int fd, void* buffer, size_t size, off64_t offset) {
  static const auto real = Next<ssize_t (*)(int, void*, size_t, off64_t)>("pread64");
  if (ShouldFail("read", read_calls, fd)) return -1;
  return real(fd, buffer, size, offset);
}

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                   void* argument) {
  static const auto real =
      Next<int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*)>("pthread_create");
  const Config& config = GetConfig();
  const long n = ++thread_calls;
  if (config.kind == "thread" && n >= config.target) {
    if (config.log != nullptr) {
      std::lock_guard lock(log_mutex);
      std::fprintf(config.log, "thread %ld - %s\n", n, std::strerror(config.error));
      std::fflush(config.log);
    }
    return config.error;
  }
  return real(thread, attr, start, argument);
}

}  // extern "C"
