// Two runs on one output: a second `convert` (plain, --resume, --overwrite, or the same --part)
// while the first still writes. The second is refused (exit 4, naming the live run) before it
// touches anything, and every run that reports success leaves a dataset that verifies.
// PACKREC_RACE_PAIRS sets the random pairs per kind and format (the stress label runs 25 x 4 x 3).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../formats/shard_test_util.h"
#include "core/output_dir.h"
#include "packrec/convert.h"
#include "packrec/dataset_ops.h"
#include "packrec/reader.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kClasses = 4;
constexpr std::uint32_t kPerClass = 90;

// What the second run adds to the first's command line.
struct Second {
  const char* name;
  std::vector<std::string> extra;  // after the first run's arguments
  bool part;                       // both runs convert part 1 of 4
};

const std::vector<Second>& Seconds() {
  static const std::vector<Second> seconds = {{"plain", {}, false},
                                              {"--resume", {"--resume"}, false},
                                              {"--overwrite", {"--overwrite"}, false},
                                              {"the same --part", {}, true}};
  return seconds;
}

struct Case {
  fs::path output;   // what the runs name as OUT
  fs::path written;  // the dataset the first run leaves (a part's file for --part)
  std::vector<std::string> args;
};

Case MakeCase(const fs::path& tree, const fs::path& run_dir, const std::string& format, bool part) {
  Case c;
  const std::string name = format == "hdf5" ? "out.h5" : "out";
  c.output = run_dir / (part ? "parts" : name);
  c.written = part ? c.output / PartName(1, 4, format) : c.output;
  c.args = {"convert",   "-q", tree.string(),  c.output.string(), "--format",           format,
            "--threads", "1",  "--shard-size", "64KiB",           "--checkpoint-every", "64KiB"};
  if (part) c.args.insert(c.args.end(), {"--part", "1/4"});
  return c;
}

std::uint64_t ExpectedRecords(bool part) {
  return part ? kClasses * kPerClass / 4 : kClasses * kPerClass;
}

class CountingReporter final : public VerifyReporter {
 public:
  void Report(const VerifyProblem&) override { ++problems; }
  int problems = 0;
};

// The dataset at `path` opens, verifies with no problem and holds `records`.
void CheckWhole(const fs::path& path, std::uint64_t records) {
  auto reader = OpenDataset(path);
  REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
  CHECK((*reader)->size() == records);
  CountingReporter reporter;
  const VerifyStats checked = VerifyDataset(**reader, VerifyOptions{}, reporter);
  CHECK(checked.problems == 0);
  CHECK(checked.records_checked == records);
}

std::string Text(const fs::path& path) {
  const std::vector<std::byte> bytes = test::ReadBytes(path);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Waits (polling) until `path` exists and is not empty (a lock file holds its run's pid once
// taken) or `pid` has exited; whether it is there.
bool AppearsWhileRunning(const fs::path& path, pid_t pid) {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  std::error_code error;
  while (Clock::now() < deadline) {
    if (fs::file_size(path, error) > 0 && !error) return true;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      return false;  // exited (not reaped: WNOWAIT)
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

// Calls `run` for every format and kind of second run, in a fresh, empty `dir`/run.
void ForEachCase(const test::TempDir& dir,
                 const std::function<void(const std::string& format, const Second& second,
                                          const fs::path& run_dir)>& run) {
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    for (const Second& second : Seconds()) {
      CAPTURE(format);
      CAPTURE(second.name);
      const fs::path run_dir = dir / "run";
      fs::remove_all(run_dir);
      fs::create_directories(run_dir);
      run(format, second, run_dir);
    }
  }
}

TEST_CASE("a second run on an output another run is writing is refused, naming that run") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", kClasses, kPerClass, /*seed=*/3, /*size=*/200);
  ForEachCase(dir, [&](const std::string& format, const Second& second, const fs::path& run_dir) {
    const Case c = MakeCase(dir / "tree", run_dir, format, second.part);
    // The first run is stopped while it holds the output (its lock file is there), so the
    // second surely meets it; a first run that finishes before that is tried again.
    pid_t first = -1;
    for (int attempt = 0; attempt < 5 && first < 0; ++attempt) {
      fs::remove_all(run_dir);
      fs::create_directories(run_dir);
      const pid_t pid = test::SpawnCli(c.args, run_dir / "first.log");
      if (AppearsWhileRunning(OutputLock::LockFilePath(c.written), pid) &&
          ::kill(pid, SIGSTOP) == 0) {
        int status = 0;
        // Stopped, not exited meanwhile (WUNTRACED reports the stop).
        if (::waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status)) {
          first = pid;
          break;
        }
        continue;  // it had exited: reaped by that waitpid
      }
      test::WaitForCli(pid);
    }
    REQUIRE_MESSAGE(first > 0, "the first run never held its output long enough to meet");
    const fs::path second_log = run_dir / "second.log";
    const int second_code =
        test::WaitForCli(test::SpawnCli(With(c.args, second.extra), second_log));
    ::kill(first, SIGCONT);
    const int first_code = test::WaitForCli(first);
    const std::string said = Text(second_log);
    CHECK_MESSAGE(second_code == 4, said);
    CHECK_MESSAGE(said.find("being written by another packrec run (pid " + std::to_string(first) +
                            ")") != std::string::npos,
                  said);
    REQUIRE_MESSAGE(first_code == 0, Text(run_dir / "first.log"));
    CheckWhole(c.written, ExpectedRecords(second.part));
    // The lock file goes with the run.
    CHECK_FALSE(fs::exists(OutputLock::LockFilePath(c.written)));
  });
}

int RacePairs() {
  const char* pairs = std::getenv("PACKREC_RACE_PAIRS");
  return pairs != nullptr ? std::max(1, std::atoi(pairs)) : 1;
}

TEST_CASE("two runs racing on one output: no run reports success for a broken dataset") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", kClasses, kPerClass, /*seed=*/5, /*size=*/200);
  std::mt19937_64 random(std::random_device{}());
  const std::uint64_t seed = random();
  CAPTURE(seed);
  random.seed(seed);
  int pairs = 0;
  int refused = 0;
  ForEachCase(dir, [&](const std::string& format, const Second& second, const fs::path& run_dir) {
    // How long one run takes, for delays that mostly land inside it.
    const Case timed = MakeCase(dir / "tree", run_dir, format, second.part);
    const Clock::time_point began = Clock::now();
    REQUIRE(test::WaitForCli(test::SpawnCli(timed.args)) == 0);
    const auto full = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - began);
    std::uniform_int_distribution<std::int64_t> when(0, full.count() * 7 / 10);
    for (int pair = 0; pair < RacePairs(); ++pair) {
      CAPTURE(pair);
      fs::remove_all(run_dir);
      fs::create_directories(run_dir);
      const Case c = MakeCase(dir / "tree", run_dir, format, second.part);
      const pid_t first = test::SpawnCli(c.args, run_dir / "first.log");
      std::this_thread::sleep_for(std::chrono::microseconds(when(random)));
      const pid_t other = test::SpawnCli(With(c.args, second.extra), run_dir / "second.log");
      const int codes[2] = {test::WaitForCli(first), test::WaitForCli(other)};
      const std::string said[2] = {Text(run_dir / "first.log"), Text(run_dir / "second.log")};
      ++pairs;
      int successes = 0;
      for (int run = 0; run < 2; ++run) {
        // Refused (another run holds it, or it already holds a dataset), or done; never a
        // crash, a corruption or a half-done success.
        CHECK_MESSAGE((codes[run] == 0 || codes[run] == 4), said[run]);
        successes += codes[run] == 0 ? 1 : 0;
        refused += codes[run] == 4 ? 1 : 0;
      }
      CHECK(successes >= 1);
      if (successes > 0) CheckWhole(c.written, ExpectedRecords(second.part));
      CHECK_FALSE(fs::exists(OutputLock::LockFilePath(c.written)));
    }
  });
  MESSAGE("pairs: " << pairs << ", runs refused: " << refused << ", broken successes: 0");
}

}  // namespace
}  // namespace packrec
