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

// Formats: random access from a cold cache is what an epoch larger than memory sees.
void FormatFindings(const BenchOptions& options, BenchReport& report, Analysis& analysis) {
  const std::string cache = options.cold_cache ? "cold" : "warm";
  std::map<std::string, const AccessMeasurement*> best_random;
  for (const AccessMeasurement& row : report.access) {
    if (row.order != "random" || row.cache != cache) continue;
    const AccessMeasurement*& best = best_random[row.source];
    if (best == nullptr || row.records_per_s > best->records_per_s) best = &row;
  }
  const AccessMeasurement*& best_packed = analysis.best_packed;
  for (const auto& [source, row] : best_random) {
    if (source != "files" &&
        (best_packed == nullptr || row->records_per_s > best_packed->records_per_s)) {
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
    if (source == "files" && best_packed != nullptr && row->records_per_s > 0) {
      line += "; " + SourceName(best_packed->source) + " reads " +
              Fixed(best_packed->records_per_s / row->records_per_s, 1) + "x as many records/s";
    }
    report.findings.push_back(line);
  }
  if (const AccessMeasurement* sequential =
          Best(report.access,
               [&](const AccessMeasurement& row) {
                 return row.order == "sequential" && row.cache == cache && row.source != "files";
               });
      sequential != nullptr && sequential->device_bandwidth_share) {
    report.findings.push_back(SourceName(sequential->source) + ", sequential, " + cache + ": " +
                              Fixed(sequential->mb_per_s, 0) + " MB/s, " +
                              Percent(*sequential->device_bandwidth_share) +
                              " of the device's sequential bandwidth");
  }

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
  std::vector<Candidate> candidates;
  for (const char* name : {"read", "decode+augment", "collate", "upload"}) {
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

// The loader as a whole: scaling, prefetch, and a consumer waiting on it.
void LoaderFindings(BenchReport& report, Analysis& analysis) {
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
  std::uint32_t prefetch_needed = 0;
  double best_prefetch = 0;
  for (const StageMeasurement& stage : report.stages) {
    if (stage.sweep == "prefetch") best_prefetch = std::max(best_prefetch, stage.images_per_s);
  }
  for (const StageMeasurement& stage : report.stages) {
    if (stage.sweep == "prefetch" && stage.images_per_s >= 0.95 * best_prefetch &&
        (prefetch_needed == 0 || stage.prefetch_batches < prefetch_needed)) {
      prefetch_needed = stage.prefetch_batches;
    }
  }
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
  analysis.prefetch_needed = prefetch_needed;
}

std::string Recommendation(const BenchOptions& options, const BenchReport& report,
                           const Analysis& analysis) {
  const double rate = options.consumer_images_per_s;
  const StageMeasurement* pipeline = analysis.pipeline;
  const StageMeasurement* one_thread = analysis.one_thread;
  const StageMeasurement* all_threads = analysis.all_threads;
  const unsigned threads = analysis.threads;
  std::vector<std::string> advice;
  const double delivered = pipeline != nullptr ? pipeline->images_per_s
                           : analysis.slowest  ? analysis.slowest->images_per_s
                                               : 0;
  if (delivered > 0) {
    advice.push_back(std::string(delivered >= rate ? "fast enough" : "not fast enough") + ": " +
                     Grouped(delivered) + " images/s delivered for a consumer of " + Grouped(rate));
  }
  if (!report.bottleneck.empty()) {
    advice.push_back(report.bottleneck + " is the limit at " +
                     Grouped(analysis.slowest->images_per_s) + " images/s");
  }
  if (one_thread != nullptr && one_thread->images_per_s > 0) {
    const double per_thread = all_threads != nullptr && threads > 0
                                  ? all_threads->images_per_s / threads
                                  : one_thread->images_per_s;
    const unsigned needed = static_cast<unsigned>(std::ceil(rate / per_thread));
    if (needed > report.machine.cores) {
      advice.push_back("decoding " + Grouped(rate) + " images/s needs about " +
                       std::to_string(needed) + " cores and this machine has " +
                       std::to_string(report.machine.cores) +
                       ": store smaller images (convert --resize-short 256) or decode on the GPU");
    } else {
      // The fewest that keep up, not the fastest setting: more threads than this only idle.
      advice.push_back("use --threads " + std::to_string(std::max(needed, 1u)) +
                       " (the fewest that keep up)");
    }
  }
  if (analysis.best_packed != nullptr) {
    advice.push_back(analysis.best_packed->source + " format" +
                     (analysis.readers_needed > 0
                          ? " with " + std::to_string(analysis.readers_needed) + " readers"
                          : std::string()));
  }
  if (analysis.prefetch_needed > 0) {
    advice.push_back("prefetch " + std::to_string(analysis.prefetch_needed));
  }
  std::string recommendation;
  for (const std::string& part : advice) {
    recommendation += (recommendation.empty() ? "" : "; ") + part;
  }
  return recommendation;
}

}  // namespace

void AnalyzeBench(const BenchOptions& options, BenchReport& report) {
  report.findings.clear();
  Analysis analysis;
  StorageFindings(report);
  ColdCacheNotes(report);
  FormatFindings(options, report, analysis);
  StageFindings(report, analysis);
  LoaderFindings(report, analysis);
  report.recommendation = Recommendation(options, report, analysis);
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
                  row.device_bandwidth_share ? json(*row.device_bandwidth_share) : json()}};
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
                    {"data_device_kind", m.data_device_kind},
                    {"gpu", m.gpu}};
  out["storage"] = StorageJson(report);
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
                      {"note", stage.note}});
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
  out["notes"] = report.notes;
  return out.dump(2);
}

namespace {

// A plain text table: columns padded to their widest cell, numbers right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const {
    std::vector<std::size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    std::ostringstream out;
    for (const auto& row : rows_) {
      out << " ";
      for (std::size_t c = 0; c < row.size(); ++c) {
        const std::string pad(widths[c] - row[c].size(), ' ');
        out << " " << (c == 0 ? row[c] + pad : pad + row[c]);
      }
      out << "\n";
    }
    return out.str();
  }

 private:
  std::vector<std::vector<std::string>> rows_;
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
    }
    access.Add({SourceName(row.source), row.order, row.cache,
                (row.engine == "io_uring" ? "qd " : "") + std::to_string(row.concurrency),
                Grouped(row.records_per_s), Fixed(row.mb_per_s, 1),
                row.device_bandwidth_share ? Percent(*row.device_bandwidth_share) : "-", resident});
  }
  out << access.Render();
}

void StageTables(const BenchReport& report, std::ostringstream& out) {
  out << "\nloader stages on " << report.stage_source << " (images/s)\n";
  Table stages({"stage", "threads", "batch", "prefetch", "images/s", "note"});
  for (const StageMeasurement& stage : report.stages) {
    stages.Add({stage.stage + (stage.sweep.empty() || stage.sweep == "threads"
                                   ? ""
                                   : " [" + stage.sweep + " sweep]"),
                std::to_string(stage.threads),
                stage.batch_size ? std::to_string(stage.batch_size) : "-",
                stage.prefetch_batches ? std::to_string(stage.prefetch_batches) : "-",
                Grouped(stage.images_per_s), stage.note});
  }
  out << stages.Render();

  out << "\nGPU upload: " << report.gpu_status << "\n";
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
  out << "packrec bench (" << report.mode << ", " << Fixed(report.seconds, 1)
      << " s): " << m.cpu_model << ", " << m.cores << " cores, "
      << Fixed(static_cast<double>(m.memory_bytes) / (1 << 30), 1) << " GiB; data on "
      << m.data_filesystem << " (" << m.data_device << ", " << m.data_device_kind
      << "); GPU: " << m.gpu << "\n\n";
  StorageTable(report, out);
  AccessTable(report, out);
  StageTables(report, out);
  if (report.starvation) {
    const StarvationMeasurement& st = *report.starvation;
    out << "\nstarvation: a consumer at " << Grouped(st.consumer_images_per_s)
        << " images/s waited " << Percent(st.wait_share) << " of its time ("
        << Grouped(st.delivered_images_per_s) << " images/s delivered, " << st.batches
        << " batches of " << st.batch_size << ")\n";
  }
  out << "\nfindings:\n";
  for (const std::string& finding : report.findings) out << "  - " << finding << "\n";
  for (const std::string& note : report.notes) out << "  note: " << note << "\n";
  out << "\nbottleneck: " << (report.bottleneck.empty() ? "unknown" : report.bottleneck) << "\n";
  out << "recommendation: " << report.recommendation << "\n";
  return out.str();
}

}  // namespace packrec
