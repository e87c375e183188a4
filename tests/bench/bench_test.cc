// packrec bench: cold cache verified with mincore, every measurement present on real data, a
// dataset on a read-only mount measured without a write beside it, the analysis naming the
// slowest stage, and bad options refused.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "packrec/bench.h"
#include "packrec/convert.h"
#include "packrec/reader.h"
#include "packrec/synth.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

void MakeTree(const fs::path& tree, std::uint32_t per_class) {
  SynthOptions synth;
  synth.classes = 3;
  synth.per_class = per_class;
  synth.seed = 5;
  synth.mean_width = 160;
  synth.mean_height = 120;
  REQUIRE(WriteSyntheticTree(tree, synth).ok());
}

void MakeDataset(const fs::path& tree, const fs::path& out, const std::string& format) {
  ConvertOptions convert;
  convert.source = tree;
  convert.output = out;
  convert.writer.format = format;
  const auto stats = Convert(convert);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
}

// Small and short: the test checks what is measured, not how fast.
BenchOptions TinyOptions(std::vector<fs::path> inputs, const fs::path& scratch) {
  BenchOptions options;
  options.inputs = std::move(inputs);
  options.scratch_dir = scratch;
  options.quick = true;
  options.readers = {1, 2};
  options.queue_depths = {4};
  options.threads = 2;
  options.batch_size = 8;
  options.prefetch_batches = 2;
  options.output_size = 32;
  options.max_records = 24;
  options.max_seconds = 0.05;
  options.probe_file_bytes = 2 << 20;
  options.consumer_images_per_s = 1e6;
  return options;
}

void ReadAll(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> buffer(1 << 16);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
  }
}

TEST_CASE("eviction leaves no page of a clean file resident, and mincore proves it") {
  TempDir dir;
  const fs::path file = dir / "data.bin";
  test::WriteBytes(file, std::vector<std::byte>(1 << 20, std::byte{7}));
  ::sync();
  ReadAll(file);
  const auto before = ResidentPages(file);
  REQUIRE(before.ok());
  CHECK(before->first > 0);
  CHECK(before->second == (1u << 20) / static_cast<unsigned>(::sysconf(_SC_PAGESIZE)));
  const auto eviction = EvictFromPageCache({file});
  REQUIRE(eviction.ok());
  CHECK(eviction->files == 1);
  CHECK(eviction->resident_before == before->first);
  CHECK(eviction->resident_after == 0);
  CHECK(eviction->verified());
  CHECK(ResidentPages(file)->first == 0);
}

TEST_CASE("eviction writes dirty pages back first, so a file just written is evicted too") {
  TempDir dir;
  const fs::path file = dir / "fresh.bin";
  test::WriteBytes(file, std::vector<std::byte>(1 << 20, std::byte{9}));  // no sync
  const auto eviction = EvictFromPageCache({file});
  REQUIRE(eviction.ok());
  CHECK(eviction->verified());
  CHECK(test::ReadBytes(file) == std::vector<std::byte>(1 << 20, std::byte{9}));
}

TEST_CASE("eviction on tmpfs is reported as not verified, with the pages that stayed") {
  TempDir dir;
  test::ScopedTmpfs tmpfs(dir / "mnt", "4m");
  if (!tmpfs.mounted()) {
    MESSAGE("skipped: cannot mount a tmpfs here (not root)");
    return;
  }
  const fs::path file = dir / "mnt" / "data.bin";
  test::WriteBytes(file, std::vector<std::byte>(64 << 10, std::byte{1}));
  const auto eviction = EvictFromPageCache({file});
  REQUIRE(eviction.ok());
  CHECK(eviction->pages == 16);
  CHECK(eviction->resident_after == 16);
  CHECK_FALSE(eviction->verified());
}

TEST_CASE("eviction of a missing file names it") {
  const auto eviction = EvictFromPageCache({"/nonexistent/packrec-bench-file"});
  REQUIRE_FALSE(eviction.ok());
  CHECK(eviction.status().message().find("/nonexistent/packrec-bench-file") != std::string::npos);
}

TEST_CASE("bench measures loose files and every format: probe, access grid, stages, analysis") {
  TempDir dir;
  MakeTree(dir / "tree", 12);
  MakeDataset(dir / "tree", dir / "ds.pkr", "shard");
  MakeDataset(dir / "tree", dir / "ds.lmdb", "lmdb");
  MakeDataset(dir / "tree", dir / "ds.h5", "hdf5");
  fs::create_directory(dir / "scratch");
  std::vector<std::string> progress;
  const auto report = RunBench(
      TinyOptions({dir / "tree", dir / "ds.pkr", dir / "ds.lmdb", dir / "ds.h5"}, dir / "scratch"),
      [&](std::string_view line) { progress.emplace_back(line); });
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(!progress.empty());
  CHECK(fs::is_empty(dir / "scratch"));  // the probe's file is gone

  CHECK(report->mode == "quick");
  CHECK(report->machine.cores >= 1);
  CHECK(report->machine.memory_bytes > 0);
  CHECK(report->machine.data_filesystem != "unknown");
  REQUIRE(report->storage.ran);
  CHECK(report->storage.same_filesystem_as_data);
  CHECK(report->storage.file_bytes == (2u << 20));
  CHECK(report->storage.sequential_mb_per_s > 0);
  CHECK(report->storage.random_iops_qd1 > 0);
  CHECK(report->storage.random_iops > 0);

  // order x cache x readers for each source, every one with records and a rate.
  std::set<std::string> seen;
  for (const AccessMeasurement& row : report->access) {
    seen.insert(row.source + "/" + row.order + "/" + row.cache + "/" + row.engine + "/" +
                std::to_string(row.concurrency));
    CHECK(row.records > 0);
    CHECK(row.bytes > 0);
    CHECK(row.records_per_s > 0);
    // A share of the device's bandwidth, unless the row was faster than the device (cold*: this
    // VM's host caches its disk).
    CHECK(row.device_bandwidth_share.has_value() != row.served_by_cache_below);
    CHECK(row.eviction.has_value() == (row.cache == "cold"));
    if (row.eviction) {
      CHECK(row.eviction->pages > 0);
      // A real filesystem under the test: eviction is complete and the report says so.
      CHECK_MESSAGE(row.eviction->verified(), row.source, " ", row.order, " resident ",
                    row.eviction->resident_after);
    }
  }
  for (const char* source : {"files", "shard", "lmdb", "hdf5"}) {
    for (const char* order : {"sequential", "random"}) {
      for (const char* cache : {"cold", "warm"}) {
        for (const char* readers : {"1", "2"}) {
          CHECK_MESSAGE(seen.count(std::string(source) + "/" + order + "/" + cache + "/threads/" +
                                   readers) == 1,
                        source, " ", order, " ", cache, " ", readers);
        }
      }
    }
  }
  for (const AccessMeasurement& row : report->access) {
    if (row.engine == "io_uring") CHECK(row.source == "shard");
  }

  // Stages: each one alone, the decode thread sweep, the loader and its sweeps, starvation.
  CHECK(report->stage_source == (dir / "ds.pkr").string());
  std::set<std::string> stages;
  for (const StageMeasurement& stage : report->stages) {
    stages.insert(stage.stage + "/" + stage.sweep);
    CHECK(stage.images > 0);
    CHECK(stage.images_per_s > 0);
  }
  for (const char* stage : {"read/", "decode/threads", "decode+augment/threads", "augment/",
                            "collate/", "pipeline/", "pipeline/batch_size", "pipeline/prefetch"}) {
    CHECK_MESSAGE(stages.count(stage) == 1, stage);
  }
  REQUIRE(report->starvation.has_value());
  CHECK(report->starvation->batches > 0);
  CHECK(report->starvation->wait_share >= 0);
  CHECK(report->starvation->wait_share <= 1);
  if (report->gpu_status.rfind("ok: ", 0) != 0) {
    CHECK(report->gpu_status.rfind("no CUDA device: ", 0) == 0);
    CHECK(report->upload.empty());
  } else {
    CHECK(report->upload.size() == 2 * 2 * 2);  // pinned x async x two batch sizes
  }
  CHECK(!report->bottleneck.empty());
  CHECK(!report->findings.empty());
  CHECK(report->recommendation.find(report->bottleneck + " is the limit") != std::string::npos);

  const std::string table = BenchReportTable(*report);
  CHECK(table.find("bottleneck: " + report->bottleneck) != std::string::npos);
  CHECK(table.find("\nrecommendation:\n  - consumer = ") != std::string::npos);
  const std::string json = BenchReportJson(*report);
  CHECK(json.find("\"schema\": \"packrec-bench/1\"") != std::string::npos);
}

TEST_CASE("bench reads a dataset on a read-only mount and writes nothing beside it") {
  TempDir dir;
  test::ScopedTmpfs tmpfs(dir / "ro", "32m");
  if (!tmpfs.mounted()) {
    MESSAGE("skipped: cannot mount a tmpfs here (not root)");
    return;
  }
  MakeTree(dir / "tree", 6);
  MakeDataset(dir / "tree", dir / "ro" / "ds.pkr", "shard");
  REQUIRE(tmpfs.RemountReadOnly());
  const auto before = test::SnapshotTree(dir / "ro");
  fs::create_directory(dir / "scratch");
  const auto report = RunBench(TinyOptions({dir / "ro" / "ds.pkr"}, dir / "scratch"));
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(test::SnapshotTree(dir / "ro") == before);
  CHECK(fs::is_empty(dir / "scratch"));
  // tmpfs keeps its pages: the cold runs say they were not cold, and the notes say why.
  bool unverified = false;
  for (const AccessMeasurement& row : report->access) {
    if (row.eviction && !row.eviction->verified()) unverified = true;
  }
  CHECK(unverified);
  bool noted = false;
  for (const std::string& note : report->notes) {
    if (note.find("cold cache not verified for shard") != std::string::npos) noted = true;
  }
  CHECK(noted);
  // The probe ran on another filesystem than the data: said too.
  CHECK_FALSE(report->storage.same_filesystem_as_data);
}

TEST_CASE("bench puts its scratch file in TMPDIR by default and removes it") {
  TempDir dir;
  MakeTree(dir / "tree", 4);
  fs::create_directory(dir / "tmp");
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TMPDIR", (dir / "tmp").c_str(), 1);
  BenchOptions options = TinyOptions({dir / "tree"}, "");
  options.cold_cache = false;
  const auto report = RunBench(options);
  if (old != nullptr) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(report->storage.scratch_file.rfind((dir / "tmp").string(), 0) == 0);
  CHECK(fs::is_empty(dir / "tmp"));
  for (const AccessMeasurement& row : report->access) CHECK(row.cache == "warm");
  // Loose files only: the stages that need a dataset say so instead of failing.
  bool noted = false;
  for (const std::string& note : report->notes) {
    if (note.find("runs on packed datasets") != std::string::npos) noted = true;
  }
  CHECK(noted);
}

TEST_CASE("bench refuses bad options and inputs with the reason") {
  TempDir dir;
  CHECK(RunBench(BenchOptions{}).status().code() == StatusCode::kInvalidArgument);
  BenchOptions missing = TinyOptions({dir / "nope"}, dir.path());
  const Status not_found = RunBench(missing).status();
  CHECK(not_found.code() == StatusCode::kNotFound);
  CHECK(not_found.message().find("nope") != std::string::npos);
  fs::create_directory(dir / "empty");
  const Status empty = RunBench(TinyOptions({dir / "empty"}, dir.path())).status();
  CHECK(empty.code() == StatusCode::kInvalidInput);
  CHECK(empty.message().find("empty") != std::string::npos);
  MakeTree(dir / "tree", 2);
  BenchOptions bad = TinyOptions({dir / "tree"}, dir.path());
  bad.batch_size = 0;
  CHECK(RunBench(bad).status().message().find("--batch") != std::string::npos);
  bad = TinyOptions({dir / "tree"}, dir.path());
  bad.readers = {0};
  CHECK(RunBench(bad).status().message().find("--readers") != std::string::npos);
  bad = TinyOptions({dir / "tree"}, dir.path());
  bad.consumer_images_per_s = -1;
  CHECK(RunBench(bad).status().message().find("--consumer-rate") != std::string::npos);
  bad = TinyOptions({dir / "tree"}, dir / "no-such-scratch");
  const Status scratch = RunBench(bad).status();
  CHECK(scratch.code() == StatusCode::kNotFound);
  CHECK(scratch.message().find("no-such-scratch") != std::string::npos);
}

BenchReport StageReport(double read, double decode, double collate, std::optional<double> upload) {
  BenchReport report;
  report.machine.cores = 8;
  const auto add = [&](const char* name, unsigned threads, double rate) {
    StageMeasurement stage;
    stage.stage = name;
    stage.threads = threads;
    stage.images = 1000;
    stage.images_per_s = rate;
    stage.sweep = std::string(name) == "decode+augment" ? "threads" : "";
    report.stages.push_back(stage);
  };
  add("read", 8, read);
  add("decode+augment", 1, decode / 8);
  add("decode+augment", 8, decode);
  add("collate", 1, collate);
  if (upload) add("upload", 1, *upload);
  return report;
}

TEST_CASE("the analysis names the slowest stage and what would fix it") {
  BenchOptions options;
  options.consumer_images_per_s = 2000;
  BenchReport decode_bound = StageReport(50'000, 1'500, 90'000, 40'000);
  AnalyzeBench(options, decode_bound);
  CHECK(decode_bound.bottleneck == "decode+augment");
  // 2,000 images/s at 187.5 per thread needs 11 threads; the machine has 8.
  CHECK(decode_bound.recommendation.find("needs about 11 cores") != std::string::npos);
  CHECK(decode_bound.recommendation.find("not fast enough") != std::string::npos);

  BenchReport upload_bound = StageReport(50'000, 30'000, 90'000, 9'000);
  AnalyzeBench(options, upload_bound);
  CHECK(upload_bound.bottleneck == "upload");
  CHECK(upload_bound.recommendation.find("threads=1 (packrec.Loader(threads=1)") !=
        std::string::npos);
  const auto knob = [](const BenchReport& report, const std::string& name) {
    const auto found = std::find_if(report.advice.begin(), report.advice.end(),
                                    [&](const BenchAdvice& item) { return item.knob == name; });
    return found == report.advice.end() ? std::optional<BenchAdvice>() : *found;
  };
  REQUIRE(knob(upload_bound, "threads"));
  CHECK(knob(upload_bound, "threads")->value == "1");
  CHECK(knob(upload_bound, "threads")->set_with.find("packrec.Loader(threads=1)") == 0);
  REQUIRE(knob(decode_bound, "resize_short"));
  CHECK(knob(decode_bound, "resize_short")->value == "256");
  CHECK(knob(decode_bound, "consumer")->value == "not fast enough");

  BenchReport storage_bound = StageReport(50'000, 30'000, 90'000, std::nullopt);
  AccessMeasurement cold;
  cold.source = "shard";
  cold.path = "ds.pkr";
  cold.order = "random";
  cold.cache = "cold";
  cold.engine = "threads";
  cold.concurrency = 4;
  cold.records_per_s = 800;
  storage_bound.access.push_back(cold);
  storage_bound.stage_source = "ds.pkr";
  AnalyzeBench(options, storage_bound);
  CHECK(storage_bound.bottleneck == "storage");
  CHECK(storage_bound.recommendation.find("shard format") != std::string::npos);
  REQUIRE(knob(storage_bound, "format"));
  CHECK(knob(storage_bound, "format")->value == "shard");
  CHECK(knob(storage_bound, "format")->why.find("4 concurrent reads") != std::string::npos);
}

// A cold row on threads of `source` ("files" or a format), read in `order`.
AccessMeasurement ColdRow(const std::string& source, const std::string& order, unsigned readers) {
  AccessMeasurement row;
  row.source = source;
  row.path = source == "files" ? "tree" : "ds." + source;
  row.order = order;
  row.cache = "cold";
  row.engine = "threads";
  row.concurrency = readers;
  return row;
}

// A report shaped like this VM's: a 1,400 MB/s, 50,000 IOPS probe (O_DIRECT, the data's
// filesystem), and cold rows that beat it, as a host's page cache below the guest makes them.
BenchReport ProbedReport() {
  BenchReport report = StageReport(50'000, 30'000, 90'000, std::nullopt);
  report.storage.ran = true;
  report.storage.direct_io = true;
  report.storage.same_filesystem_as_data = true;
  report.storage.filesystem = "ext4";
  report.storage.sequential_mb_per_s = 1'400;
  report.storage.random_iops_qd1 = 9'000;
  report.storage.random_iops = 50'000;
  report.storage.random_depth = 32;
  report.machine.data_device = "/dev/vda";
  report.machine.data_device_flag = "hdd";
  report.machine.data_filesystem = "ext4";
  const auto add = [&](const std::string& source, const std::string& order, double records_per_s,
                       double mb_per_s) {
    AccessMeasurement row = ColdRow(source, order, 4);
    row.seconds = 1.0;
    row.records_per_s = records_per_s;
    row.mb_per_s = mb_per_s;
    row.device_bandwidth_share = mb_per_s / 1'400;
    row.eviction = CacheEviction{1, 100, 100, 0, false};
    report.access.push_back(row);
  };
  add("files", "random", 2'000, 60);       // within the device: a device figure
  add("shard", "random", 148'000, 4'246);  // 3x the bandwidth, 3x the IOPS: a cache below
  add("hdf5", "sequential", 40'000, 3'326);
  add("lmdb", "random", 20'000, 600);  // within both
  return report;
}

TEST_CASE(
    "cold figures above the probe are marked as a cache below and left out of device claims") {
  BenchOptions options;
  BenchReport report = ProbedReport();
  AnalyzeBench(options, report);
  CHECK_FALSE(report.access[0].served_by_cache_below);
  CHECK(report.access[1].served_by_cache_below);
  CHECK(report.access[2].served_by_cache_below);
  CHECK_FALSE(report.access[3].served_by_cache_below);
  CHECK_FALSE(report.access[1].device_bandwidth_share.has_value());
  CHECK(report.access[3].device_bandwidth_share.has_value());
  for (const std::string& finding : report.findings) {
    CAPTURE(finding);
    // No share of the device's bandwidth above 100%, and no ratio resting on a cold* figure:
    // the loose files are compared with LMDB's device figure, not the faster cold* shard one.
    CHECK(finding.find("of the device's sequential bandwidth") == std::string::npos);
    CHECK(finding.find("shard reads") == std::string::npos);
  }
  CHECK(std::any_of(report.findings.begin(), report.findings.end(), [](const std::string& line) {
    return line.find("lmdb reads 10.0x as many records/s") != std::string::npos;
  }));
  const bool noted = std::any_of(report.notes.begin(), report.notes.end(), [](const auto& note) {
    return note.find("a cache below this machine") != std::string::npos &&
           note.find("shard (1)") != std::string::npos &&
           note.find("hdf5 (1)") != std::string::npos;
  });
  CHECK(noted);
  const std::string table = BenchReportTable(report);
  CHECK(table.find("cold*") != std::string::npos);
  for (std::size_t begin = 0, end; begin < table.size(); begin = end + 1) {
    end = table.find('\n', begin);
    if (end == std::string::npos) end = table.size();
    CHECK_MESSAGE(end - begin <= 100, table.substr(begin, end - begin));
  }
  CHECK(BenchReportJson(report).find("\"served_by_cache_below\": true") != std::string::npos);

  // A buffered probe is no yardstick: nothing is marked.
  BenchReport buffered = ProbedReport();
  buffered.storage.direct_io = false;
  AnalyzeBench(options, buffered);
  CHECK_FALSE(buffered.access[1].served_by_cache_below);
}

TEST_CASE("the device class comes from the probe's latency where the kernel's flag is wrong") {
  BenchOptions options;
  BenchReport vm = ProbedReport();  // flagged rotational, 0.11 ms per read at depth 1
  AnalyzeBench(options, vm);
  CHECK(vm.machine.data_device_kind == "ssd");
  CHECK(vm.machine.data_device_kind_from == "measured");
  CHECK(vm.machine.data_device_flag == "hdd");
  CHECK(std::any_of(vm.notes.begin(), vm.notes.end(), [](const std::string& note) {
    return note.find("the kernel reports /dev/vda as rotational") != std::string::npos;
  }));
  const auto kind = [&](double iops_qd1, double iops) {
    BenchReport report = ProbedReport();
    report.storage.random_iops_qd1 = iops_qd1;
    report.storage.random_iops = iops;
    AnalyzeBench(options, report);
    return report.machine.data_device_kind;
  };
  CHECK(kind(120, 300) == "hdd");                          // 8.3 ms: a spinning disk
  CHECK(kind(1'000, 3'000) == "network or cloud volume");  // 1 ms: gp3-like
  CHECK(kind(15'000, 400'000) == "nvme");
  BenchReport elsewhere = ProbedReport();
  elsewhere.storage.same_filesystem_as_data = false;  // the probe says nothing of the data's disk
  AnalyzeBench(options, elsewhere);
  CHECK(elsewhere.machine.data_device_kind == "hdd");
  CHECK(elsewhere.machine.data_device_kind_from == "kernel flag");
}

// A prefetch sweep of repeated runs: prefetch 1 and 4 (the configured depth) with these runs.
BenchReport PrefetchSweep(std::vector<double> one, std::vector<double> four) {
  BenchReport report = StageReport(50'000, 30'000, 90'000, std::nullopt);
  for (const auto& [depth, runs] : {std::pair{1u, one}, std::pair{4u, four}}) {
    StageMeasurement point;
    point.stage = "pipeline";
    point.sweep = "prefetch";
    point.threads = 8;
    point.batch_size = 256;
    point.prefetch_batches = depth;
    point.images = 1000;
    point.runs = runs;
    std::vector<double> sorted = runs;
    std::sort(sorted.begin(), sorted.end());
    point.images_per_s = sorted[sorted.size() / 2];
    report.stages.push_back(point);
  }
  return report;
}

TEST_CASE("two settings that differ less than their spread give no advice between them") {
  BenchOptions options;  // prefetch 4 configured
  // The case: 583 against 541, with runs of one setting spanning 399 to 541.
  BenchReport noisy = PrefetchSweep({560, 583, 600}, {399, 541, 590});
  AnalyzeBench(options, noisy);
  CHECK(std::none_of(noisy.advice.begin(), noisy.advice.end(),
                     [](const BenchAdvice& item) { return item.knob == "prefetch"; }));
  CHECK(noisy.recommendation.find("prefetch") == std::string::npos);
  CHECK(std::any_of(noisy.findings.begin(), noisy.findings.end(), [](const std::string& line) {
    return line.find("is as fast as the best (within the spread of their runs") !=
           std::string::npos;
  }));
  // Runs that do not meet, but 0.5% apart: no training run would notice, no advice either.
  BenchReport tight = PrefetchSweep({2'840, 2'843, 2'849}, {2'815, 2'829, 2'830});
  AnalyzeBench(options, tight);
  CHECK(std::none_of(tight.advice.begin(), tight.advice.end(),
                     [](const BenchAdvice& item) { return item.knob == "prefetch"; }));
  // Beyond the spread (their runs do not meet) and by more than 5%, the smaller depth is advised.
  BenchReport clear = PrefetchSweep({900, 910, 920}, {540, 550, 560});
  AnalyzeBench(options, clear);
  const auto prefetch =
      std::find_if(clear.advice.begin(), clear.advice.end(),
                   [](const BenchAdvice& item) { return item.knob == "prefetch"; });
  REQUIRE(prefetch != clear.advice.end());
  CHECK(prefetch->value == "1");
  const std::string table = BenchReportTable(clear);
  CHECK(table.find("+-1.1%") != std::string::npos);  // (920 - 900) / 910 / 2
  CHECK(BenchReportJson(clear).find("\"runs\": [") != std::string::npos);
}

TEST_CASE("a busy machine and cold measurements too short to mean much are noted") {
  BenchOptions options;
  BenchReport report = ProbedReport();
  report.load_before = 6.5;  // on 8 cores
  report.steal_share = 0.08;
  report.access[0].seconds = 0.01;
  AnalyzeBench(options, report);
  CHECK(std::any_of(report.notes.begin(), report.notes.end(), [](const std::string& note) {
    return note.find("the machine was busy: load average 6.5 on 8 cores") == 0 &&
           note.find("8.0% of CPU time stolen") != std::string::npos;
  }));
  CHECK(std::any_of(report.notes.begin(), report.notes.end(), [](const std::string& note) {
    return note.find("1 of 4 cold measurements read for under 50 ms") == 0;
  }));
}

TEST_CASE("formats whose cold runs overlap are called even; the advice says either serves") {
  BenchOptions options;
  const auto with_runs = [](std::vector<double> shard_runs, std::vector<double> lmdb_runs) {
    BenchReport report = StageReport(50'000, 30'000, 90'000, std::nullopt);
    for (const auto& [source, runs] :
         {std::pair{"shard", shard_runs}, std::pair{"lmdb", lmdb_runs}}) {
      AccessMeasurement row;
      row.source = source;
      row.path = std::string("ds.") + source;
      row.order = "random";
      row.cache = "cold";
      row.engine = "threads";
      row.concurrency = 1;
      row.runs = runs;
      row.records_per_s = runs[runs.size() / 2];
      report.access.push_back(row);
    }
    return report;
  };
  const auto format_advice = [](const BenchReport& report) {
    return *std::find_if(report.advice.begin(), report.advice.end(),
                         [](const BenchAdvice& item) { return item.knob == "format"; });
  };
  BenchReport even = with_runs({900, 1'000, 1'100}, {850, 950, 1'050});
  AnalyzeBench(options, even);
  CHECK(format_advice(even).value == "shard");
  CHECK(format_advice(even).why.find("lmdb is as fast within the spread of their runs: either "
                                     "serves") != std::string::npos);
  CHECK(std::any_of(even.findings.begin(), even.findings.end(), [](const std::string& line) {
    return line.find(
               "shard and lmdb read at random within the spread of their runs (900-1,100 "
               "against 850-1,050 records/s): neither is ahead") == 0;
  }));
  CHECK(BenchReportJson(even).find("\"runs\": [\n") != std::string::npos);
  BenchReport apart = with_runs({1'900, 2'000, 2'100}, {850, 950, 1'050});
  AnalyzeBench(options, apart);
  CHECK(format_advice(apart).why.find("either serves") == std::string::npos);
}

TEST_CASE("storage profiles: the built-in ones, custom devices, overrides, and bad parts named") {
  const Result<StorageProfile> hdd = ParseStorageProfile("hdd");
  REQUIRE(hdd.ok());
  CHECK(hdd->read_bytes_per_s == 180'000'000);
  CHECK(hdd->read_iops == 100);
  CHECK_FALSE(hdd->source.empty());
  for (const char* name : {"sata-ssd", "nvme", "cloud-gp3"}) {
    CAPTURE(name);
    CHECK(ParseStorageProfile(name).ok());
  }
  const Result<StorageProfile> gp3 = ParseStorageProfile("cloud-gp3");
  CHECK(gp3->read_iops == 3'000);
  const Result<StorageProfile> custom = ParseStorageProfile("bps=1.5GiB/s,iops=3k");
  REQUIRE(custom.ok());
  CHECK(custom->name == "custom");
  CHECK(custom->read_bytes_per_s == 1'610'612'736);
  CHECK(custom->read_iops == 3'000);
  const Result<StorageProfile> bytes_only = ParseStorageProfile("bps=200MB");
  REQUIRE(bytes_only.ok());
  CHECK(bytes_only->read_bytes_per_s == 200'000'000);
  CHECK(bytes_only->read_iops == 0);
  CHECK(bytes_only->description.find("reads/s not capped") != std::string::npos);
  const Result<StorageProfile> tuned = ParseStorageProfile("hdd,readahead=128KiB,iops=80");
  REQUIRE(tuned.ok());
  CHECK(tuned->name == "hdd");
  CHECK(tuned->readahead_bytes == 131'072);
  CHECK(tuned->read_iops == 80);
  for (const char* bad : {"floppy", "bps=0", "bps=-5MB", "iops=1x", "bps=10MB,latency=5ms",
                          "hdd,iops=", "", "bps=1e40"}) {
    CAPTURE(bad);
    const Result<StorageProfile> refused = ParseStorageProfile(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  }
  CHECK(ParseStorageProfile("floppy").status().message().find("hdd, sata-ssd, nvme, cloud-gp3") !=
        std::string::npos);
  CHECK(ParseStorageProfile("bps=10MB,latency=5ms").status().message().find("latency=5ms") !=
        std::string::npos);
  // Unavailable() is a reason or nothing; without root it names root.
  if (::geteuid() != 0) CHECK(StorageEmulation::Unavailable().find("root") != std::string::npos);
}

// A report from an emulated 7,200 rpm disk: cold rows with the reads the device served.
BenchReport EmulatedReport() {
  BenchReport report = StageReport(50'000, 30'000, 90'000, std::nullopt);
  report.emulated_storage = *ParseStorageProfile("hdd");
  report.emulated_device = "/dev/loop0 (ext4 on a 0.50 GiB image in memory), reads capped";
  const auto add = [&](const std::string& source, const std::string& order, std::uint64_t records,
                       double seconds, std::uint64_t reads, std::uint64_t bytes) {
    AccessMeasurement row = ColdRow(source, order, 1);
    row.records = records;
    row.seconds = seconds;
    row.records_per_s = static_cast<double>(records) / seconds;
    row.mb_per_s = static_cast<double>(bytes) / 1e6 / seconds;
    row.eviction = CacheEviction{1, 100, 100, 0, false};
    row.device_reads = DeviceReads{reads, bytes};
    report.access.push_back(row);
  };
  // 300 files, 1.4 reads each, in 4.3 s: the reads/s cap (420 reads at 100/s) gives 4.2 s.
  add("files", "random", 300, 4.3, 420, 10'000'000);
  // 3,000 records in order, 540 MB in 3.1 s: the bytes/s cap gives 3.0 s.
  add("shard", "sequential", 3'000, 3.1, 270, 540'000'000);
  return report;
}

TEST_CASE("on emulated storage each cold row is set against what the profile's limits give it") {
  BenchOptions options;
  BenchReport report = EmulatedReport();
  AnalyzeBench(options, report);
  REQUIRE(report.access[0].limits_seconds);
  // The limits less the throttle's first 0.1 s burst.
  CHECK(*report.access[0].limits_seconds == doctest::Approx(4.1));
  CHECK(report.access[0].limited_by == "reads");
  CHECK(*report.access[1].limits_seconds == doctest::Approx(2.9));
  CHECK(report.access[1].limited_by == "bytes");
  const auto found = [&](const std::string& text) {
    return std::any_of(
        report.findings.begin(), report.findings.end(),
        [&](const std::string& line) { return line.find(text) != std::string::npos; });
  };
  // 300 / 4.1 = 73 records/s predicted, 70 measured; 3,000 / 2.9 = 1,034 predicted, 968 measured.
  CHECK(found("loose files, random, cold, 1 reader: 70 records/s, 1.40 device reads"));
  CHECK(found("the limits give 73 records/s (by reads): measured 95% of it"));
  CHECK(found("the limits give 1,034 records/s (by bytes): measured 94% of it"));
  CHECK(
      found("shard read in order gets 13.9x the records/s of loose files in random order; the "
            "limits imply 14.1x"));
  const std::string table = BenchReportTable(report);
  CHECK(table.find("emulated storage: hdd, 7,200 rpm SATA hard disk: 180 MB/s, 100 reads/s") !=
        std::string::npos);
  for (std::size_t begin = 0, end; begin < table.size(); begin = end + 1) {
    end = table.find('\n', begin);
    if (end == std::string::npos) end = table.size();
    CHECK_MESSAGE(end - begin <= 100, table.substr(begin, end - begin));
  }
  const std::string json = BenchReportJson(report);
  CHECK(json.find("\"emulated_storage\": {") != std::string::npos);
  CHECK(json.find("\"limited_by\": \"reads\"") != std::string::npos);
  // Off emulated storage none of it: no limits, no emulation findings.
  BenchReport plain = EmulatedReport();
  plain.emulated_storage.reset();
  AnalyzeBench(options, plain);
  CHECK_FALSE(plain.access[0].limits_seconds);
  CHECK(BenchReportJson(plain).find("\"emulated_storage\": null") != std::string::npos);
}

TEST_CASE("a windowed shuffle is advised on emulated storage only when a cold epoch gains 1.5x") {
  BenchOptions options;
  const auto with_epochs = [](double global, double windowed) {
    BenchReport report = EmulatedReport();
    for (const auto& [note, rate] :
         {std::pair{"shuffle global", global},
          std::pair{"shuffle windowed, 250 records a window", windowed}}) {
      StageMeasurement epoch;
      epoch.stage = "epoch cold";
      epoch.sweep = "shuffle";
      epoch.note = note;
      epoch.threads = 2;
      epoch.images_per_s = rate;
      report.stages.push_back(epoch);
    }
    return report;
  };
  const auto shuffle_advice = [](const BenchReport& report) {
    return std::find_if(report.advice.begin(), report.advice.end(),
                        [](const BenchAdvice& item) { return item.knob == "shuffle"; });
  };
  BenchReport clear = with_epochs(138, 257);
  AnalyzeBench(options, clear);
  const auto advised = shuffle_advice(clear);
  REQUIRE(advised != clear.advice.end());
  CHECK(advised->value == "windowed");
  CHECK(advised->set_with.find("packrec.Loader(shuffle='windowed'") == 0);
  CHECK(advised->expected_images_per_s == doctest::Approx(257));
  // The verdict rests on the cold epoch: data larger than memory comes off the device each time.
  const auto verdict =
      std::find_if(clear.advice.begin(), clear.advice.end(),
                   [](const BenchAdvice& item) { return item.knob == "consumer"; });
  REQUIRE(verdict != clear.advice.end());
  CHECK(verdict->value == "not fast enough");
  CHECK(verdict->expected_images_per_s == doctest::Approx(138));
  CHECK(verdict->why.find("an epoch from a cold cache on the emulated hdd") == 0);
  // A small dataset read around: 900 images from 30 device reads. Over data larger than memory
  // each image is a read of its own, and the hdd's 100 reads/s is the rate to expect.
  BenchReport read_around = with_epochs(900, 950);
  for (StageMeasurement& stage : read_around.stages) {
    if (stage.stage == "epoch cold") {
      stage.images = 900;
      stage.device_reads = DeviceReads{30, 30'000'000};
    }
  }
  AnalyzeBench(options, read_around);
  const auto small = std::find_if(read_around.advice.begin(), read_around.advice.end(),
                                  [](const BenchAdvice& item) { return item.knob == "consumer"; });
  REQUIRE(small != read_around.advice.end());
  CHECK(small->expected_images_per_s == doctest::Approx(100));
  CHECK(small->why.find("0.03 device reads an image") != std::string::npos);
  CHECK(small->why.find("about 100 images/s from this device") != std::string::npos);
  BenchReport close = with_epochs(138, 180);
  AnalyzeBench(options, close);
  CHECK(shuffle_advice(close) == close.advice.end());
}

TEST_CASE("data on overlay, NFS, 9p or FUSE is named with what it means for the figures") {
  BenchOptions options;
  for (const std::string type : {"overlay", "nfs4", "9p", "fuse.s3fs", "tmpfs"}) {
    CAPTURE(type);
    BenchReport report = ProbedReport();
    report.machine.data_filesystem = type;
    AnalyzeBench(options, report);
    CHECK(std::any_of(report.notes.begin(), report.notes.end(), [&](const std::string& note) {
      return note.rfind("the data is on " + type + ", ", 0) == 0;
    }));
  }
}

TEST_CASE("Reader::Locate gives each shard record's bytes in its file; other formats refuse") {
  TempDir dir;
  MakeTree(dir / "tree", 3);
  MakeDataset(dir / "tree", dir / "ds.pkr", "shard");
  MakeDataset(dir / "tree", dir / "ds.lmdb", "lmdb");
  auto shard = OpenDataset(dir / "ds.pkr");
  REQUIRE(shard.ok());
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < (*shard)->size(); ++i) {
    const auto where = (*shard)->Locate(i);
    REQUIRE(where.ok());
    CHECK_FALSE(where->compressed);
    const std::vector<std::byte> file = test::ReadBytes(where->file);
    REQUIRE(where->offset + where->stored_size <= file.size());
    const auto record = (*shard)->Read(i, scratch);
    REQUIRE(record.ok());
    CHECK(std::equal(record->bytes.begin(), record->bytes.end(),
                     file.begin() + static_cast<std::ptrdiff_t>(where->offset)));
    CHECK(record->bytes.size() == where->stored_size);
  }
  CHECK((*shard)->Locate((*shard)->size()).status().code() == StatusCode::kOutOfRange);
  auto lmdb = OpenDataset(dir / "ds.lmdb");
  REQUIRE(lmdb.ok());
  CHECK((*lmdb)->Locate(0).status().code() == StatusCode::kNotSupported);
}

}  // namespace
}  // namespace packrec
