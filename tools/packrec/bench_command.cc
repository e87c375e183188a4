#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "packrec/bench.h"
#include "packrec/storage_emulation.h"

namespace packrec::cli {

namespace {

std::string StorageHelp() {
  std::string help =
      "Measure as if the data sat on another device: a copy on a loop device whose reads the "
      "kernel's block I/O controller caps (root only; docs/bench.md). Profiles:";
  for (const StorageProfile& profile : BuiltinStorageProfiles()) {
    help += " " + profile.name + " (" + std::to_string(profile.read_bytes_per_s / 1'000'000) +
            " MB/s, " + std::to_string(profile.read_iops) + " reads/s),";
  }
  return help + " or your own: bps=200MB,iops=150";
}

// The inputs copied onto the emulated device, and `options` pointed at the copies (the probe's
// scratch file goes there too).
Result<std::unique_ptr<StorageEmulation>> EmulateStorage(const std::string& storage,
                                                         BenchOptions& options, bool quiet) {
  PACKREC_ASSIGN_OR_RETURN(const StorageProfile profile, ParseStorageProfile(storage));
  if (const std::string why = StorageEmulation::Unavailable(); !why.empty()) {
    return Status::NotSupported("--storage " + storage + " skipped: " + why +
                                (::geteuid() != 0 ? "; run it with sudo" : ""));
  }
  if (!quiet) {
    std::fprintf(stderr, "emulated storage: copying the inputs onto a %s device\n",
                 profile.name.c_str());
  }
  PACKREC_ASSIGN_OR_RETURN(
      std::unique_ptr<StorageEmulation> emulation,
      StorageEmulation::Create(profile, options.inputs, options.scratch_dir,
                               options.probe_storage ? ProbeFileBytes(options) : 0));
  options.inputs = emulation->inputs();
  options.scratch_dir = emulation->mount_point();
  options.storage_emulation = emulation.get();
  return emulation;
}

// What the flags set.
struct BenchArgs {
  std::vector<std::string> inputs;
  std::string json_path;
  std::string scratch;
  std::string storage;
  bool quick = false;
  bool no_probe = false;
  bool no_cold = false;
  bool no_stages = false;
  bool quiet = false;
  BenchOptions options;
};

// How each measurement runs: readers, queue depths, threads, batch, sizes, limits.
void AddMeasurementOptions(CLI::App* command, BenchOptions& o) {
  command->add_option("--readers", o.readers, "Reader counts to sweep (default 1,2,4,8,16)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 1024u));
  command
      ->add_option("--queue-depth", o.queue_depths,
                   "io_uring queue depths for shards (default 1,4,16,64)")
      ->delimiter(',')
      ->check(CLI::Range(1u, 4096u));
  command->add_option("--threads", o.threads, "Decode/loader threads (default: one per core)")
      ->check(CLI::Range(1u, 1024u));
  command->add_option("--batch", o.batch_size, "Batch size (default 256)")
      ->check(CLI::Range(1u, 65536u));
  command->add_option("--prefetch", o.prefetch_batches, "Batches decoded ahead (default 4)")
      ->check(CLI::Range(1u, 1024u));
  command->add_option("--size", o.output_size, "Output image side in pixels (default 224)")
      ->check(CLI::Range(1u, 8192u));
  command
      ->add_option("--consumer-rate", o.consumer_images_per_s,
                   "Images/s the simulated GPU consumer trains at (default 2000)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--max-records", o.max_records,
                   "Records per measurement at most (default 20,000; quick 1,000)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  command
      ->add_option("--seconds", o.max_seconds,
                   "Seconds per measurement at most (default 3; quick 0.3)")
      ->check(CLI::Range(0.01, 3600.0));
  command
      ->add_option("--probe-size", o.probe_file_bytes,
                   "Size of the probe's scratch file (e.g. 64MiB, 1G; default 1 GiB; quick 128 "
                   "MiB)")
      ->transform(CLI::AsSizeValue(false))  // units as --shard-size takes them
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 40));
  command
      ->add_option("--repeats", o.repeats,
                   "Runs of each loader measurement and cold access row; settings and formats "
                   "are compared only beyond their spread (default 3; quick 2)")
      ->check(CLI::Range(1u, 100u));
  command->add_option("--device", o.cuda_device, "CUDA device (default 0)")
      ->check(CLI::Range(0, 1024));
}

void RunBenchCommand(const BenchArgs* args, int& exit_code) {
  BenchOptions options = args->options;
  for (const std::string& input : args->inputs) {
    options.inputs.emplace_back(input);
  }
  options.quick = args->quick;
  options.probe_storage = !args->no_probe;
  options.cold_cache = !args->no_cold;
  options.measure_stages = !args->no_stages;
  options.scratch_dir = args->scratch;
  // Checked before the run, not after it: a typo in the path must not cost a full run. Opened
  // for appending, so that a previous report stays until this one replaces it.
  if (!args->json_path.empty() && !std::ofstream(args->json_path, std::ios::app)) {
    exit_code = Fail("bench", Status::IOError("cannot write the JSON report to " + args->json_path +
                                              ": " + std::strerror(errno))
                                  .WithPath(args->json_path));
    return;
  }
  // The report file says so too: a script reading it never takes a previous run's figures.
  const auto fail = [&](const Status& status) {
    if (!args->json_path.empty()) {
      std::ofstream(args->json_path, std::ios::trunc) << ErrorJson("bench", status) << "\n";
    }
    return Fail("bench", status);
  };
  std::unique_ptr<StorageEmulation> emulation;
  if (!args->storage.empty()) {
    Result<std::unique_ptr<StorageEmulation>> made =
        EmulateStorage(args->storage, options, args->quiet);
    if (!made.ok()) {
      exit_code = fail(made.status());
      return;
    }
    emulation = std::move(made).value();
    if (!args->quiet) std::fprintf(stderr, "emulated storage: %s\n", emulation->Describe().c_str());
  }
  const auto start = std::chrono::steady_clock::now();
  BenchProgress progress;
  if (!args->quiet) {
    progress = [start](std::string_view what) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "[%6.1f s] %.*s\n", seconds, static_cast<int>(what.size()), what.data());
    };
  }
  Result<BenchReport> report = RunBench(options, progress);
  if (!report.ok()) {
    exit_code = fail(report.status());
    return;
  }
  std::cout << BenchReportTable(*report);
  if (!args->json_path.empty()) {
    std::ofstream out(args->json_path, std::ios::trunc);
    out << BenchReportJson(*report) << "\n";
    out.close();
    if (!out) {
      exit_code = Fail("bench", Status::IOError("cannot write " + args->json_path));
      return;
    }
    std::cout << "JSON: " << args->json_path << "\n";
  }
  exit_code = kExitOk;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "bench",
      "Measure whether the data is delivered fast enough: storage, loose files vs packed "
      "formats, random vs sequential, cold vs warm cache, readers, loader stages, GPU upload; "
      "names the bottleneck");
  command->footer(
      "Example: packrec bench tree/ data.pkr data.lmdb data.h5 --quick --json bench.json\n"
      "Nothing is written beside the data; the probe's scratch file goes to --scratch (default "
      "$TMPDIR or /tmp) and is removed. See docs/bench.md.");
  auto args = std::make_shared<BenchArgs>();
  BenchOptions& o = args->options;
  command->add_option("INPUT", args->inputs, "Image folders (loose files) and packrec datasets")
      ->required();
  command->add_flag("--quick", args->quick, "Under a minute: fewer and shorter measurements");
  command->add_option("--json", args->json_path, "Also write every figure as JSON to this file");
  command->add_option("--scratch", args->scratch,
                      "Directory for the storage probe's scratch file (default $TMPDIR or /tmp); "
                      "put it on the data's filesystem");
  command->add_option("--storage", args->storage, StorageHelp());
  command->add_flag("--no-probe", args->no_probe, "Skip the storage probe (writes nothing)");
  command->add_flag("--no-cold", args->no_cold, "Warm-cache measurements only (no eviction)");
  command->add_flag("--no-stages", args->no_stages,
                    "Storage and access patterns only: no decode, loader or GPU measurements");
  AddMeasurementOptions(command, o);
  command->add_flag("--quiet,-q", args->quiet, "No progress lines");
  command->callback([args, &exit_code] { RunBenchCommand(args.get(), exit_code); });
}

}  // namespace packrec::cli
