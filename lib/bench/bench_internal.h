// What the parts of `packrec bench` share: the resolved plan, the sources it reads (loose files or
// a packed dataset behind one face) and the measurement loops.
#ifndef PACKREC_LIB_BENCH_BENCH_INTERNAL_H_
#define PACKREC_LIB_BENCH_BENCH_INTERNAL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "packrec/bench.h"
#include "packrec/ingest.h"
#include "packrec/reader.h"

namespace packrec::bench {

// BenchOptions with every default filled in for the mode.
struct Plan {
  BenchOptions options;
  std::vector<unsigned> readers;
  std::vector<unsigned> queue_depths;
  std::vector<unsigned> decode_threads;  // the decode thread sweep
  std::vector<std::uint32_t> batch_sizes;
  std::vector<std::uint32_t> prefetch_depths;
  unsigned threads = 1;
  std::uint64_t max_records = 0;
  double max_seconds = 0;
  // The access rows' and cold epochs' measurements: max_seconds, or longer on emulated storage.
  double device_seconds = 0;
  std::uint64_t probe_file_bytes = 0;
  std::uint64_t sample_images = 0;  // records held in memory for the decode-side stages
  unsigned repeats = 1;             // runs of each loader measurement
  std::string uring_unavailable;    // UringUnavailable(), asked once per run
};

Plan MakePlan(const BenchOptions& options);

using Clock = std::chrono::steady_clock;
inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Deadline {
 public:
  explicit Deadline(double seconds)
      : end_(Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  bool passed() const { return Clock::now() >= end_; }

 private:
  Clock::time_point end_;
};

// What a batch of reads did: requests (or records) completed, bytes, wall time.
struct IoRequest {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};
struct IoCount {
  std::uint64_t requests = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

// 4096-aligned memory, as O_DIRECT wants it; null when out of memory.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;
inline AlignedBuffer AllocateAligned(std::size_t bytes) {
  return AlignedBuffer(
      static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
}

// Sums one touched byte per cache line, so every byte read must really arrive.
std::uint64_t TouchBytes(std::span<const std::byte> bytes);

// Loose files of an image folder, or a packed dataset: what every access measurement reads.
class Source {
 public:
  static Result<std::unique_ptr<Source>> Open(const std::filesystem::path& input);

  // "files", or the dataset's format (DatasetInfo::format).
  const std::string& kind() const { return kind_; }
  // Whether its records lie at known offsets in its files (Reader::Locate: shard datasets), so
  // that the io_uring rows can read them without the reader.
  bool locates_records() const { return locates_records_; }
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const;
  // The dataset behind a packed source; null for loose files.
  const std::shared_ptr<const Reader>& reader() const { return reader_; }
  // Evicts the files holding `records` (all of a packed dataset's files) from the page cache. A
  // packed dataset's reader is closed first and opened again after: pages mapped into this
  // process cannot be dropped.
  Result<CacheEviction> Evict(const std::vector<std::uint64_t>& records);

  // Reads record `index` into `buffer` (loose files) or through Reader::Read; returns the bytes
  // delivered. Thread-safe, one buffer and scratch per thread.
  Result<std::uint64_t> ReadOne(std::uint64_t index, std::vector<std::byte>& buffer,
                                ReadScratch& scratch, std::uint64_t& sink) const;
  // Reads records [begin, end) in order (ForEach for datasets) until `deadline`.
  Status ReadRange(std::uint64_t begin, std::uint64_t end, const Deadline& deadline,
                   std::uint64_t& records, std::uint64_t& bytes, std::uint64_t& sink) const;
  // Record `index`'s encoded bytes, copied.
  Result<std::vector<std::byte>> Copy(std::uint64_t index) const;

 private:
  std::string kind_;
  bool locates_records_ = false;
  std::filesystem::path path_;
  Status OpenReader();

  SourceListing listing_;
  std::shared_ptr<const Reader> reader_;
  std::vector<std::filesystem::path> dataset_files_;
};

// The records a measurement reads: [0, n) in order, or n drawn without repetition at random.
std::vector<std::uint64_t> SequentialRecords(std::uint64_t size, std::uint64_t n);
std::vector<std::uint64_t> RandomRecords(std::uint64_t size, std::uint64_t n, std::uint64_t seed);

// Reads `records` with `readers` threads: contiguous slices in order (sequential) or one shared
// cursor over the list (random), for at most `max_seconds`. IoCount::requests counts records.
Result<IoCount> ReadRecords(const Source& source, const std::vector<std::uint64_t>& records,
                            bool sequential, unsigned readers, double max_seconds);

// Cold: the records' pages evicted (a packed source: all its files) and, on emulated storage,
// the filesystem's metadata dropped too (a cold cache is one that has not seen the files
// either). None, and nothing done, for warm runs.
Result<std::optional<CacheEviction>> MakeCold(Source& source,
                                              const std::vector<std::uint64_t>& records,
                                              const Plan& plan, bool cold);
// Reads the emulated device has served this process so far; none off emulated storage.
Result<std::optional<DeviceReads>> DeviceReadsNow(const Plan& plan);
// after - before; none when either is.
std::optional<DeviceReads> ReadsBetween(const std::optional<DeviceReads>& before,
                                        const std::optional<DeviceReads>& after);

// The access-pattern grid of one source: order x cache x readers, and io_uring for shards.
// A dataset at a URL (network.cc): one request at a time (its latency), and batches announced
// whole (WillNeed), at random and in order, with the requests they took.
Result<std::vector<AccessMeasurement>> MeasureNetworkAccess(const Source& source, const Plan& plan,
                                                            const BenchProgress& progress);
Result<std::vector<AccessMeasurement>> MeasureAccess(Source& source, const Plan& plan,
                                                     const StorageProbe& probe,
                                                     const BenchProgress& progress);

// The storage probe on a scratch file in plan.options.scratch_dir (see StorageProbe).
Result<StorageProbe> ProbeStorage(const Plan& plan, const std::filesystem::path& data_path,
                                  const BenchProgress& progress);

MachineInfo DescribeMachine(const std::filesystem::path& data_path, int cuda_device);
// The 1-minute load average (/proc/loadavg); 0 where unknown.
double LoadAverage();
// All CPUs' time so far, in clock ticks (/proc/stat's first line): busy (user, nice, system, irq,
// softirq), stolen by the hypervisor, and in all. Zeros where unknown.
struct CpuTimes {
  std::uint64_t busy = 0;
  std::uint64_t steal = 0;
  std::uint64_t total = 0;
};
CpuTimes ReadCpuTimes();
// $TMPDIR, or /tmp where it is unset or empty: where scratch files go by default.
std::filesystem::path DefaultTempDir();
// A /proc/meminfo figure ("MemTotal", "MemAvailable") in bytes; 0 where unknown.
std::uint64_t MeminfoBytes(std::string_view key);
// The filesystem type holding `path` ("ext4") and its device (the mount's source).
std::string FilesystemType(const std::filesystem::path& path, std::string* device = nullptr);

// Stages, sweeps, GPU upload and the starvation figure, into `report`.
Status MeasureStages(const Source& source, const Plan& plan, BenchReport& report,
                     const BenchProgress& progress);

// On emulated storage (BenchOptions::storage_emulation), the loader over a cold cache: one
// "epoch cold" stage per shuffle (global, windowed), into `report`. Nothing elsewhere.
Status MeasureColdEpochs(Source& source, const Plan& plan, BenchReport& report,
                         const BenchProgress& progress);

// Positioned reads through io_uring, `depth` in flight (bench.h: the shard io_uring mode and the
// probe's random IOPS). Built with Debian's liburing when found; otherwise NotSupported.
// Buffers are 4096-aligned, so O_DIRECT descriptors work with aligned requests.
Result<IoCount> UringRead(const std::vector<IoRequest>& requests, unsigned depth,
                          const Deadline& deadline);
// Why io_uring cannot be used here, or empty.
std::string UringUnavailable();

}  // namespace packrec::bench

#endif  // PACKREC_LIB_BENCH_BENCH_INTERNAL_H_
