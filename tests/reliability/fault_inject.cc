// An LD_PRELOAD shim that makes one chosen write or fsync of a file under a chosen directory fail,
// the way a full disk or a failing device does, and logs every call it counts. The tests run the
// packrec CLI under it (reliability/fault_test.cc).
//   PACKREC_FAULT_DIR=/path        only files under it count
//   PACKREC_FAULT=write:N:ENOSPC   the Nth counted write (write, pwrite, writev, pwritev) fails
//   PACKREC_FAULT=fsync:N:EIO      the Nth counted fsync or fdatasync fails
//   PACKREC_FAULT_LOG=/path/log    one line per counted call: "write|fsync N PATH ok|ERRNO"
// Hand-written because no Debian package interposes on these calls for a test (libfiu is not in
// Debian 12); it is kept to what the tests need.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

struct Config {
  std::string dir;
  std::string kind;  // "write" or "fsync"
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
        c.error = name == "ENOSPC" ? ENOSPC : name == "EDQUOT" ? EDQUOT : EIO;
      }
    }
    if (const char* log = std::getenv("PACKREC_FAULT_LOG")) c.log = std::fopen(log, "a");
    return c;
  }();
  return config;
}

std::atomic<long> write_calls{0};
std::atomic<long> fsync_calls{0};
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
  return target;
}

// Counts the call; true (with errno set) when this one is to fail.
bool ShouldFail(const char* kind, std::atomic<long>& counter, int fd) {
  const std::string path = CountedPath(fd);
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

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
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

}  // extern "C"
