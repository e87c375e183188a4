// `packrec convert` killed with SIGKILL at random points, then run again with --resume (itself
// killed at random points too): the result equals an uninterrupted conversion record for record
// (shards: byte for byte), with the same rejects, nothing temporary left, and it verifies.
// PACKREC_KILL_RUNS sets the kill points per format (the stress label runs 70 x 3).
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../formats/shard_test_util.h"
#include "packrec/dataset_ops.h"
#include "packrec/reader.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Outcome {
  bool killed = false;  // the signal landed before the process finished
  int exit_code = -1;
};

// Starts the CLI with `args`, sends SIGKILL after `delay`, and reaps it.
Outcome RunAndKill(const std::vector<std::string>& args, std::chrono::microseconds delay) {
  const pid_t pid = test::SpawnCli(args);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  const int code = test::WaitForCli(pid);
  Outcome outcome;
  outcome.killed = code == 128 + SIGKILL;
  if (code < 128) outcome.exit_code = code;
  return outcome;
}

std::string ReadTextOrEmpty(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return "";
  const std::vector<std::byte> bytes = test::ReadBytes(path);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Every file at `path` (a dataset directory, or an HDF5 file and its siblings in `parent`).
std::vector<std::string> LeftoverNames(const fs::path& parent) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(parent)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".tmp") || name == "resume.json" || name.ends_with(".resume.json") ||
        name.ends_with(".partial") || name.ends_with(".packrec-staging") || name == "lock.mdb") {
      names.push_back(entry.path().string());
    }
  }
  return names;
}

class CountingReporter final : public VerifyReporter {
 public:
  void Report(const VerifyProblem&) override { ++problems; }
  int problems = 0;
};

int KillRuns() {
  const char* runs = std::getenv("PACKREC_KILL_RUNS");
  return runs != nullptr ? std::max(1, std::atoi(runs)) : 4;
}

TEST_CASE("convert killed with SIGKILL at random points resumes to the uninterrupted result") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 4, 120, /*seed=*/7, /*size=*/240);
  test::WriteText(dir / "tree" / "n01440764" / "not-an-image.JPEG", "this is not a JPEG");
  std::mt19937_64 random(std::random_device{}());
  const std::uint64_t seed = random();
  CAPTURE(seed);
  random.seed(seed);
  int interrupted = 0;
  int resumed_after_kill = 0;
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    const std::string name = format == "hdf5" ? "out.h5" : "out";
    const std::vector<std::string> convert = {"convert",
                                              "-q",
                                              (dir / "tree").string(),
                                              "",  // OUT, per run
                                              "--format",
                                              format,
                                              "--shard-size",
                                              "192KiB",
                                              "--checkpoint-every",
                                              "192KiB",
                                              "--on-error",
                                              "skip",
                                              "--threads",
                                              "2"};
    const auto with_output = [&](const fs::path& output, bool resume) {
      std::vector<std::string> args = convert;
      args[3] = output.string();
      if (resume) args.push_back("--resume");
      return args;
    };
    const fs::path reference_dir = dir / ("reference-" + format);
    fs::create_directories(reference_dir);
    const Clock::time_point began = Clock::now();
    std::string quoted;
    for (const std::string& arg : with_output(reference_dir / name, false)) {
      quoted += test::Quote(arg) + " ";
    }
    const test::CommandResult reference_run = test::RunCli(quoted);
    REQUIRE_MESSAGE(reference_run.exit_code == 0, reference_run.output);
    const auto full = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - began);
    auto reference = OpenDataset(reference_dir / name);
    REQUIRE(reference.ok());
    const std::string reference_rejects =
        ReadTextOrEmpty(RejectsFilePath(reference_dir / name, format));
    REQUIRE(reference_rejects.find("not-an-image.JPEG") != std::string::npos);

    for (int run = 0; run < KillRuns(); ++run) {
      CAPTURE(run);
      const fs::path run_dir = dir / ("run-" + format);
      fs::remove_all(run_dir);
      fs::create_directories(run_dir);
      const fs::path output = run_dir / name;
      // The reference's wall time includes the shell popen adds: most kills land inside a run.
      std::uniform_int_distribution<std::int64_t> when(0, full.count() * 6 / 10);
      Outcome outcome =
          RunAndKill(with_output(output, false), std::chrono::microseconds(when(random)));
      interrupted += outcome.killed ? 1 : 0;
      // The resume may be killed too, at most twice, before it is let finish.
      for (int again = 0; again < 2 && outcome.killed && random() % 2 == 0; ++again) {
        outcome = RunAndKill(with_output(output, true), std::chrono::microseconds(when(random)));
        interrupted += outcome.killed ? 1 : 0;
      }
      if (outcome.killed) {
        ++resumed_after_kill;
        std::string resume_args;
        for (const std::string& arg : with_output(output, true))
          resume_args += test::Quote(arg) + " ";
        const test::CommandResult resumed = test::RunCli(resume_args);
        REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
      } else {
        REQUIRE(outcome.exit_code == 0);
      }
      auto result = OpenDataset(output);
      REQUIRE_MESSAGE(result.ok(), result.status().ToString());
      test::CheckSameRecords(**reference, **result);
      CHECK((*result)->info().listing_hash == (*reference)->info().listing_hash);
      CHECK(ReadTextOrEmpty(RejectsFilePath(output, format)) == reference_rejects);
      CHECK(LeftoverNames(run_dir).empty());
      VerifyOptions verify;
      CountingReporter reporter;
      const VerifyStats checked = VerifyDataset(**result, verify, reporter);
      CHECK(checked.problems == 0);
      CHECK(checked.records_checked == (*reference)->size());
      if (format == "shard") {
        // Shards are deterministic: every file equals the uninterrupted run's.
        for (const fs::directory_entry& entry : fs::directory_iterator(reference_dir / name)) {
          CHECK(test::ReadBytes(entry.path()) == test::ReadBytes(output / entry.path().filename()));
        }
      }
    }
  }
  MESSAGE("kill points: " << interrupted << " interrupted a run; " << resumed_after_kill
                          << " conversions finished by --resume; records lost: 0");
  CHECK(interrupted > 0);
}

// An export has no resume point: it is staged beside OUT, so a killed one leaves OUT as it was
// (absent here), or, into an empty OUT, written in place under a marker; either way the same
// command run again removes what it left and writes it whole.
TEST_CASE("an export killed with SIGKILL is written whole by the same command run again") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 4, 120, /*seed=*/7, /*size=*/240);
  std::mt19937_64 random(std::random_device{}());
  const std::uint64_t seed = random();
  CAPTURE(seed);
  random.seed(seed);
  int interrupted = 0;
  for (const std::string format : {"wds", "tfrecord", "recordio"}) {
    CAPTURE(format);
    const auto args = [&](const fs::path& output) {
      return std::vector<std::string>{"convert",   "-q",   (dir / "tree").string(), output.string(),
                                      "--format",  format, "--shard-size",          "192KiB",
                                      "--threads", "2"};
    };
    const auto quoted = [](const std::vector<std::string>& all) {
      std::string line;
      for (const std::string& arg : all) line += test::Quote(arg) + " ";
      return line;
    };
    const fs::path reference = dir / ("reference-" + format);
    const Clock::time_point began = Clock::now();
    const test::CommandResult reference_run = test::RunCli(quoted(args(reference)));
    REQUIRE_MESSAGE(reference_run.exit_code == 0, reference_run.output);
    const auto full = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - began);
    std::uniform_int_distribution<std::int64_t> when(0, full.count() * 6 / 10);
    for (int run = 0; run < KillRuns(); ++run) {
      CAPTURE(run);
      const fs::path run_dir = dir / ("run-" + format);
      fs::remove_all(run_dir);
      fs::create_directories(run_dir);
      const fs::path output = run_dir / "out";
      // Every other run into an OUT made empty beforehand (a mount point, say): written in place.
      const bool in_place = run % 2 == 1;
      if (in_place) fs::create_directories(output);
      const Outcome outcome = RunAndKill(args(output), std::chrono::microseconds(when(random)));
      // Not finished: no manifest (staged: no OUT at all), or still under the in-place marker.
      const bool unfinished =
          !fs::exists(output / "packrec-export.json") || fs::exists(output / ".packrec-writing");
      CHECK(fs::exists(output) == (in_place || !unfinished));
      if (outcome.killed && unfinished) {
        ++interrupted;
        const test::CommandResult again = test::RunCli(quoted(args(output)));
        REQUIRE_MESSAGE(again.exit_code == 0, again.output);
      } else if (!outcome.killed) {
        REQUIRE(outcome.exit_code == 0);
      }  // else killed once the export was whole: checked below
      // Exports are deterministic: every file equals the uninterrupted run's.
      const auto expected = test::SnapshotTree(reference);
      CHECK(test::SnapshotTree(output) == expected);
      CHECK(LeftoverNames(run_dir).empty());
      CHECK_FALSE(fs::exists(run_dir / "out.packrec-staging"));
    }
  }
  MESSAGE("export kill points: " << interrupted << " left an unfinished export, run again");
  CHECK(interrupted > 0);
}

TEST_CASE(
    "--resume: refusals, nothing to resume, a finished conversion, and the journal's checks") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 20, /*seed=*/9, /*size=*/160);
  const std::string tree = test::Quote(dir / "tree");
  const auto run = [&](const std::string& args) { return test::RunCli("convert -q " + args); };
  // Nothing to resume: a plain conversion. Again: finished, nothing to do.
  const std::string shard = tree + " " + test::Quote(dir / "a") + " --shard-size 64KiB";
  REQUIRE(run(shard + " --resume").exit_code == 0);
  const test::CommandResult again = test::RunCli("convert " + shard + " --resume");
  CHECK(again.exit_code == 0);
  CHECK_MESSAGE(again.output.find("already complete") != std::string::npos, again.output);
  // Flags that cannot go together, and formats and sources it does not apply to: exit 2.
  for (const std::string& args :
       {shard + " --resume --overwrite",
        tree + " " + test::Quote(dir / "w") + " --format wds --resume",
        test::Quote(dir / "a") + " " + test::Quote(dir / "b") + " --resume"}) {
    CAPTURE(args);
    const test::CommandResult refused = run(args);
    CHECK(refused.exit_code == 2);
    CHECK_MESSAGE(refused.output.find("--resume") != std::string::npos, refused.output);
  }
  // An interrupted conversion (its journal kept, as a kill leaves it): a plain run refuses to
  // touch it, another listing or other options are refused by --resume, naming the difference.
  const fs::path interrupted = dir / "i";
  const std::string args = tree + " " + test::Quote(interrupted) + " --shard-size 64KiB";
  // Killed once its journal holds a sealed shard (a kill too early leaves no resume point; too
  // late, a finished dataset): --threads 1 keeps it slow enough, and the delay is searched for.
  const auto holds_records = [&] {
    const std::string journal = ReadTextOrEmpty(interrupted / "resume.json");
    return !journal.empty() && journal.find("\"records\": 0") == std::string::npos;
  };
  bool interrupted_with_records = false;
  for (int delay_us = 5000; delay_us < 4000000 && !interrupted_with_records;
       delay_us = delay_us * 3 / 2) {
    fs::remove_all(interrupted);
    const Outcome outcome =
        RunAndKill({"convert", "-q", (dir / "tree").string(), interrupted.string(), "--shard-size",
                    "64KiB", "--threads", "1"},
                   std::chrono::microseconds(delay_us));
    interrupted_with_records = outcome.killed && holds_records();
  }
  if (!interrupted_with_records) {
    MESSAGE("skipped the interrupted-conversion checks: no kill landed after a sealed shard");
    return;
  }
  const test::CommandResult plain = run(args);
  CHECK(plain.exit_code == 4);
  CHECK_MESSAGE(plain.output.find("pass --resume") != std::string::npos, plain.output);
  const test::CommandResult other_options = run(args + " --resume --align 4096");
  CHECK(other_options.exit_code == 4);
  CHECK_MESSAGE(other_options.output.find("other options") != std::string::npos,
                other_options.output);
  const test::CommandResult other_format = run(args + " --resume --format lmdb");
  CHECK(other_format.exit_code == 2);
  // It names the format the interrupted run wrote (the library's words, not a flag: Python
  // users read the same message) and the CLI's advice for starting again.
  CHECK_MESSAGE(other_format.output.find("resume it in the shard format") != std::string::npos,
                other_format.output);
  CHECK_MESSAGE(other_format.output.find("pass --overwrite to start again") != std::string::npos,
                other_format.output);
  test::WriteText(dir / "tree" / "n01440764" / "added.JPEG", "a new input changes the listing");
  const test::CommandResult other_listing = run(args + " --resume");
  CHECK(other_listing.exit_code == 4);
  CHECK_MESSAGE(other_listing.output.find("another listing") != std::string::npos,
                other_listing.output);
  fs::remove(dir / "tree" / "n01440764" / "added.JPEG");
  // A journal that does not parse is Corrupt, and the files are left alone.
  test::WriteText(interrupted / "resume.json", "{not json");
  const test::CommandResult damaged = run(args + " --resume");
  CHECK(damaged.exit_code == 5);
  CHECK(fs::exists(interrupted / "resume.json"));
  // --overwrite starts it again.
  CHECK(run(args + " --overwrite").exit_code == 0);
  CHECK_FALSE(fs::exists(interrupted / "resume.json"));
}

}  // namespace
}  // namespace packrec
