// RunBench: resolves the plan for the mode, then probe, access patterns per input, stages on one
// dataset, analysis.
#include <algorithm>
#include <ctime>
#include <set>
#include <thread>

#include "bench/bench_internal.h"
#include "packrec/format.h"
#include "packrec/reader.h"
#include "packrec/version.h"

namespace packrec {
namespace bench {
namespace {

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Status Validate(const BenchOptions& options) {
  if (options.inputs.empty()) {
    return Status::InvalidArgument("bench needs at least one image folder or dataset");
  }
  if (options.batch_size == 0) return Status::InvalidArgument("--batch must be at least 1");
  if (options.prefetch_batches == 0)
    return Status::InvalidArgument("--prefetch must be at least 1");
  if (options.output_size == 0) return Status::InvalidArgument("--size must be at least 1");
  if (!(options.consumer_images_per_s > 0)) {
    return Status::InvalidArgument("--consumer-rate must be a positive number of images/s");
  }
  if (options.max_seconds < 0) return Status::InvalidArgument("--seconds must not be negative");
  if (options.repeats > 100) return Status::InvalidArgument("--repeats takes 1 to 100 runs");
  for (const unsigned readers : options.readers) {
    if (readers == 0 || readers > 1024) {
      return Status::InvalidArgument("--readers takes counts from 1 to 1024");
    }
  }
  for (const unsigned depth : options.queue_depths) {
    if (depth == 0 || depth > 4096) {
      return Status::InvalidArgument("--queue-depth takes depths from 1 to 4096");
    }
  }
  return Status::OK();
}

}  // namespace

Plan MakePlan(const BenchOptions& options) {
  Plan plan;
  plan.options = options;
  const bool quick = options.quick;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  plan.threads = options.threads != 0 ? options.threads : cores;
  plan.readers = !options.readers.empty() ? options.readers
                 : quick                  ? std::vector<unsigned>{1, 4}
                                          : std::vector<unsigned>{1, 2, 4, 8, 16};
  plan.queue_depths = !options.queue_depths.empty() ? options.queue_depths
                      : quick                       ? std::vector<unsigned>{1, 16}
                                                    : std::vector<unsigned>{1, 4, 16, 64};
  std::set<unsigned> decode_threads{1, plan.threads};
  if (!quick) {
    for (unsigned t = 2; t < plan.threads; t *= 2) decode_threads.insert(t);
  }
  plan.decode_threads.assign(decode_threads.begin(), decode_threads.end());
  plan.batch_sizes = quick ? std::vector<std::uint32_t>{64, 256}
                           : std::vector<std::uint32_t>{32, 64, 128, 256, 512};
  plan.prefetch_depths =
      quick ? std::vector<std::uint32_t>{1, 4} : std::vector<std::uint32_t>{1, 2, 4, 8};
  plan.max_records = options.max_records != 0 ? options.max_records : quick ? 1000 : 20000;
  plan.max_seconds = options.max_seconds > 0 ? options.max_seconds : quick ? 0.3 : 3.0;
  plan.device_seconds = plan.max_seconds;
  if (options.storage_emulation != nullptr) {
    // The throttle lets a burst of about 0.1 s through at a measurement's start; a few seconds
    // make it a small share (bench.h).
    plan.device_seconds = std::max(plan.max_seconds, quick ? 3.0 : 5.0);
  }
  plan.probe_file_bytes = ProbeFileBytes(options);
  plan.sample_images = quick ? 128 : 512;
  plan.repeats = options.repeats != 0 ? options.repeats : quick ? 2 : 3;
  return plan;
}

}  // namespace bench

std::uint64_t ProbeFileBytes(const BenchOptions& options) {
  return options.probe_file_bytes != 0 ? options.probe_file_bytes
         : options.quick               ? std::uint64_t{128} << 20
                                       : std::uint64_t{1} << 30;
}

Result<BenchReport> RunBench(const BenchOptions& options, const BenchProgress& progress) {
  PACKREC_RETURN_IF_ERROR(bench::Validate(options));
  bench::Plan plan = bench::MakePlan(options);
  plan.uring_unavailable = bench::UringUnavailable();
  const auto start = bench::Clock::now();
  BenchReport report;
  report.packrec_version = Version();
  report.started_at = bench::UtcNow();
  report.mode = options.quick ? "quick" : "full";
  if (options.storage_emulation != nullptr) {
    report.emulated_storage = options.storage_emulation->profile();
    report.emulated_device = options.storage_emulation->Describe();
  }

  std::vector<std::unique_ptr<bench::Source>> sources;
  for (const std::filesystem::path& input : options.inputs) {
    PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<bench::Source> source, bench::Source::Open(input));
    sources.push_back(std::move(source));
  }
  report.machine = bench::DescribeMachine(options.inputs.front(), options.cuda_device);
  report.load_before = bench::LoadAverage();
  const bench::CpuTimes cpu_before = bench::ReadCpuTimes();

  const bool first_is_url = IsDatasetUrl(options.inputs.front().string());
  if (first_is_url) {
    report.storage.skipped =
        "the data is at a URL: the probe measures a local device (the network rows below stand "
        "for it)";
  } else if (options.probe_storage) {
    PACKREC_ASSIGN_OR_RETURN(report.storage,
                             bench::ProbeStorage(plan, options.inputs.front(), progress));
  } else {
    report.storage.skipped = "the storage probe was turned off (--no-probe)";
  }

  for (const auto& source : sources) {
    PACKREC_ASSIGN_OR_RETURN(std::vector<AccessMeasurement> rows,
                             IsDatasetUrl(source->path().string())
                                 ? bench::MeasureNetworkAccess(*source, plan, progress)
                                 : bench::MeasureAccess(*source, plan, report.storage, progress));
    report.access.insert(report.access.end(), rows.begin(), rows.end());
  }
  if (!plan.uring_unavailable.empty()) {
    report.notes.push_back("no io_uring rows: " + plan.uring_unavailable);
  } else if (std::none_of(sources.begin(), sources.end(),
                          [](const auto& source) { return source->locates_records(); }) &&
             !first_is_url) {
    report.notes.push_back("io_uring rows are measured for shard datasets only (none given)");
  }
  // The stages run on one dataset: shards first, then any packed dataset, then loose files.
  bench::Source* stage_source = sources.front().get();
  for (const FormatInfo& format : ListFormats()) {
    const auto found = std::find_if(sources.begin(), sources.end(), [&](const auto& source) {
      return format.readable && source->kind() == format.name;
    });
    if (found != sources.end()) {
      stage_source = found->get();
      break;
    }
  }
  if (options.measure_stages) {
    PACKREC_RETURN_IF_ERROR(bench::MeasureStages(*stage_source, plan, report, progress));
    PACKREC_RETURN_IF_ERROR(bench::MeasureColdEpochs(*stage_source, plan, report, progress));
  } else {
    report.gpu_status = "not measured: --no-stages";
    report.notes.push_back("the loader's stages were not measured (--no-stages)");
  }
  report.load_after = bench::LoadAverage();
  const bench::CpuTimes cpu_after = bench::ReadCpuTimes();
  if (const std::uint64_t total = cpu_after.total - cpu_before.total; total > 0) {
    report.steal_share =
        static_cast<double>(cpu_after.steal - cpu_before.steal) / static_cast<double>(total);
    report.busy_share =
        static_cast<double>(cpu_after.busy - cpu_before.busy) / static_cast<double>(total);
  }
  AnalyzeBench(options, report);
  report.seconds = bench::SecondsSince(start);
  return report;
}

}  // namespace packrec
