// The storage probe: what the device under the scratch directory delivers, the yardstick every
// later figure is shown against. A scratch file of incompressible bytes is written and synced,
// then read with O_DIRECT (no page cache in the way) where the filesystem takes it: sequentially
// in 1 MiB blocks, and in 4 KiB blocks at random aligned offsets, one at a time and 32 in flight.
// The same three numbers `fio` reports for --rw=read --bs=1M, --rw=randread --bs=4k at iodepth 1
// and 32 (benchmarks/check_bench.sh compares them).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "bench/bench_internal.h"
#include "core/file_io.h"
#include "core/random.h"

namespace packrec::bench {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kSequentialBlock = 1 << 20;
constexpr std::uint32_t kRandomBlock = 4096;
constexpr unsigned kRandomDepth = 32;

// The scratch file, removed on every path out of the probe.
class ScratchFile {
 public:
  ~ScratchFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  Status Create(const fs::path& dir) {
    std::string name = (dir / "packrec-probe-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) return ErrnoStatus("create the storage probe's scratch file in", dir, errno);
    path_ = name;
    fd_ = fd;
    return Status::OK();
  }
  // Written with O_DIRECT where the filesystem takes it: a buffered gigabyte would push the
  // user's warm data out of the page cache and leave writeback running under the reads.
  Status Fill(std::uint64_t bytes) {
    AlignedBuffer block = AllocateAligned(kSequentialBlock);
    auto* words = reinterpret_cast<std::uint64_t*>(block.get());
    const int flags = ::fcntl(fd_, F_GETFL);
    bool direct = flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0;
    SplitMix64 random(0x70726f6265);
    for (std::uint64_t written = 0; written < bytes; written += kSequentialBlock) {
      for (std::size_t i = 0; i < kSequentialBlock / 8; ++i) words[i] = random.Next();
      const char* data = reinterpret_cast<const char*>(block.get());
      for (std::size_t done = 0; done < kSequentialBlock;) {
        const ssize_t n =
            ::pwrite(fd_, data + done, kSequentialBlock - done, static_cast<off_t>(written + done));
        if (n < 0 && errno == EINVAL && direct) {
          direct = false;  // the filesystem refused O_DIRECT after all
          ::fcntl(fd_, F_SETFL, flags);
          continue;
        }
        if (n < 0) {
          if (errno == EINTR) continue;
          return ErrnoStatus("write", path_, errno);
        }
        done += static_cast<std::size_t>(n);
      }
    }
    if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
    ::close(fd_);
    fd_ = -1;
    return Status::OK();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  int fd_ = -1;
};

int OpenForReading(const fs::path& path, bool direct) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
}

std::uint64_t RandomOffset(SplitMix64& random, std::uint64_t blocks) {
  return random.Below(blocks) * kRandomBlock;
}

// Reads the whole scratch file in 1 MiB blocks; MB/s.
Result<double> SequentialRead(const fs::path& path, std::uint64_t bytes, bool direct) {
  const ScopedFd fd(OpenForReading(path, direct));
  if (fd.get() < 0) return ErrnoStatus("open", path, errno);
  AlignedBuffer buffer = AllocateAligned(kSequentialBlock);
  const auto start = Clock::now();
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd.get(), buffer.get(), kSequentialBlock, static_cast<off_t>(done));
    if (n <= 0) return ErrnoStatus("read", path, n < 0 ? errno : EIO);
    done += static_cast<std::uint64_t>(n);
  }
  return static_cast<double>(done) / 1e6 / SecondsSince(start);
}

// Random 4 KiB reads, one in flight, for `seconds`; IOPS.
Result<double> RandomReadsDepth1(const fs::path& path, std::uint64_t blocks, bool direct,
                                 double seconds) {
  const ScopedFd fd(OpenForReading(path, direct));
  if (fd.get() < 0) return ErrnoStatus("open", path, errno);
  if (!direct) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
  AlignedBuffer buffer = AllocateAligned(kRandomBlock);
  SplitMix64 random(1);
  std::uint64_t reads = 0;
  const Deadline deadline(seconds);
  const auto start = Clock::now();
  while (!deadline.passed()) {
    const off_t offset = static_cast<off_t>(RandomOffset(random, blocks));
    if (::pread(fd.get(), buffer.get(), kRandomBlock, offset) != kRandomBlock) {
      return ErrnoStatus("read", path, errno);
    }
    ++reads;
  }
  return static_cast<double>(reads) / SecondsSince(start);
}

// The same `requests`, kRandomDepth threads of blocking reads (without io_uring); IOPS.
Result<double> RandomReadsOnThreads(const fs::path& path, int fd,
                                    const std::vector<IoRequest>& requests, double seconds) {
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> failed{false};
  const Deadline deadline(seconds);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kRandomDepth; ++t) {
    threads.emplace_back([&] {
      AlignedBuffer buffer = AllocateAligned(kRandomBlock);
      for (std::uint64_t i; !deadline.passed() && (i = next.fetch_add(1)) < requests.size();) {
        if (::pread(fd, buffer.get(), kRandomBlock, static_cast<off_t>(requests[i].offset)) !=
            kRandomBlock) {
          failed = true;
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (failed) return Status::IOError("read " + path.string() + " failed");
  return static_cast<double>(std::min<std::uint64_t>(next, requests.size())) / SecondsSince(start);
}

// Random 4 KiB reads, kRandomDepth in flight (io_uring, else threads), for `seconds`.
Status RandomReadsDeep(const fs::path& path, std::uint64_t blocks, double seconds,
                       StorageProbe& probe) {
  probe.random_depth = kRandomDepth;
  const ScopedFd fd(OpenForReading(path, probe.direct_io));
  if (fd.get() < 0) return ErrnoStatus("open", path, errno);
  if (!probe.direct_io) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
  SplitMix64 random(2);
  // Enough requests for the time given at any plausible rate; the deadline stops it.
  std::vector<IoRequest> requests(std::min<std::uint64_t>(4'000'000, blocks * 4));
  for (IoRequest& request : requests) {
    request = {fd.get(), RandomOffset(random, blocks), kRandomBlock};
  }
  Result<IoCount> ring = UringRead(requests, kRandomDepth, Deadline(seconds));
  if (ring.ok()) {
    probe.random_engine = "io_uring";
    probe.random_iops = static_cast<double>(ring->requests) / ring->seconds;
    return Status::OK();
  }
  probe.random_engine = "threads";
  PACKREC_ASSIGN_OR_RETURN(probe.random_iops,
                           RandomReadsOnThreads(path, fd.get(), requests, seconds));
  return Status::OK();
}

}  // namespace

Result<StorageProbe> ProbeStorage(const Plan& plan, const fs::path& data_path,
                                  const BenchProgress& progress) {
  StorageProbe probe;
  const fs::path dir =
      plan.options.scratch_dir.empty() ? DefaultTempDir() : plan.options.scratch_dir;
  const std::uint64_t bytes =
      std::max<std::uint64_t>(plan.probe_file_bytes / kSequentialBlock, 1) * kSequentialBlock;
  if (progress)
    progress("storage probe: writing a " + std::to_string(bytes >> 20) + " MiB scratch file in " +
             dir.string());
  ScratchFile scratch;
  PACKREC_RETURN_IF_ERROR(scratch.Create(dir));
  PACKREC_RETURN_IF_ERROR(scratch.Fill(bytes));
  probe.scratch_file = scratch.path().string();
  probe.file_bytes = bytes;
  probe.filesystem = FilesystemType(dir);
  struct stat data_st {
  }, scratch_st{};
  probe.same_filesystem_as_data = ::stat(data_path.c_str(), &data_st) == 0 &&
                                  ::stat(dir.c_str(), &scratch_st) == 0 &&
                                  data_st.st_dev == scratch_st.st_dev;

  // O_DIRECT where the filesystem takes it (tmpfs does not); else buffered reads of an evicted
  // file, with readahead off for the random part.
  probe.direct_io = ScopedFd(OpenForReading(scratch.path(), true)).get() >= 0;
  const auto evict = [&]() -> Status {
    if (probe.direct_io) return Status::OK();
    return EvictFromPageCache({scratch.path()}).status();
  };

  if (progress) progress("storage probe: sequential read, 1 MiB blocks");
  PACKREC_RETURN_IF_ERROR(evict());
  PACKREC_ASSIGN_OR_RETURN(probe.sequential_mb_per_s,
                           SequentialRead(scratch.path(), bytes, probe.direct_io));

  const std::uint64_t blocks = bytes / kRandomBlock;
  const double seconds = plan.options.quick ? 1.0 : 3.0;
  if (progress) progress("storage probe: random 4 KiB reads, 1 in flight");
  PACKREC_RETURN_IF_ERROR(evict());
  PACKREC_ASSIGN_OR_RETURN(probe.random_iops_qd1,
                           RandomReadsDepth1(scratch.path(), blocks, probe.direct_io, seconds));

  if (progress) progress("storage probe: random 4 KiB reads, 32 in flight");
  PACKREC_RETURN_IF_ERROR(evict());
  PACKREC_RETURN_IF_ERROR(RandomReadsDeep(scratch.path(), blocks, seconds, probe));
  probe.ran = true;
  return probe;
}

}  // namespace packrec::bench
