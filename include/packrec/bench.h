// packrec bench: is the data delivered fast enough? Measures, on this machine and on the user's
// own data, what the storage can do (a probe on a scratch file), what each way of reading the data
// gets out of it (loose files and every packed format; sequential and random order; cold and warm
// page cache; 1, 2, 4 ... readers; io_uring for shards), what each stage of the loader costs
// (read, decode, augment, collate, upload; alone and together), and how long a consumer of a given
// rate waits. AnalyzeBench names the slowest stage and says what to change.
//
// Writes: only the storage probe's scratch file, in BenchOptions::scratch_dir (or the system temp
// dir), removed before RunBench returns. Nothing is written beside the data, so a dataset on a
// read-only mount can be measured. Cold-cache runs evict the data's pages with
// posix_fadvise(POSIX_FADV_DONTNEED) (after an fdatasync when dirty pages would stay) and count the
// pages still resident with mincore(2); each cold figure carries that count.
//
// Threading: RunBench runs its own threads; call it from one thread. Not meant to run beside
// other work: it measures the machine.
#ifndef PACKREC_BENCH_H_
#define PACKREC_BENCH_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/status.h"
#include "packrec/storage_emulation.h"

namespace packrec {

struct BenchOptions {
  // Image folders (read as loose files, the way ImageFolder does) and packed datasets (shard,
  // LMDB, HDF5), in any mix. The loader's stages run on the first packed dataset (shards first).
  std::vector<std::filesystem::path> inputs;
  // Where the storage probe writes its scratch file; empty: $TMPDIR or /tmp. For figures that
  // describe the data's device, put it on the data's filesystem (the report says when it is not).
  std::filesystem::path scratch_dir;
  bool quick = false;          // under a minute: fewer sweep points, shorter measurements
  bool probe_storage = true;   // false: no scratch file, no device figures
  bool cold_cache = true;      // false: warm-cache measurements only
  bool measure_stages = true;  // false: storage and access patterns only (no decode, no loader)
  // Readers in the concurrency sweep; empty: 1, 2, 4, 8, 16 (quick: 1 and 4).
  std::vector<unsigned> readers;
  // io_uring queue depths for shards; empty: 1, 4, 16, 64 (quick: 1 and 16).
  std::vector<unsigned> queue_depths;
  unsigned threads = 0;  // decode/loader threads; 0: one per core
  std::uint32_t batch_size = 256;
  std::uint32_t prefetch_batches = 4;
  std::uint32_t output_size = 224;
  // The simulated consumer (a GPU's training step) in images/s, for the starvation figure.
  double consumer_images_per_s = 2000;
  // Per measurement: records read at most, and seconds at most; 0: by mode (quick 1,000 and 0.3 s,
  // full 20,000 and 3 s).
  std::uint64_t max_records = 0;
  double max_seconds = 0;
  std::uint64_t probe_file_bytes = 0;  // 0: quick 128 MiB, full 1 GiB
  // Runs of each loader measurement (the pipeline and its batch-size and prefetch sweeps) and of
  // each cold access row on threads, whose spread decides whether two settings (or formats)
  // differ at all; 0: quick 2, full 3.
  unsigned repeats = 0;
  int cuda_device = 0;
  // The inputs sit on emulated storage (packrec bench --storage; not owned, outlives RunBench):
  // cold measurements also drop the filesystem's metadata caches, each cold access row counts the
  // reads that reached the device, warm access rows are left out (they never reach it), and a
  // cold epoch of the loader is measured (shuffle global and windowed). Access measurements last
  // at least 3 s (quick) or 5 s (full): the kernel's throttle lets a short burst through at its
  // start.
  const StorageEmulation* storage_emulation = nullptr;
};

struct MachineInfo {
  std::string cpu_model;
  unsigned cores = 0;
  std::uint64_t memory_bytes = 0;
  std::string kernel;
  std::string data_path;        // the first input
  std::string data_filesystem;  // "ext4", "xfs", "tmpfs", "nfs", ...
  std::string data_device;      // the mount's source, e.g. /dev/nvme0n1p2
  // What the kernel's rotational flag says: "hdd", "ssd" or "unknown". Unreliable in VMs and
  // clouds: virtio disks and cloud volumes often report rotational whatever backs them.
  std::string data_device_flag;
  // The device class: measured by the storage probe where it ran with O_DIRECT on the data's
  // filesystem ("hdd", "ssd", "nvme", "network or cloud volume": AnalyzeBench, from its latency
  // at depth 1 and IOPS at depth), else the kernel flag's.
  std::string data_device_kind;
  std::string data_device_kind_from;  // "measured" or "kernel flag"
  std::string gpu;                    // device name, or why there is none
};

// What eviction from the page cache achieved, summed over the files of one measurement.
struct CacheEviction {
  std::uint64_t files = 0;
  std::uint64_t pages = 0;
  std::uint64_t resident_before = 0;
  std::uint64_t resident_after = 0;  // pages mincore still reports resident after eviction
  bool synced = false;               // dirty pages were written back first (fdatasync)
  bool verified() const { return resident_after == 0; }
};

struct StorageProbe {
  bool ran = false;
  std::string skipped;  // why it did not run
  std::string scratch_file;
  std::string filesystem;
  bool same_filesystem_as_data = false;
  bool direct_io = false;  // O_DIRECT; otherwise buffered reads after eviction
  std::uint64_t file_bytes = 0;
  std::uint32_t sequential_block_bytes = 1 << 20;
  double sequential_mb_per_s = 0;  // one reader, 1 MiB blocks
  std::uint32_t random_block_bytes = 4096;
  double random_iops_qd1 = 0;  // one reader, 4 KiB blocks at random aligned offsets
  double random_iops = 0;      // at random_depth
  unsigned random_depth = 0;
  std::string random_engine;  // "io_uring" or "threads"
};

struct AccessMeasurement {
  std::string source;  // "files" (loose files), or the dataset's format (DatasetInfo::format)
  std::string path;    // a path, or a dataset's URL
  std::string order;   // "sequential" or "random"
  // "cold" or "warm"; "network" for a dataset at a URL (no page cache between it and the reads).
  std::string cache;
  // "threads" (Reader::Read / ForEach, or read(2) of loose files), "io_uring"; at a URL
  // "request" (one record per request, one at a time) or "coalesced" (batches announced whole
  // with Reader::WillNeed, as the Loader does: sorted, merged, many requests in flight).
  std::string engine;
  unsigned concurrency = 1;  // readers, io_uring queue depth, or records per coalesced batch
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  double records_per_s = 0;
  double mb_per_s = 0;
  // mb_per_s over the probe's sequential bandwidth; empty without a probe, and for a figure
  // served by a cache below this machine (below).
  std::optional<double> device_bandwidth_share;
  std::optional<CacheEviction> eviction;  // cold runs
  // A cold figure faster than the probe measured the device (MB/s above its sequential
  // bandwidth, or random records/s above its IOPS): the pages came from a cache this machine
  // cannot evict (a VM host's page cache, a RAID controller's, a network filesystem's), so it is
  // no device figure. Set by AnalyzeBench; such rows stay out of device ratios and findings.
  bool served_by_cache_below = false;
  // On emulated storage: the reads that reached the device (after the page cache and
  // readahead), and, set by AnalyzeBench, the seconds the profile's limits give them: the larger
  // of bytes over its bytes/s and reads over its reads/s, and which of the two that is ("bytes"
  // or "reads").
  std::optional<DeviceReads> device_reads;
  std::optional<double> limits_seconds;
  std::string limited_by;
  // Cold rows on threads: records/s of each of BenchOptions::repeats passes (records_per_s is
  // their median); empty: one pass (warm rows, io_uring rows, emulated storage).
  std::vector<double> runs;
  // Network rows: the HTTP requests they took (retries included), and for "request" rows the
  // median seconds of one, in milliseconds.
  std::optional<std::uint64_t> requests;
  std::optional<double> request_latency_ms;
};

// One stage of the loader, alone or all together ("pipeline").
struct StageMeasurement {
  // "read", "decode" (whole image), "augment" (crop + resize + flip of decoded pixels),
  // "decode+augment" (the loader's fused region decode), "collate", "upload", "pipeline"; on
  // emulated storage also "epoch cold": the loader from a cold cache, what a training job's
  // epoch over data larger than memory gets (`sweep` "shuffle", `note` names the shuffle).
  std::string stage;
  unsigned threads = 1;
  std::uint32_t batch_size = 0;        // collate, upload and pipeline
  std::uint32_t prefetch_batches = 0;  // pipeline
  std::uint64_t images = 0;
  double seconds = 0;
  double images_per_s = 0;  // the median of `runs` where it was repeated
  std::string sweep;  // "", "threads", "batch_size", "prefetch" or "shuffle": the sweep it is of
  std::string note;
  // images/s of each run of a repeated measurement (BenchOptions::repeats); empty: run once.
  std::vector<double> runs;
  // "epoch cold" on emulated storage: the reads that reached the device during it.
  std::optional<DeviceReads> device_reads;
};

// Host-to-device copies of one batch's bytes.
struct UploadMeasurement {
  bool pinned = false;
  bool async = false;  // cudaMemcpyAsync on two streams, overlapped; else cudaMemcpy
  std::uint32_t batch_size = 0;
  std::uint64_t bytes = 0;  // per copy
  double gb_per_s = 0;
  double host_blocked_share = 0;  // of the wall time, spent by the host inside the copy calls
};

struct StarvationMeasurement {
  double consumer_images_per_s = 0;
  double delivered_images_per_s = 0;  // what the loader kept up
  double wait_share = 0;  // of the consumer's time, waiting for the next batch (first excluded)
  std::uint64_t batches = 0;
  unsigned threads = 0;
  std::uint32_t batch_size = 0;
  std::uint32_t prefetch_batches = 0;
};

// One thing to change (or keep), as data: the knob, its value, where it is set, and what the
// measurements say it gives.
struct BenchAdvice {
  // "threads" (the loader's decode threads), "prefetch", "format", "resize_short", "shuffle"
  // (windowed, on emulated slow storage), "consumer" (the verdict: whether the loader keeps up).
  std::string knob;
  std::string value;     // as it is passed: "2", "shard", "256"
  std::string set_with;  // "packrec.Loader(threads=2), packrec bench --threads 2"
  std::optional<double> expected_images_per_s;  // what the measurements predict with it
  std::string why;                              // the measurement it rests on, in words
};

struct BenchReport {
  std::string packrec_version;
  std::string started_at;  // UTC, ISO 8601
  std::string mode;        // "quick" or "full"
  double seconds = 0;      // the whole run
  MachineInfo machine;
  StorageProbe storage;
  std::vector<AccessMeasurement> access;
  std::string stage_source;  // the dataset the stages ran on
  std::vector<StageMeasurement> stages;
  std::string gpu_status;  // "ok: <device>" or "no CUDA device: <why>"
  std::vector<UploadMeasurement> upload;
  std::optional<StarvationMeasurement> starvation;
  // The emulated device the inputs were copied to (packrec bench --storage), and how.
  std::optional<StorageProfile> emulated_storage;
  std::string emulated_device;  // StorageEmulation::Describe()
  // Filled by AnalyzeBench.
  std::string bottleneck;  // a stage name, or "storage"
  std::vector<std::string> findings;
  std::string recommendation;  // the advice below, in one line of prose
  std::vector<BenchAdvice> advice;
  std::vector<std::string> notes;  // caveats: unverified eviction, probe on another filesystem ...
  // The machine's load around the run: the 1-minute load average before and after, and the share
  // of CPU time stolen by the hypervisor and spent busy over the whole run (/proc/stat).
  double load_before = 0;
  double load_after = 0;
  double steal_share = 0;
  double busy_share = 0;
};

// Called with a short line before each measurement ("shard: random, cold, 4 readers").
using BenchProgress = std::function<void(std::string_view)>;

// Runs every measurement BenchOptions asks for. Errors: InvalidArgument (no inputs, bad options),
// NotFound or the reader's error for an input that is neither an image folder nor a dataset,
// IOError from the probe's scratch file (naming it). A measurement that cannot run on this machine
// (no CUDA device, no io_uring) is left out and says why in the report.
Result<BenchReport> RunBench(const BenchOptions& options, const BenchProgress& progress = {});

// The size of the storage probe's scratch file for `options`: probe_file_bytes, or by mode (quick
// 128 MiB, full 1 GiB). For room made ahead of the run (StorageEmulation::Create's extra_bytes).
std::uint64_t ProbeFileBytes(const BenchOptions& options);

// Names the bottleneck, writes the findings and the recommendation. A pure function of the
// measurements already in `report` (RunBench calls it).
void AnalyzeBench(const BenchOptions& options, BenchReport& report);

// The report as JSON (schema: docs/bench.schema.json) and as the terminal table.
std::string BenchReportJson(const BenchReport& report);
std::string BenchReportTable(const BenchReport& report);

// Evicts `files` from the page cache and counts what stays resident (see the header comment).
// Errors: IOError naming the file.
Result<CacheEviction> EvictFromPageCache(const std::vector<std::filesystem::path>& files);
// Pages of `file` resident in the page cache now, and its pages in all.
Result<std::pair<std::uint64_t, std::uint64_t>> ResidentPages(const std::filesystem::path& file);

}  // namespace packrec

#endif  // PACKREC_BENCH_H_
