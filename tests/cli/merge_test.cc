// Partitioned conversion and merge on real trees: parts written by concurrent processes (and
// threads), merged, equal to one conversion record for record (shards byte for byte); a part
// killed with SIGKILL and re-run; parts that do not belong together refused by name.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "formats/shard_test_util.h"
#include "packrec/convert.h"
#include "packrec/loader.h"
#include "packrec/merge.h"
#include "packrec/synth.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

ConvertOptions Options(const fs::path& source, const fs::path& output, const std::string& format) {
  ConvertOptions options;
  options.source = source;
  options.output = output;
  options.threads = 1;
  options.writer.format = format;
  options.writer.shard_size_bytes = 64 << 10;  // several shards per part
  return options;
}

// Every record (key, label, bytes) and the manifest facts of two datasets agree.
void CheckSameRecords(const fs::path& a_path, const fs::path& b_path) {
  auto a = test::OpenShared(a_path);
  auto b = test::OpenShared(b_path);
  REQUIRE(a->size() == b->size());
  CHECK(a->info().listing_hash == b->info().listing_hash);
  CHECK(a->info().classes == b->info().classes);
  CHECK(a->info().rejected_count == b->info().rejected_count);
  CHECK(a->info().options_json == b->info().options_json);
  CHECK(DatasetFingerprint(a->info()) == DatasetFingerprint(b->info()));
  test::CheckSameRecords(*a, *b);
}

int Shell(const std::string& script) { return std::system(("set -e; " + script).c_str()); }

TEST_CASE("4 parts converted by 4 concurrent processes, merged: the single conversion") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 6, 40, 1, 64);
  // An input that is not an image, rejected with --on-error skip inside one part.
  std::ofstream(dir / "tree" / "n01440764" / "broken.jpg") << "not an image";
  const std::string cli = PACKREC_CLI_PATH;
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    const std::string common =
        " --format " + format +
        " --shard-size 64KiB --shuffle --seed 3 --on-error skip -q --threads 1";
    const fs::path single = dir / ("single-" + format);
    const fs::path parts = dir / ("parts-" + format);
    REQUIRE(Shell(cli + " convert " + test::Quote(dir / "tree") + " " + test::Quote(single) +
                  common + " >/dev/null") == 0);
    REQUIRE(Shell("pids=; for i in 0 1 2 3; do " + cli + " convert " + test::Quote(dir / "tree") +
                  " " + test::Quote(parts) + " --part $i/4" + common +
                  " >/dev/null & pids=\"$pids $!\"; done; for p in $pids; do wait $p; done") == 0);
    const fs::path merged = dir / ("merged-" + format);
    auto stats = MergeParts({parts}, merged, {});
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
    CHECK(stats->parts == 4);
    CHECK(stats->rejected == 1);
    CheckSameRecords(single, merged);
    if (format == "shard") {  // byte for byte, manifest included
      CHECK(test::SnapshotTree(single) == test::SnapshotTree(merged));
    }
  }
}

TEST_CASE("a part killed with SIGKILL is re-run; finished parts are left alone") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 4, 150, 1, 160);
  const std::string tree = test::Quote(dir / "tree");
  const fs::path parts = dir / "parts";
  const std::string cli = PACKREC_CLI_PATH;
  const std::string common = " --shard-size 64KiB -q --threads 1";
  REQUIRE(Shell(cli + " convert " + tree + " " + test::Quote(dir / "single") + common +
                " >/dev/null") == 0);
  REQUIRE(Shell(cli + " convert " + tree + " " + test::Quote(parts) + " --part 0/2" + common +
                " >/dev/null") == 0);
  const fs::path part1 = parts / PartName(1, 2, "shard");
  const fs::path partial = part1.string() + ".partial";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execl(PACKREC_CLI_PATH, PACKREC_CLI_PATH, "convert", (dir / "tree").c_str(), parts.c_str(),
            "--part", "1/2", "--shard-size", "64KiB", "-q", "--threads", "1",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Killed once its first shard is sealed: mid-conversion, with files on disk.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool killed = false;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code error;
    if (fs::exists(partial / "shard-000000.pkr", error)) {
      ::kill(child, SIGKILL);
      killed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(killed);
  REQUIRE(WIFSIGNALED(status));
  CHECK(fs::exists(partial));
  CHECK_FALSE(fs::exists(part1));
  // Merging now refuses: part 1 is missing.
  auto early = MergeParts({parts}, dir / "merged", {});
  REQUIRE_FALSE(early.ok());
  CHECK(early.status().message().find("part 1 of 2 is missing") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "merged"));

  const auto part0 = test::SnapshotTree(parts / PartName(0, 2, "shard"));
  auto rerun = test::RunCli("convert " + tree + " " + test::Quote(parts) + " --part 1/2" + common);
  REQUIRE_MESSAGE(rerun.exit_code == 0, rerun.output);
  CHECK_FALSE(fs::exists(partial));
  auto again = test::RunCli("convert " + tree + " " + test::Quote(parts) + " --part 0/2" + common);
  REQUIRE(again.exit_code == 0);
  CHECK(again.output.find("already complete") != std::string::npos);
  CHECK(test::SnapshotTree(parts / PartName(0, 2, "shard")) == part0);  // untouched

  auto merged = test::RunCli("merge " + test::Quote(dir / "merged") + " " + test::Quote(parts) +
                             " --remove-parts");
  REQUIRE_MESSAGE(merged.exit_code == 0, merged.output);
  CHECK(test::SnapshotTree(dir / "single") == test::SnapshotTree(dir / "merged"));
  CHECK(fs::is_empty(parts));
}

TEST_CASE("merge refuses parts that are not one conversion, naming the part and the difference") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 10, 1, 64);
  test::SynthTree(dir / "other", 3, 11, 1, 64);
  const auto convert = [&](const fs::path& tree, const fs::path& out, std::uint32_t index,
                           std::uint32_t count, std::uint64_t shard_size = 64 << 10) {
    ConvertOptions options = Options(tree, out, "shard");
    options.part_index = index;
    options.part_count = count;
    options.writer.shard_size_bytes = shard_size;
    auto stats = Convert(options);
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
    return stats->part_path;
  };
  const fs::path p0 = convert(dir / "tree", dir / "a", 0, 3);
  const fs::path p1 = convert(dir / "tree", dir / "a", 1, 3);
  const fs::path p2 = convert(dir / "tree", dir / "a", 2, 3);
  const auto refused = [&](const std::vector<fs::path>& parts, const std::string& says) {
    auto stats = MergeParts(parts, dir / "merged", {});
    REQUIRE_FALSE(stats.ok());
    CHECK_MESSAGE(stats.status().message().find(says) != std::string::npos,
                  stats.status().message());
    CHECK_FALSE(fs::exists(dir / "merged"));  // nothing written
  };
  refused({p0, p2}, "part 1 of 3 is missing");
  refused({p0, p1}, "part 2 of 3 is missing");
  refused({p0, p1, p1, p2}, "given twice");
  refused({p0, p1, convert(dir / "other", dir / "b", 2, 3)}, "input listings");
  refused({p0, p1, convert(dir / "tree", dir / "c", 2, 3, 128 << 10)}, "convert options");
  refused({p0, p1, convert(dir / "tree", dir / "d", 2, 4)}, "part counts");
  {
    ConvertOptions whole = Options(dir / "tree", dir / "whole", "shard");
    REQUIRE(Convert(whole).ok());
  }
  refused({p0, p1, dir / "whole"}, "not a part");
  CHECK(MergeParts({p2, p0, p1}, dir / "merged", {}).ok());  // any order

  // Re-running a part at a path that holds that part of another conversion is refused.
  ConvertOptions clash = Options(dir / "other", dir / "a", "shard");
  clash.part_index = 1;
  clash.part_count = 3;
  auto stats = Convert(clash);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().code() == StatusCode::kAlreadyExists);
  // Bad part numbers.
  clash.part_index = 3;
  CHECK(Convert(clash).status().message().find("numbered 0 to 2") != std::string::npos);
  clash.part_index = 0;
  clash.part_count = 40;  // 33 inputs
  CHECK(Convert(clash).status().message().find("cannot fill") != std::string::npos);
  auto bad_flag = test::RunCli("convert " + test::Quote(dir / "tree") + " " +
                               test::Quote(dir / "e") + " --part 4/4");
  CHECK(bad_flag.exit_code == 2);
  CHECK(bad_flag.output.find("I/N") != std::string::npos);
}

TEST_CASE(
    "parts converted concurrently by threads merge into the single conversion, every format") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 5, 24, 1, 64);
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    ConvertOptions single = Options(dir / "tree", dir / ("single-" + format), format);
    REQUIRE(Convert(single).ok());
    std::vector<std::thread> threads;
    std::vector<Status> results(3);
    for (std::uint32_t i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        ConvertOptions part = Options(dir / "tree", dir / ("parts-" + format), format);
        part.part_index = i;
        part.part_count = 3;
        results[i] = Convert(part).status();
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const Status& status : results) REQUIRE_MESSAGE(status.ok(), status.ToString());
    REQUIRE(MergeParts({dir / ("parts-" + format)}, dir / ("merged-" + format), {}).ok());
    CheckSameRecords(dir / ("single-" + format), dir / ("merged-" + format));
  }
}

TEST_CASE("merge in place: the directory of parts becomes the dataset (not for HDF5)") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 16, 1, 64);
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    ConvertOptions single = Options(dir / "tree", dir / ("single-" + format), format);
    REQUIRE(Convert(single).ok());
    const fs::path parts = dir / ("in-place-" + format);
    for (std::uint32_t i = 0; i < 2; ++i) {
      ConvertOptions part = Options(dir / "tree", parts, format);
      part.part_index = i;
      part.part_count = 2;
      REQUIRE(Convert(part).ok());
    }
    auto merged = test::RunCli("merge " + test::Quote(parts));
    if (format == "hdf5") {
      CHECK(merged.exit_code == 2);
      CHECK(merged.output.find("one file") != std::string::npos);
      CHECK(fs::exists(parts / PartName(0, 2, format)));  // the parts are untouched
      continue;
    }
    REQUIRE_MESSAGE(merged.exit_code == 0, merged.output);
    CHECK_FALSE(fs::exists(parts / PartName(0, 2, format)));
    CHECK_FALSE(fs::exists(parts.string() + ".packrec-merging"));
    CheckSameRecords(dir / ("single-" + format), parts);
  }
}

}  // namespace
}  // namespace packrec
