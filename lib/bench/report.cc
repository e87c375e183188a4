// What the measurements mean: the bottleneck, the findings and the recommendation (AnalyzeBench),
// and the two faces of a report, JSON (docs/bench.schema.json) and the terminal table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "packrec/bench.h"

namespace packrec {
namespace {

using nlohmann::json;

std::string Fixed(double value, int digits = 0) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// 12,345 for counts and rates: easier to read at a glance than 12345.
std::string Grouped(double value) {
  const std::string digits = Fixed(std::fabs(value));
  std::string grouped = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

std::string Percent(double share) { return Fixed(share * 100, share < 0.1 ? 1 : 0) + "%"; }

std::string SourceName(const std::string& kind) { return kind == "files" ? "loose files" : kind; }

// The fastest row matching a predicate, by records/s.
template <typename Predicate>
const AccessMeasurement* Best(const std::vector<AccessMeasurement>& rows, Predicate predicate) {
  const AccessMeasurement* best = nullptr;
  for (const AccessMeasurement& row : rows) {
    if (predicate(row) && (best == nullptr || row.records_per_s > best->records_per_s)) {
      best = &row;
    }
  }
  return best;
}

const StageMeasurement* FindStage(const std::vector<StageMeasurement>& stages,
                                  const std::string& name, unsigned threads) {
  for (const StageMeasurement& stage : stages) {
    if (stage.stage == name && (threads == 0 || stage.threads == threads) &&
        (stage.sweep.empty() || stage.sweep == "threads")) {
      return &stage;
    }
  }
  return nullptr;
}

unsigned MaxThreads(const std::vector<StageMeasurement>& stages, const std::string& name) {
  unsigned threads = 0;
  for (const StageMeasurement& stage : stages) {
    if (stage.stage == name) threads = std::max(threads, stage.threads);
  }
  return threads;
}

struct Candidate {
  std::string name;
  double images_per_s;
};

// What the findings establish, for the recommendation.
struct Analysis {
  const AccessMeasurement* best_packed = nullptr;  // the fastest packed source, random order
  unsigned readers_needed = 0;                     // the fewest readers that reach 90% of its best
  unsigned threads = 0;                            // the loader's thread count in the stage sweep
  std::optional<Candidate> slowest;
  const StageMeasurement* one_thread = nullptr;   // decode+augment on 1 thread
  const StageMeasurement* all_threads = nullptr;  // ... on `threads`
  const StageMeasurement* pipeline = nullptr;
  std::uint32_t prefetch_needed = 0;
  std::vector<std::string> format_ties;  // packed formats within the best one's spread
};

void StorageFindings(BenchReport& report) {
  const StorageProbe& storage = report.storage;
  if (storage.ran) {
    report.findings.push_back("storage (" + storage.filesystem +
                              (storage.direct_io ? ", O_DIRECT" : ", buffered") +
                              "): " + Grouped(storage.sequential_mb_per_s) + " MB/s sequential, " +
                              Grouped(storage.random_iops) + " random 4 KiB reads/s at depth " +
                              std::to_string(storage.random_depth) + " (" +
                              Grouped(storage.random_iops_qd1) + " at depth 1)");
    if (!storage.same_filesystem_as_data) {
      report.notes.push_back("the storage probe ran on " + storage.filesystem + " (" +
                             storage.scratch_file +
                             "), not on the data's filesystem: pass --scratch DIR on the data's "
                             "filesystem for device figures that describe it");
    }
  }
}

// A cold figure the device cannot have delivered: over its sequential bandwidth, or (random
// order: one read per record at least) over its IOPS at the probe's depth, by more than 10% (the
// probe's own noise). Only against a probe that read the data's filesystem with O_DIRECT: a
// buffered probe may itself be served by a cache below.
void MarkCacheServed(BenchReport& report) {
  const StorageProbe& probe = report.storage;
  if (!probe.ran || !probe.direct_io || !probe.same_filesystem_as_data) return;
  constexpr double kMargin = 1.1;
  std::map<std::string, int> rows_by_source;
  for (AccessMeasurement& row : report.access) {
    // On emulated storage the reads were counted at the device: no cache below it, and a random
    // row faster than its reads/s had its records read around others (page faults in a mapping).
    if (row.cache != "cold" || row.device_reads) continue;
    const double iops = std::max(probe.random_iops, probe.random_iops_qd1);
    const bool over_bandwidth =
        probe.sequential_mb_per_s > 0 && row.mb_per_s > kMargin * probe.sequential_mb_per_s;
    const bool over_iops = row.order == "random" && iops > 0 && row.records_per_s > kMargin * iops;
    if (!over_bandwidth && !over_iops) continue;
    row.served_by_cache_below = true;
    row.device_bandwidth_share.reset();
    ++rows_by_source[SourceName(row.source)];
  }
  if (rows_by_source.empty()) return;
  std::string sources;
  for (const auto& [source, rows] : rows_by_source) {
    sources += (sources.empty() ? "" : ", ") + source + " (" + std::to_string(rows) + ")";
  }
  report.notes.push_back(
      "cold figures above what the probe measured the device doing, marked 'cold*': " + sources +
      ". Their pages were evicted here (mincore saw them go) but came from a cache below this "
      "machine: the host's page cache (a VM), a RAID controller's or a network filesystem's. "
      "They are no device figures and stay out of the device ratios; a dataset larger than that "
      "cache, or a cold host, reads at the device's pace");
}

// The device class from what the probe measured, where the kernel's flag is unreliable (virtio
// disks and cloud volumes report rotational whatever backs them). A 7,200 rpm disk answers a
// random 4 KiB read in 4-12 ms; network block storage (EBS, persistent disks, iSCSI) in 0.3-3 ms;
// local flash in under 0.3 ms, NVMe with 200,000+ reads/s at depth. "" when the probe cannot
// tell (not run, buffered, or on another filesystem than the data).
std::string MeasuredDeviceClass(const StorageProbe& probe) {
  if (!probe.ran || !probe.direct_io || !probe.same_filesystem_as_data ||
      probe.random_iops_qd1 <= 0) {
    return "";
  }
  const double latency_ms = 1000.0 / probe.random_iops_qd1;
  if (latency_ms >= 3.0) return "hdd";
  if (latency_ms >= 0.3) return "network or cloud volume";
  return probe.random_iops >= 200'000 ? "nvme" : "ssd";
}

void DeviceClass(BenchReport& report) {
  MachineInfo& machine = report.machine;
  if (machine.data_device_kind_from == "URL") return;  // the network, as DescribeMachine says
  const std::string measured = MeasuredDeviceClass(report.storage);
  if (measured.empty()) {
    machine.data_device_kind = machine.data_device_flag;
    machine.data_device_kind_from = "kernel flag";
    return;
  }
  machine.data_device_kind = measured;
  machine.data_device_kind_from = "measured";
  const bool flag_disagrees = (machine.data_device_flag == "hdd") != (measured == "hdd") &&
                              machine.data_device_flag != "unknown";
  if (flag_disagrees) {
    report.notes.push_back("the kernel reports " + machine.data_device + " as " +
                           (machine.data_device_flag == "hdd" ? "rotational" : "non-rotational") +
                           ", but it answered a random 4 KiB read in " +
                           Fixed(1000.0 / report.storage.random_iops_qd1, 2) +
                           " ms at depth 1 and " + Grouped(report.storage.random_iops) +
                           " reads/s at depth " + std::to_string(report.storage.random_depth) +
                           ": it is taken as " + measured +
                           " (virtio disks and cloud volumes often carry the wrong flag)");
  }
}

// Filesystems whose figures are not a local disk's: named, with what that means.
void FilesystemNotes(BenchReport& report) {
  const std::string& type = report.machine.data_filesystem;
  std::string what;
  if (type == "overlay" || type == "aufs") {
    what =
        "a container's layered filesystem (the image's layers, copy-up on write); mount the "
        "data as a volume (docker -v, a bind mount) so reads go to the disk directly";
  } else if (type.rfind("nfs", 0) == 0 || type == "cifs" || type == "smb3" || type == "ceph" ||
             type == "lustre" || type == "gpfs" || type == "beegfs") {
    what =
        "a network filesystem: latency is the network's and the server's, and the server's "
        "cache can serve 'cold' reads; copy the dataset to local disk or tmpfs when it fits";
  } else if (type == "9p" || type == "virtiofs") {
    what =
        "a host folder shared into a VM: every read crosses to the host (and its page cache), "
        "so figures describe the host, not a device";
  } else if (type.rfind("fuse", 0) == 0) {
    what = "a FUSE filesystem (" + type +
           "): each read is a round trip through a user-space daemon, an object store's for "
           "s3fs/gcsfuse";
  } else if (type == "tmpfs" || type == "ramfs") {
    what = "memory: no device below, every figure is warm";
  }
  if (!what.empty()) report.notes.push_back("the data is on " + type + ", " + what);
}

// Cold cache: was it really cold?
void ColdCacheNotes(BenchReport& report) {
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> unevicted;  // source: pages
  for (const AccessMeasurement& row : report.access) {
    if (row.eviction && !row.eviction->verified()) {
      auto& [left, total] = unevicted[row.source];
      left = std::max(left, row.eviction->resident_after);
      total = std::max(total, row.eviction->pages);
    }
  }
  for (const auto& [source, pages] : unevicted) {
    report.notes.push_back("cold cache not verified for " + SourceName(source) + ": " +
                           Grouped(static_cast<double>(pages.first)) + " of " +
                           Grouped(static_cast<double>(pages.second)) +
                           " pages stayed resident after eviction (a filesystem that cannot drop "
                           "them, such as tmpfs); its cold figures are partly warm");
  }
}

// Whether `a` is the better figure to compare formats by: a device figure before one served by a
// cache below (MarkCacheServed), then more records/s.
bool Faster(const AccessMeasurement& a, const AccessMeasurement& b) {
  if (a.served_by_cache_below != b.served_by_cache_below) return !a.served_by_cache_below;
  return a.records_per_s > b.records_per_s;
}

// The lowest and highest records/s of a cold row's runs (its one figure when run once).
std::pair<double, double> RunRange(const AccessMeasurement& row) {
  if (row.runs.empty()) return {row.records_per_s, row.records_per_s};
  const auto [low, high] = std::minmax_element(row.runs.begin(), row.runs.end());
  return {*low, *high};
}

// Whether another packed format's best random row is as fast as the best one within the spread
// of their repeated runs: then the format advice says either serves.
void FormatTie(const std::map<std::string, const AccessMeasurement*>& best_random,
               Analysis& analysis, BenchReport& report) {
  const AccessMeasurement* best = analysis.best_packed;
  if (best == nullptr || best->runs.empty()) return;
  for (const auto& [source, row] : best_random) {
    if (source == "files" || row == best || row->runs.empty() ||
        row->served_by_cache_below != best->served_by_cache_below) {
      continue;
    }
    const auto [best_low, best_high] = RunRange(*best);
    const auto [low, high] = RunRange(*row);
    if (high < best_low) continue;
    analysis.format_ties.push_back(source);
    report.findings.push_back(SourceName(best->source) + " and " + SourceName(source) +
                              " read at random within the spread of their runs (" +
                              Grouped(best_low) + "-" + Grouped(best_high) + " against " +
                              Grouped(low) + "-" + Grouped(high) + " records/s): neither is ahead");
  }
}

// Formats: random access from a cold cache is what an epoch larger than memory sees.
void FormatFindings(const BenchOptions& options, BenchReport& report, Analysis& analysis) {
  const std::string cache = options.cold_cache ? "cold" : "warm";
  std::map<std::string, const AccessMeasurement*> best_random;
  for (const AccessMeasurement& row : report.access) {
    if (row.order != "random" || row.cache != cache) continue;
    const AccessMeasurement*& best = best_random[row.source];
    if (best == nullptr || Faster(row, *best)) best = &row;
  }
  const AccessMeasurement*& best_packed = analysis.best_packed;
  for (const auto& [source, row] : best_random) {
    if (source != "files" && (best_packed == nullptr || Faster(*row, *best_packed))) {
      best_packed = row;
    }
  }
  for (const auto& [source, row] : best_random) {
    std::string line = SourceName(source) + ", random order, " + cache +
                       " cache: " + Grouped(row->records_per_s) + " records/s, " +
                       Fixed(row->mb_per_s, 1) + " MB/s (" + std::to_string(row->concurrency) +
                       (row->engine == "io_uring" ? " in flight, io_uring"
                        : row->concurrency == 1   ? " reader"
                                                  : " readers") +
                       ")";
    if (row->served_by_cache_below) line += " [cold*: a cache below this machine, not the device]";
    if (source == "files" && best_packed != nullptr && row->records_per_s > 0) {
      if (row->served_by_cache_below || best_packed->served_by_cache_below) {
        line += "; no device ratio to " + SourceName(best_packed->source) + " (cold* figures)";
      } else {
        line += "; " + SourceName(best_packed->source) + " reads " +
                Fixed(best_packed->records_per_s / row->records_per_s, 1) + "x as many records/s";
      }
    }
    report.findings.push_back(line);
  }
  if (const AccessMeasurement* sequential = Best(report.access,
                                                 [&](const AccessMeasurement& row) {
                                                   return row.order == "sequential" &&
                                                          row.cache == cache &&
                                                          row.source != "files" &&
                                                          !row.served_by_cache_below;
                                                 });
      sequential != nullptr && sequential->device_bandwidth_share) {
    report.findings.push_back(SourceName(sequential->source) + ", sequential, " + cache + ": " +
                              Fixed(sequential->mb_per_s, 0) + " MB/s, " +
                              Percent(*sequential->device_bandwidth_share) +
                              " of the device's sequential bandwidth");
  }

  FormatTie(best_random, analysis, report);

  // Readers: the fewest that reach 90% of the best, for the stage dataset's format.
  unsigned& readers_needed = analysis.readers_needed;
  if (best_packed != nullptr) {
    for (const AccessMeasurement& row : report.access) {
      if (row.source == best_packed->source && row.order == "random" && row.cache == cache &&
          row.engine == "threads" && row.records_per_s >= 0.9 * best_packed->records_per_s &&
          (readers_needed == 0 || row.concurrency < readers_needed)) {
        readers_needed = row.concurrency;
      }
    }
  }
}

// Stages at the loader's thread count; the slowest one is the bottleneck.
void StageFindings(BenchReport& report, Analysis& analysis) {
  analysis.threads = MaxThreads(report.stages, "decode+augment");
  const unsigned threads = analysis.threads;
  // A dataset at a URL: the loader reads it in coalesced batches (the "network" row below), not
  // one request per record as the read stage does.
  const AccessMeasurement* network = Best(report.access, [&](const AccessMeasurement& row) {
    return row.path == report.stage_source && row.cache == "network" && row.engine == "coalesced" &&
           row.order == "random";
  });
  std::vector<Candidate> candidates;
  for (const char* name : {"read", "decode+augment", "collate", "upload"}) {
    if (network != nullptr && std::string(name) == "read") continue;
    const StageMeasurement* stage =
        FindStage(report.stages, name, std::string(name) == "decode+augment" ? threads : 0);
    if (stage != nullptr && stage->images_per_s > 0)
      candidates.push_back({name, stage->images_per_s});
  }
  const AccessMeasurement* cold_stage_source =
      Best(report.access, [&](const AccessMeasurement& row) {
        return row.path == report.stage_source && row.order == "random" && row.cache == "cold";
      });
  if (cold_stage_source != nullptr) {
    candidates.push_back({"storage", cold_stage_source->records_per_s});
  }
  if (network != nullptr) candidates.push_back({"network", network->records_per_s});
  std::string stage_line;
  for (const Candidate& candidate : candidates) {
    stage_line +=
        (stage_line.empty() ? "" : ", ") + candidate.name + " " + Grouped(candidate.images_per_s);
  }
  const auto slowest = std::min_element(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.images_per_s < b.images_per_s; });
  report.bottleneck = slowest != candidates.end() ? slowest->name : "";
  if (slowest != candidates.end()) analysis.slowest = *slowest;
  if (!stage_line.empty()) {
    report.findings.push_back(
        "stages alone (images/s; storage = random reads from a cold cache): " + stage_line);
  }
}

// The lowest and highest images/s of a measurement's runs (its one figure when run once).
std::pair<double, double> RangeOf(const StageMeasurement& stage) {
  if (stage.runs.empty()) return {stage.images_per_s, stage.images_per_s};
  const auto [low, high] = std::minmax_element(stage.runs.begin(), stage.runs.end());
  return {*low, *high};
}

// (highest - lowest) / median of a repeated measurement; 0 when run once.
double Spread(const StageMeasurement& stage) {
  const auto [low, high] = RangeOf(stage);
  return stage.images_per_s > 0 ? (high - low) / stage.images_per_s : 0;
}

// The prefetch depth to advise, or 0 for none. Repeated: only where the configured depth is
// slower than the best beyond both their spreads (the ranges of their runs do not meet), and then
// the smallest depth whose range meets the best's; a difference inside the spread is noise, and
// the finding says so. Run once: the smallest depth within 5% of the best.
std::uint32_t PrefetchNeeded(const BenchOptions& options, BenchReport& report) {
  std::vector<const StageMeasurement*> points;
  for (const StageMeasurement& stage : report.stages) {
    if (stage.sweep == "prefetch") points.push_back(&stage);
  }
  if (points.empty()) return 0;
  std::sort(points.begin(), points.end(),
            [](const auto* a, const auto* b) { return a->prefetch_batches < b->prefetch_batches; });
  const StageMeasurement* best = *std::max_element(
      points.begin(), points.end(),
      [](const auto* a, const auto* b) { return a->images_per_s < b->images_per_s; });
  const bool repeated = std::all_of(points.begin(), points.end(),
                                    [](const auto* point) { return point->runs.size() > 1; });
  if (!repeated) {
    for (const StageMeasurement* point : points) {
      if (point->images_per_s >= 0.95 * best->images_per_s) return point->prefetch_batches;
    }
    return 0;
  }
  // As fast as the best: their runs' ranges meet, or within 5% (a difference no training run
  // would notice, however tight the runs).
  const auto meets_best = [&](const StageMeasurement* point) {
    const auto [low, high] = RangeOf(*point);
    const auto [best_low, best_high] = RangeOf(*best);
    return (low <= best_high && best_low <= high) ||
           point->images_per_s >= 0.95 * best->images_per_s;
  };
  const auto configured = std::find_if(points.begin(), points.end(), [&](const auto* point) {
    return point->prefetch_batches == options.prefetch_batches;
  });
  if (configured != points.end() && meets_best(*configured)) {
    double widest = 0;
    for (const StageMeasurement* point : points) widest = std::max(widest, Spread(*point));
    report.findings.push_back("prefetch " + std::to_string(points.front()->prefetch_batches) +
                              " to " + std::to_string(points.back()->prefetch_batches) +
                              ": prefetch " + std::to_string(options.prefetch_batches) +
                              " is as fast as the best (within the spread of their runs, up to " +
                              Percent(widest) + ", or 5%), so no other depth is advised");
    return 0;
  }
  for (const StageMeasurement* point : points) {
    if (meets_best(point)) return point->prefetch_batches;
  }
  return best->prefetch_batches;
}

// Why the figures may be noisy: a busy machine, measurements too short to mean much.
void NoiseNotes(BenchReport& report) {
  const unsigned cores = std::max(1u, report.machine.cores);
  if (report.load_before > 0.5 * cores || report.steal_share > 0.05) {
    report.notes.push_back(
        "the machine was busy: load average " + Fixed(report.load_before, 1) + " on " +
        std::to_string(cores) + " cores before the run, " + Percent(report.steal_share) +
        " of CPU time stolen by the hypervisor during it; figures may be low and noisy, run "
        "again on an idle machine");
  }
  std::uint64_t short_cold = 0;
  std::uint64_t cold = 0;
  for (const AccessMeasurement& row : report.access) {
    if (row.cache != "cold") continue;
    ++cold;
    if (row.seconds < 0.05) ++short_cold;
  }
  if (short_cold > 0) {
    report.notes.push_back(
        std::to_string(short_cold) + " of " + std::to_string(cold) +
        " cold measurements read for under 50 ms: too little data for a cold figure (the "
        "kernel's readahead, 128 KiB to a few MiB per file, and the device's own cache serve much "
        "of it); measure more records (--max-records) or a larger dataset");
  }
}

// The loader as a whole: scaling, prefetch, and a consumer waiting on it.
void LoaderFindings(const BenchOptions& options, BenchReport& report, Analysis& analysis) {
  const unsigned threads = analysis.threads;
  const StageMeasurement* one_thread = analysis.one_thread =
      FindStage(report.stages, "decode+augment", 1);
  const StageMeasurement* all_threads = analysis.all_threads =
      FindStage(report.stages, "decode+augment", threads);
  if (one_thread != nullptr && all_threads != nullptr && threads > 1) {
    report.findings.push_back(
        "decode+augment scales from " + Grouped(one_thread->images_per_s) +
        " images/s on 1 thread to " + Grouped(all_threads->images_per_s) + " on " +
        std::to_string(threads) + " (" +
        Percent(all_threads->images_per_s / (one_thread->images_per_s * threads)) + " of linear)");
  }
  const StageMeasurement* pipeline = analysis.pipeline = FindStage(report.stages, "pipeline", 0);
  analysis.prefetch_needed = PrefetchNeeded(options, report);
  if (pipeline != nullptr) {
    std::string line = "the whole loader: " + Grouped(pipeline->images_per_s) + " images/s on " +
                       std::to_string(pipeline->threads) + " threads (batch " +
                       std::to_string(pipeline->batch_size) + ", prefetch " +
                       std::to_string(pipeline->prefetch_batches) + ")";
    if (analysis.slowest && analysis.slowest->images_per_s > 0) {
      line += ", " + Percent(pipeline->images_per_s / analysis.slowest->images_per_s) +
              " of its slowest stage";
    }
    report.findings.push_back(line);
  }
  if (report.starvation) {
    const StarvationMeasurement& s = *report.starvation;
    report.findings.push_back("a consumer training at " + Grouped(s.consumer_images_per_s) +
                              " images/s waits " + Percent(s.wait_share) +
                              " of its time for data (" + Grouped(s.delivered_images_per_s) +
                              " images/s delivered)");
  }
}

// The kernel's throttle lets a measurement's first slice of reads (throtl_slice, 100 ms) through
// at once, so N reads take N / reads/s less 0.1 s: measured on the demo's 58 MB shard, LMDB and
// HDF5 read in order on the hdd profile, 0.32, 0.40 and 0.31 s by the limits, 0.21, 0.31, 0.21 s.
constexpr double kThrottleBurstSeconds = 0.1;
// An emulated row given less of the device's time than this (after the burst) follows the device
// less closely: the burst is a large share of it.
constexpr double kDeviceSecondsToTrust = 0.9;

double PerRecord(std::uint64_t count, const AccessMeasurement& row) {
  return static_cast<double>(count) / static_cast<double>(row.records);
}

// On emulated storage: what the profile's limits give each cold row (the larger of its device
// bytes over the profile's bytes/s and its device reads over its reads/s), and the comparison the
// emulation exists for, loose files in random order against a packed format read in order.
void EmulationFindings(BenchReport& report) {
  if (!report.emulated_storage) return;
  const StorageProfile& profile = *report.emulated_storage;
  for (AccessMeasurement& row : report.access) {
    if (!row.device_reads) continue;
    const double bytes_seconds = profile.read_bytes_per_s != 0
                                     ? static_cast<double>(row.device_reads->bytes) /
                                           static_cast<double>(profile.read_bytes_per_s)
                                     : 0;
    const double reads_seconds = profile.read_iops != 0
                                     ? static_cast<double>(row.device_reads->requests) /
                                           static_cast<double>(profile.read_iops)
                                     : 0;
    row.limits_seconds =
        std::max(std::max(bytes_seconds, reads_seconds) - kThrottleBurstSeconds, 0.0);
    row.limited_by = bytes_seconds >= reads_seconds ? "bytes" : "reads";
  }
  const auto one_reader = [](const char* order, bool packed) {
    return [=](const AccessMeasurement& row) {
      return row.cache == "cold" && row.order == order && row.engine == "threads" &&
             row.concurrency == 1 && (row.source != "files") == packed && row.limits_seconds &&
             *row.limits_seconds > 0 && row.records > 0;
    };
  };
  const AccessMeasurement* files = Best(report.access, one_reader("random", false));
  const AccessMeasurement* packed = Best(report.access, one_reader("sequential", true));
  const auto predicted = [](const AccessMeasurement& row) {
    return static_cast<double>(row.records) / *row.limits_seconds;
  };
  for (const AccessMeasurement* row : {files, packed}) {
    if (row == nullptr) continue;
    std::string line = "emulated " + profile.name + ": " + SourceName(row->source) + ", " +
                       row->order + ", cold, 1 reader: " + Grouped(row->records_per_s) +
                       " records/s, " + Fixed(PerRecord(row->device_reads->requests, *row), 2) +
                       " device reads and " + Grouped(PerRecord(row->device_reads->bytes, *row)) +
                       " bytes a record; the limits give " + Grouped(predicted(*row)) +
                       " records/s (by " + row->limited_by + "): measured " +
                       Percent(row->records_per_s / predicted(*row)) + " of it";
    if (*row->limits_seconds < kDeviceSecondsToTrust) {
      line += " [" + Fixed(*row->limits_seconds, 2) +
              " s of device time after the throttle's first 0.1 s burst: too short to be sure]";
    } else if (row->records_per_s < 0.8 * predicted(*row)) {
      line += ": the device is not the limit on this machine, the CPU and the kernel are";
    }
    report.findings.push_back(line);
  }
  if (files != nullptr && packed != nullptr && files->records_per_s > 0) {
    report.findings.push_back("emulated " + profile.name + ": " + SourceName(packed->source) +
                              " read in order gets " +
                              Fixed(packed->records_per_s / files->records_per_s, 1) +
                              "x the records/s of loose files in random order; the limits imply " +
                              Fixed(predicted(*packed) / predicted(*files), 1) + "x");
  }
  const auto short_rows =
      std::count_if(report.access.begin(), report.access.end(), [](const auto& row) {
        return row.limits_seconds && *row.limits_seconds < kDeviceSecondsToTrust;
      });
  if (short_rows > 0) {
    report.notes.push_back(
        std::to_string(short_rows) + " emulated cold row" + (short_rows == 1 ? "" : "s") +
        " (marked *) needed under " + Fixed(kDeviceSecondsToTrust + kThrottleBurstSeconds, 0) +
        " s of the " + profile.name +
        "'s time: the kernel's throttle lets a measurement's first 0.1 s of reads through at "
        "once, which the limits' figure takes off but which is a large share of so short a "
        "read; more data (a larger dataset, --max-records) makes them device figures");
  }
}

// On emulated storage: the windowed shuffle where a cold epoch with it is at least 1.5x one with
// the global shuffle (each is run once: a margin no noise on this throttle comes near).
BenchAdvice ShuffleAdvice(const BenchReport& report) {
  if (!report.emulated_storage) return {};
  const StageMeasurement* global = nullptr;
  const StageMeasurement* windowed = nullptr;
  for (const StageMeasurement& stage : report.stages) {
    if (stage.stage != "epoch cold") continue;
    (stage.note.starts_with("shuffle global") ? global : windowed) = &stage;
  }
  if (global == nullptr || windowed == nullptr || global->images_per_s <= 0 ||
      windowed->images_per_s < 1.5 * global->images_per_s) {
    return {};
  }
  return {"shuffle", "windowed",
          "packrec.Loader(shuffle='windowed', shuffle_window=N), "
          "LoaderOptions::shuffle = ShuffleMode::kWindowed",
          windowed->images_per_s,
          "a cold epoch from the emulated " + report.emulated_storage->name + " gets " +
              Grouped(windowed->images_per_s) +
              " images/s with neighbouring records shuffled in "
              "windows (" +
              windowed->note + ") against " + Grouped(global->images_per_s) +
              " with a global shuffle"};
}

// On emulated storage the question is the device's: a cold epoch's images/s. Where it took few
// device reads an image, reads around each record brought its neighbours in (a dataset this
// small ends up in the page cache within the epoch); over data larger than memory every image
// needs a read of its own, and the profile's limits give the rate.
BenchAdvice ColdEpochVerdict(const StageMeasurement& epoch, const BenchOptions& options,
                             const BenchReport& report, double delivered) {
  const double rate = options.consumer_images_per_s;
  const StorageProfile& profile = *report.emulated_storage;
  double expected = epoch.images_per_s;
  std::string why = "an epoch from a cold cache on the emulated " + profile.name + " (" +
                    epoch.note + ") delivers " + Grouped(epoch.images_per_s) + " images/s";
  if (epoch.device_reads && epoch.images > 0 &&
      static_cast<double>(epoch.device_reads->requests) < 0.5 * static_cast<double>(epoch.images)) {
    const double bytes_per_image =
        static_cast<double>(epoch.device_reads->bytes) / static_cast<double>(epoch.images);
    double seconds_per_image =
        profile.read_iops != 0 ? 1.0 / static_cast<double>(profile.read_iops) : 0;
    if (profile.read_bytes_per_s != 0) {
      seconds_per_image =
          std::max(seconds_per_image,
                   std::min(bytes_per_image, 1e9) / static_cast<double>(profile.read_bytes_per_s));
    }
    if (seconds_per_image > 0) expected = std::min(expected, 1.0 / seconds_per_image);
    why +=
        ", with " +
        Fixed(static_cast<double>(epoch.device_reads->requests) / static_cast<double>(epoch.images),
              2) +
        " device reads an image: reads around each record brought its neighbours, and this "
        "dataset fits in memory. Over data larger than memory each image needs a read of its "
        "own: about " +
        Grouped(expected) + " images/s from this device";
  }
  why += "; for a consumer of " + Grouped(rate) +
         (delivered > 0 ? "; from the page cache the loader delivers " + Grouped(delivered)
                        : std::string());
  return BenchAdvice{"consumer", expected >= rate ? "fast enough" : "not fast enough",
                     "packrec bench --consumer-rate (the GPU's images/s)", expected, why};
}

// Whether the loader keeps up with the consumer: from the pipeline's rate, or on emulated
// storage from a cold epoch (an epoch that does not fit in memory reads the device every time).
std::optional<BenchAdvice> ConsumerVerdict(const BenchOptions& options, const BenchReport& report,
                                           const Analysis& analysis) {
  const double rate = options.consumer_images_per_s;
  const double delivered = analysis.pipeline != nullptr ? analysis.pipeline->images_per_s
                           : analysis.slowest           ? analysis.slowest->images_per_s
                                                        : 0;
  const auto epoch =
      std::find_if(report.stages.begin(), report.stages.end(),
                   [](const StageMeasurement& s) { return s.stage == "epoch cold"; });
  if (epoch != report.stages.end() && report.emulated_storage) {
    return ColdEpochVerdict(*epoch, options, report, delivered);
  }
  if (delivered <= 0) return std::nullopt;
  std::string why = Grouped(delivered) + " images/s delivered for a consumer of " + Grouped(rate);
  if (!report.bottleneck.empty()) {
    why += "; " + report.bottleneck + " is the limit at " +
           Grouped(analysis.slowest->images_per_s) + " images/s";
  }
  return BenchAdvice{"consumer", delivered >= rate ? "fast enough" : "not fast enough",
                     "packrec bench --consumer-rate (the GPU's images/s)", delivered, why};
}

// What to change, each as a knob with its value and where it is set (BenchAdvice).
std::vector<BenchAdvice> Advice(const BenchOptions& options, const BenchReport& report,
                                const Analysis& analysis) {
  const double rate = options.consumer_images_per_s;
  const StageMeasurement* one_thread = analysis.one_thread;
  const StageMeasurement* all_threads = analysis.all_threads;
  const unsigned threads = analysis.threads;
  std::vector<BenchAdvice> advice;
  if (std::optional<BenchAdvice> verdict = ConsumerVerdict(options, report, analysis)) {
    advice.push_back(std::move(*verdict));
  }
  if (one_thread != nullptr && one_thread->images_per_s > 0) {
    const double per_thread = all_threads != nullptr && threads > 0
                                  ? all_threads->images_per_s / threads
                                  : one_thread->images_per_s;
    const unsigned needed = static_cast<unsigned>(std::ceil(rate / per_thread));
    if (needed > report.machine.cores) {
      advice.push_back(
          {"resize_short", "256",
           "packrec convert SRC OUT --resize-short 256 (or decode on the GPU)", std::nullopt,
           "decoding " + Grouped(rate) + " images/s needs about " + std::to_string(needed) +
               " cores and this machine has " + std::to_string(report.machine.cores) +
               ": store smaller images or decode on the GPU"});
    } else {
      // The fewest that keep up, not the fastest setting: more threads than this only idle.
      const unsigned value = std::max(needed, 1u);
      advice.push_back({"threads", std::to_string(value),
                        "packrec.Loader(threads=" + std::to_string(value) +
                            "), LoaderOptions::threads, packrec bench --threads",
                        per_thread * value,
                        "the fewest threads whose decode+augment rate (" + Grouped(per_thread) +
                            " images/s each) covers the consumer's " + Grouped(rate) +
                            "; more only idle"});
    }
  }
  if (analysis.best_packed != nullptr) {
    const AccessMeasurement& best = *analysis.best_packed;
    std::string why = Grouped(best.records_per_s) + " records/s in random order from a " +
                      best.cache + " cache, the fastest packed format measured";
    if (analysis.readers_needed > 0) {
      why += "; " + std::to_string(analysis.readers_needed) + " concurrent read" +
             (analysis.readers_needed == 1 ? " reaches" : "s reach") + " 90% of it";
    }
    if (best.served_by_cache_below) why += " [cold*: not a device figure]";
    for (const std::string& tie : analysis.format_ties) {
      why += "; " + SourceName(tie) + " is as fast within the spread of their runs: either serves";
    }
    advice.push_back({"format", best.source, "packrec convert SRC OUT --format " + best.source,
                      best.records_per_s, why});
  }
  if (const BenchAdvice shuffle = ShuffleAdvice(report); !shuffle.knob.empty()) {
    advice.push_back(shuffle);
  }
  if (analysis.prefetch_needed > 0 && analysis.prefetch_needed != options.prefetch_batches) {
    const std::string value = std::to_string(analysis.prefetch_needed);
    advice.push_back({"prefetch", value,
                      "packrec.Loader(prefetch=" + value + "), LoaderOptions::prefetch_batches",
                      std::nullopt,
                      "the fewest batches ahead as fast as the best depth (within the spread of "
                      "repeated runs; within 5% when run once), and the configured " +
                          std::to_string(options.prefetch_batches) + " is not"});
  }
  return advice;
}

// A dataset at a URL: what a request costs, what coalescing saves, and, when the network is the
// bottleneck, the knobs that move it: prefetch deep enough to cover a batch's fetch, the cache
// for every epoch after the first, windowed shuffle for fewer, larger requests.
void NetworkFindings(BenchReport& report) {
  const auto row_of = [&](const char* engine, const char* order) {
    return Best(report.access, [&](const AccessMeasurement& row) {
      return row.path == report.stage_source && row.cache == "network" && row.engine == engine &&
             row.order == order;
    });
  };
  const AccessMeasurement* single = row_of("request", "random");
  const AccessMeasurement* random = row_of("coalesced", "random");
  const AccessMeasurement* in_order = row_of("coalesced", "sequential");
  if (single == nullptr || random == nullptr || random->records == 0) return;
  const auto per_batch = [](const AccessMeasurement& row) {
    const double batches =
        std::ceil(static_cast<double>(row.records) / std::max(1u, row.concurrency));
    return static_cast<double>(row.requests.value_or(0)) / std::max(1.0, batches);
  };
  const double latency_ms = single->request_latency_ms.value_or(0);
  std::string line = "network: one request takes " + Fixed(latency_ms, 1) +
                     " ms (median); a random batch of " + std::to_string(random->concurrency) +
                     " takes " + Fixed(per_batch(*random), 1) + " requests after coalescing (" +
                     Grouped(random->records_per_s) + " records/s)";
  if (in_order != nullptr && in_order->records > 0) {
    line += ", a batch in order " + Fixed(per_batch(*in_order), 1) + " (" +
            Grouped(in_order->records_per_s) + " records/s)";
  }
  report.findings.push_back(line);
  if (report.bottleneck != "network") return;
  const double batch_seconds =
      static_cast<double>(random->concurrency) / std::max(1.0, random->records_per_s);
  report.findings.push_back(
      "the network is the bottleneck: a random batch takes " + Fixed(batch_seconds * 1000, 0) +
      " ms to fetch; the loader's prefetch overlaps fetches with decoding but cannot make the "
      "link faster");
  report.advice.push_back(
      {"cache", "a local directory",
       "packrec.open(url, cache=DIR, cache_size=SIZE), packrec.torch.Dataset(url, cache=DIR, "
       "cache_size=SIZE), or PACKREC_CACHE_DIR and PACKREC_CACHE_SIZE",
       std::nullopt,
       "every epoch after the first reads from local disk (docs/remote.md, \"The cache\")"});
  if (in_order != nullptr && in_order->records_per_s > 1.2 * random->records_per_s) {
    report.advice.push_back(
        {"shuffle", "windowed", "packrec.Loader(shuffle=\"windowed\")", in_order->records_per_s,
         "batches drawn from a window of consecutive records coalesce into fewer, larger "
         "requests: " +
             Grouped(in_order->records_per_s) + " records/s in order against " +
             Grouped(random->records_per_s) + " at random"});
  }
}

std::string RecommendationText(const std::vector<BenchAdvice>& advice) {
  std::string text;
  for (const BenchAdvice& item : advice) {
    std::string part;
    if (item.knob == "consumer") {
      part = item.value + ": " + item.why;
    } else if (item.knob == "resize_short") {
      part = item.why + " (convert --resize-short " + item.value + ")";
    } else if (item.knob == "format") {
      part = item.value + " format (" + item.why + ")";
    } else {
      part = item.knob + "=" + item.value + " (" + item.set_with + ")";
    }
    text += (text.empty() ? "" : "; ") + part;
  }
  return text;
}

}  // namespace

void AnalyzeBench(const BenchOptions& options, BenchReport& report) {
  report.findings.clear();
  for (AccessMeasurement& row : report.access) row.served_by_cache_below = false;
  Analysis analysis;
  DeviceClass(report);
  FilesystemNotes(report);
  StorageFindings(report);
  ColdCacheNotes(report);
  MarkCacheServed(report);
  FormatFindings(options, report, analysis);
  EmulationFindings(report);
  StageFindings(report, analysis);
  LoaderFindings(options, report, analysis);
  NoiseNotes(report);
  report.advice = Advice(options, report, analysis);
  NetworkFindings(report);
  report.recommendation = RecommendationText(report.advice);
}

namespace {

json StorageJson(const BenchReport& report) {
  const StorageProbe& s = report.storage;
  json storage = {{"ran", s.ran}};
  if (s.ran) {
    storage.update({{"scratch_file", s.scratch_file},
                    {"filesystem", s.filesystem},
                    {"same_filesystem_as_data", s.same_filesystem_as_data},
                    {"direct_io", s.direct_io},
                    {"file_bytes", s.file_bytes},
                    {"sequential_block_bytes", s.sequential_block_bytes},
                    {"sequential_mb_per_s", s.sequential_mb_per_s},
                    {"random_block_bytes", s.random_block_bytes},
                    {"random_iops_qd1", s.random_iops_qd1},
                    {"random_iops", s.random_iops},
                    {"random_depth", s.random_depth},
                    {"random_engine", s.random_engine}});
  } else {
    storage["skipped"] = s.skipped;
  }
  return storage;
}

json DeviceReadsJson(const std::optional<DeviceReads>& reads) {
  if (!reads) return nullptr;
  return {{"requests", reads->requests}, {"bytes", reads->bytes}};
}

json AccessJson(const BenchReport& report) {
  json access = json::array();
  for (const AccessMeasurement& row : report.access) {
    json item = {{"source", row.source},
                 {"path", row.path},
                 {"order", row.order},
                 {"cache", row.cache},
                 {"engine", row.engine},
                 {"concurrency", row.concurrency},
                 {"records", row.records},
                 {"bytes", row.bytes},
                 {"seconds", row.seconds},
                 {"records_per_s", row.records_per_s},
                 {"mb_per_s", row.mb_per_s},
                 {"device_bandwidth_share",
                  row.device_bandwidth_share ? json(*row.device_bandwidth_share) : json()},
                 {"served_by_cache_below", row.served_by_cache_below}};
    item["device_reads"] = DeviceReadsJson(row.device_reads);
    item["runs"] = row.runs;
    item["limits_seconds"] = row.limits_seconds ? json(*row.limits_seconds) : json();
    item["limited_by"] = row.limited_by;
    item["requests"] = row.requests ? json(*row.requests) : json();
    item["request_latency_ms"] = row.request_latency_ms ? json(*row.request_latency_ms) : json();
    if (row.eviction) {
      const CacheEviction& e = *row.eviction;
      item["eviction"] = {{"files", e.files},
                          {"pages", e.pages},
                          {"resident_before", e.resident_before},
                          {"resident_after", e.resident_after},
                          {"synced", e.synced},
                          {"verified", e.verified()}};
    } else {
      item["eviction"] = nullptr;
    }
    access.push_back(std::move(item));
  }
  return access;
}

json EmulatedStorageJson(const BenchReport& report) {
  if (!report.emulated_storage) return nullptr;
  const StorageProfile& p = *report.emulated_storage;
  return {{"profile", p.name},
          {"description", p.description},
          {"read_bytes_per_s", p.read_bytes_per_s},
          {"read_iops", p.read_iops},
          {"figures_from", p.source},
          {"device", report.emulated_device}};
}

json AdviceJson(const BenchReport& report) {
  json advice = json::array();
  for (const BenchAdvice& item : report.advice) {
    advice.push_back({{"knob", item.knob},
                      {"value", item.value},
                      {"set_with", item.set_with},
                      {"expected_images_per_s",
                       item.expected_images_per_s ? json(*item.expected_images_per_s) : json()},
                      {"why", item.why}});
  }
  return advice;
}

}  // namespace

std::string BenchReportJson(const BenchReport& report) {
  json out;
  out["schema"] = "packrec-bench/1";
  out["packrec_version"] = report.packrec_version;
  out["started_at"] = report.started_at;
  out["mode"] = report.mode;
  out["seconds"] = report.seconds;
  const MachineInfo& m = report.machine;
  out["machine"] = {{"cpu_model", m.cpu_model},
                    {"cores", m.cores},
                    {"memory_bytes", m.memory_bytes},
                    {"kernel", m.kernel},
                    {"data_path", m.data_path},
                    {"data_filesystem", m.data_filesystem},
                    {"data_device", m.data_device},
                    {"data_device_flag", m.data_device_flag},
                    {"data_device_kind", m.data_device_kind},
                    {"data_device_kind_from", m.data_device_kind_from},
                    {"gpu", m.gpu}};
  out["storage"] = StorageJson(report);
  out["emulated_storage"] = EmulatedStorageJson(report);
  out["access"] = AccessJson(report);
  out["stage_source"] = report.stage_source;
  json stages = json::array();
  for (const StageMeasurement& stage : report.stages) {
    stages.push_back({{"stage", stage.stage},
                      {"threads", stage.threads},
                      {"batch_size", stage.batch_size},
                      {"prefetch_batches", stage.prefetch_batches},
                      {"images", stage.images},
                      {"seconds", stage.seconds},
                      {"images_per_s", stage.images_per_s},
                      {"sweep", stage.sweep},
                      {"note", stage.note},
                      {"runs", stage.runs},
                      {"device_reads", DeviceReadsJson(stage.device_reads)}});
  }
  out["stages"] = std::move(stages);
  out["gpu_status"] = report.gpu_status;
  json upload = json::array();
  for (const UploadMeasurement& row : report.upload) {
    upload.push_back({{"pinned", row.pinned},
                      {"async", row.async},
                      {"batch_size", row.batch_size},
                      {"bytes", row.bytes},
                      {"gb_per_s", row.gb_per_s},
                      {"host_blocked_share", row.host_blocked_share}});
  }
  out["upload"] = std::move(upload);
  if (report.starvation) {
    const StarvationMeasurement& st = *report.starvation;
    out["starvation"] = {{"consumer_images_per_s", st.consumer_images_per_s},
                         {"delivered_images_per_s", st.delivered_images_per_s},
                         {"wait_share", st.wait_share},
                         {"batches", st.batches},
                         {"threads", st.threads},
                         {"batch_size", st.batch_size},
                         {"prefetch_batches", st.prefetch_batches}};
  } else {
    out["starvation"] = nullptr;
  }
  out["bottleneck"] = report.bottleneck;
  out["findings"] = report.findings;
  out["recommendation"] = report.recommendation;
  out["advice"] = AdviceJson(report);
  out["notes"] = report.notes;
  out["load"] = {{"before", report.load_before},
                 {"after", report.load_after},
                 {"steal_share", report.steal_share},
                 {"busy_share", report.busy_share}};
  return out.dump(2);
}

namespace {

constexpr std::size_t kTableColumns = 100;

// `text` after `lead`, broken at spaces into lines of kTableColumns at most, the lines after the
// first indented to `lead`'s width.
std::string Wrapped(const std::string& lead, const std::string& text) {
  const std::string indent(lead.size(), ' ');
  std::string out = lead;
  std::size_t line = lead.size();
  bool first = true;
  std::istringstream words(text);
  for (std::string word; words >> word; first = false) {
    if (!first && line + 1 + word.size() > kTableColumns) {
      out += "\n" + indent;
      line = indent.size();
    } else if (!first) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
  }
  return out + "\n";
}

// A plain text table: columns padded to their widest cell, numbers right-aligned; with
// `text_last`, the last column is text: left-aligned, and wrapped onto continuation lines where a
// row would pass kTableColumns.
class Table {
 public:
  explicit Table(std::vector<std::string> header, bool text_last = false) : text_last_(text_last) {
    rows_.push_back(std::move(header));
  }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const {
    std::vector<std::size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    std::ostringstream out;
    for (const auto& row : rows_) {
      std::string line = " ";
      for (std::size_t c = 0; c < row.size(); ++c) {
        const bool last = c + 1 == row.size();
        const std::string pad(widths[c] - row[c].size(), ' ');
        if (last && text_last_) {
          const std::string lead = line + " ";
          line = Wrapped(lead, row[c]);
          line.pop_back();  // Wrapped ends with a newline
          break;
        }
        line += " " + (c == 0 ? row[c] + pad : pad + row[c]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out << line << "\n";
    }
    return out.str();
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  bool text_last_ = false;
};

}  // namespace

namespace {

void StorageTable(const BenchReport& report, std::ostringstream& out) {
  const StorageProbe& s = report.storage;
  out << "storage probe";
  if (s.ran) {
    out << " (" << (s.file_bytes >> 20) << " MiB scratch file on " << s.filesystem
        << (s.direct_io ? ", O_DIRECT" : ", buffered after eviction") << ")\n";
    Table table({"measure", "value"});
    table.Add({"sequential read, 1 MiB blocks", Fixed(s.sequential_mb_per_s, 0) + " MB/s"});
    table.Add({"random read, 4 KiB, depth 1", Grouped(s.random_iops_qd1) + " IOPS"});
    table.Add({"random read, 4 KiB, depth " + std::to_string(s.random_depth) + " (" +
                   s.random_engine + ")",
               Grouped(s.random_iops) + " IOPS"});
    out << table.Render();
  } else {
    out << ": " << s.skipped << "\n";
  }
}

void AccessTable(const BenchReport& report, std::ostringstream& out) {
  out << "\naccess patterns (checksums off; share = of the probe's sequential bandwidth)\n";
  Table access({"source", "order", "cache", "readers", "records/s", "MB/s", "share",
                "resident after eviction"});
  for (const AccessMeasurement& row : report.access) {
    std::string resident = "-";
    if (row.eviction) {
      resident = Grouped(static_cast<double>(row.eviction->resident_after)) + "/" +
                 Grouped(static_cast<double>(row.eviction->pages)) + " pages" +
                 (row.eviction->verified() ? "" : " (NOT cold)");
    } else if (row.requests) {  // a network row: its requests (the column is free for it)
      resident =
          Grouped(static_cast<double>(*row.requests)) + " requests" +
          (row.request_latency_ms ? ", " + Fixed(*row.request_latency_ms, 1) + " ms each" : "");
    }
    std::string readers = std::to_string(row.concurrency);
    if (row.engine == "io_uring") readers = "qd " + readers;
    if (row.engine == "coalesced") readers = "batch " + readers;
    access.Add({SourceName(row.source), row.order,
                row.cache + (row.served_by_cache_below ? "*" : ""), readers,
                Grouped(row.records_per_s), Fixed(row.mb_per_s, 1),
                row.device_bandwidth_share ? Percent(*row.device_bandwidth_share) : "-", resident});
  }
  out << access.Render();
}

// On emulated storage: each cold row against what the profile's limits give it.
void EmulationTable(const BenchReport& report, std::ostringstream& out) {
  if (!report.emulated_storage) return;
  const StorageProfile& p = *report.emulated_storage;
  out << "\n"
      << Wrapped(
             "emulated storage: ",
             p.name + ", " + p.description + ": " +
                 (p.read_bytes_per_s
                      ? Grouped(static_cast<double>(p.read_bytes_per_s) / 1e6) + " MB/s"
                      : "any MB/s") +
                 ", " +
                 (p.read_iops ? Grouped(static_cast<double>(p.read_iops)) : std::string("any")) +
                 " reads/s; " + report.emulated_device);
  Table table({"source", "order", "readers", "records/s", "reads/record", "limits give", "measured",
               "by", "device s"});
  for (const AccessMeasurement& row : report.access) {
    if (!row.limits_seconds || *row.limits_seconds <= 0 || row.records == 0) continue;
    const double predicted = static_cast<double>(row.records) / *row.limits_seconds;
    table.Add(
        {SourceName(row.source), row.order,
         (row.engine == "io_uring" ? "qd " : "") + std::to_string(row.concurrency),
         Grouped(row.records_per_s), Fixed(PerRecord(row.device_reads->requests, row), 2),
         Grouped(predicted), Percent(row.records_per_s / predicted), row.limited_by,
         Fixed(*row.limits_seconds, 2) + (*row.limits_seconds < kDeviceSecondsToTrust ? "*" : "")});
  }
  out << table.Render();
}

void StageTables(const BenchReport& report, std::ostringstream& out) {
  out << "\nloader stages on " << report.stage_source << " (images/s)\n";
  Table stages({"stage", "threads", "batch", "prefetch", "images/s", "spread", "note"},
               /*text_last=*/true);
  for (const StageMeasurement& stage : report.stages) {
    stages.Add({stage.stage + (stage.sweep.empty() || stage.sweep == "threads"
                                   ? ""
                                   : " [" + stage.sweep + " sweep]"),
                std::to_string(stage.threads),
                stage.batch_size ? std::to_string(stage.batch_size) : "-",
                stage.prefetch_batches ? std::to_string(stage.prefetch_batches) : "-",
                Grouped(stage.images_per_s),
                stage.runs.empty() ? "-" : "+-" + Percent(Spread(stage) / 2), stage.note});
  }
  out << stages.Render();

  out << "\n" << Wrapped("GPU upload: ", report.gpu_status);
  if (!report.upload.empty()) {
    Table upload({"batch", "memory", "copy", "GB/s", "host blocked"});
    for (const UploadMeasurement& row : report.upload) {
      upload.Add({std::to_string(row.batch_size), row.pinned ? "pinned" : "pageable",
                  row.async ? "async" : "sync", Fixed(row.gb_per_s, 2),
                  Percent(row.host_blocked_share)});
    }
    out << upload.Render();
  } else {
    out << "  (GPU rows skipped)\n";
  }
}

}  // namespace

std::string BenchReportTable(const BenchReport& report) {
  std::ostringstream out;
  const MachineInfo& m = report.machine;
  out << Wrapped("", "packrec bench (" + report.mode + ", " + Fixed(report.seconds, 1) +
                         " s): " + m.cpu_model + ", " + std::to_string(m.cores) + " cores, " +
                         Fixed(static_cast<double>(m.memory_bytes) / (1 << 30), 1) +
                         " GiB; data on " + m.data_filesystem + " (" + m.data_device + ", " +
                         m.data_device_kind + ", " + m.data_device_kind_from + "); GPU: " + m.gpu)
      << "\n";
  StorageTable(report, out);
  AccessTable(report, out);
  EmulationTable(report, out);
  StageTables(report, out);
  if (report.starvation) {
    const StarvationMeasurement& st = *report.starvation;
    out << "\n"
        << Wrapped("starvation: ", "a consumer at " + Grouped(st.consumer_images_per_s) +
                                       " images/s waited " + Percent(st.wait_share) +
                                       " of its time (" + Grouped(st.delivered_images_per_s) +
                                       " images/s delivered, " + std::to_string(st.batches) +
                                       " batches of " + std::to_string(st.batch_size) + ")");
  }
  out << "\nfindings:\n";
  for (const std::string& finding : report.findings) out << Wrapped("  - ", finding);
  for (const std::string& note : report.notes) out << Wrapped("  note: ", note);
  out << "\nbottleneck: " << (report.bottleneck.empty() ? "unknown" : report.bottleneck) << "\n";
  out << "recommendation:\n";
  for (const BenchAdvice& item : report.advice) {
    out << Wrapped("  - ", item.knob + " = " + item.value + ": " + item.why +
                               (item.knob == "consumer" ? "" : " [" + item.set_with + "]"));
  }
  return out.str();
}

}  // namespace packrec
