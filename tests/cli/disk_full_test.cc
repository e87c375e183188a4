// A full disk or an unwritable output during convert, for every format and export: a clear error
// naming the path, and nothing left behind but the records up to the last resume point, which
// --resume continues from once there is space. Uses real tmpfs mounts; skipped (with a message)
// where the test may not mount one (not root).
#include <doctest/doctest.h>

#include <cstdlib>
#include <iterator>
#include <vector>

#include "../formats/shard_test_util.h"
#include "packrec/convert.h"
#include "packrec/reader.h"
#include "packrec/synth.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

struct FormatCase {
  std::string format;
  std::string output;     // under the mount point
  std::string data_file;  // the error names it
};

const FormatCase kCases[] = {
    {"shard", "ds", "shard-000000.pkr"},
    {"lmdb", "ds", "data.mdb"},
    {"hdf5", "ds.h5", "ds.h5"},
};
// The export formats (docs/interop.md) have no resume point: a failed export leaves nothing.
const FormatCase kExportCases[] = {
    {"wds", "out", "shard-000000.tar"},
    {"tfrecord", "out", "shard-000000.tfrecord"},
    {"recordio", "out", "shard-000000.rec"},
};

std::vector<FormatCase> DatasetAndExportCases() {
  std::vector<FormatCase> cases(std::begin(kCases), std::end(kCases));
  cases.insert(cases.end(), std::begin(kExportCases), std::end(kExportCases));
  return cases;
}

bool NothingLeft(const fs::path& mount_point) { return fs::is_empty(mount_point); }

TEST_CASE("disk full during convert: IOError names the file, exit code 6, no partial output") {
  test::TempDir dir;
  SynthOptions synth;
  synth.classes = 2;
  synth.per_class = 40;  // about 2 MiB, twice the tmpfs
  REQUIRE(WriteSyntheticTree(dir / "tree", synth).ok());
  for (const FormatCase& format : DatasetAndExportCases()) {
    CAPTURE(format.format);
    const fs::path mount_point = dir / ("small-" + format.format);
    test::ScopedTmpfs tmpfs(mount_point, "1m");
    if (!tmpfs.mounted()) {
      MESSAGE("skipped: cannot mount a tmpfs here (needs root)");
      return;
    }
    ConvertOptions options;
    options.source = dir / "tree";
    options.output = mount_point / format.output;
    options.writer.format = format.format;
    auto result = Convert(options);
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == StatusCode::kIOError);
    CHECK_MESSAGE(result.status().message().find("No space left on device") != std::string::npos,
                  result.status().ToString());
    CHECK_MESSAGE(result.status().message().find(format.data_file) != std::string::npos,
                  result.status().ToString());
    CHECK(NothingLeft(mount_point));

    auto cli =
        test::RunCli("convert -q --format " + format.format + " " + test::Quote(dir / "tree") +
                     " " + test::Quote(mount_point / ("2" + format.output)));
    CHECK(cli.exit_code == 6);
    CHECK(cli.output.find("No space left on device") != std::string::npos);
    CHECK(NothingLeft(mount_point));
  }
}

TEST_CASE("disk full: the sealed part is kept, and --resume after freeing space completes it") {
  test::TempDir dir;
  SynthOptions synth;
  synth.classes = 2;
  synth.per_class = 40;  // about 2 MiB
  REQUIRE(WriteSyntheticTree(dir / "tree", synth).ok());
  const std::string flags = " --shard-size 128KiB --checkpoint-every 128KiB ";
  for (const FormatCase& format : kCases) {
    CAPTURE(format.format);
    const fs::path reference = dir / ("reference-" + format.output + "-" + format.format);
    REQUIRE(test::RunCli("convert -q --format " + format.format + flags +
                         test::Quote(dir / "tree") + " " + test::Quote(reference))
                .exit_code == 0);
    const fs::path mount_point = dir / ("small-" + format.format);
    test::ScopedTmpfs tmpfs(mount_point, "1m");
    if (!tmpfs.mounted()) {
      MESSAGE("skipped: cannot mount a tmpfs here (needs root)");
      return;
    }
    const fs::path output = mount_point / format.output;
    const std::string command = "convert -q --format " + format.format + flags +
                                test::Quote(dir / "tree") + " " + test::Quote(output);
    const test::CommandResult full = test::RunCli(command);
    CHECK(full.exit_code == 6);
    CHECK_MESSAGE(full.output.find("No space left on device") != std::string::npos, full.output);
    if (format.format == "hdf5") {
      // Its resume point is the start: nothing is kept.
      CHECK(NothingLeft(mount_point));
    } else {
      CHECK_MESSAGE(full.output.find("records are kept") != std::string::npos, full.output);
      CHECK(fs::exists(output / "resume.json"));
      CHECK_FALSE(fs::exists(output / "manifest.json"));
      for (const fs::directory_entry& entry : fs::directory_iterator(output)) {
        CHECK_MESSAGE(!entry.path().string().ends_with(".tmp"), entry.path().string());
      }
      // Without --resume the interrupted conversion is not touched.
      const test::CommandResult plain = test::RunCli(command);
      CHECK(plain.exit_code == 4);
      CHECK_MESSAGE(plain.output.find("--resume") != std::string::npos, plain.output);
    }
    REQUIRE(std::system(("mount -o remount,size=16m " + test::Quote(mount_point)).c_str()) == 0);
    const test::CommandResult resumed = test::RunCli(command + " --resume");
    REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
    auto a = OpenDataset(reference);
    auto b = OpenDataset(output);
    REQUIRE((a.ok() && b.ok()));
    test::CheckSameRecords(**a, **b);
    CHECK_FALSE(fs::exists(output / "resume.json"));
  }
}

TEST_CASE("output on a read-only file system: IOError names the path, exit code 6") {
  test::TempDir dir;
  SynthOptions synth;
  synth.classes = 2;
  synth.per_class = 3;
  REQUIRE(WriteSyntheticTree(dir / "tree", synth).ok());
  const fs::path mount_point = dir / "readonly";
  test::ScopedTmpfs tmpfs(mount_point, "1m");
  if (!tmpfs.mounted() || !tmpfs.RemountReadOnly()) {
    MESSAGE("skipped: cannot mount a read-only tmpfs here (needs root)");
    return;
  }
  for (const FormatCase& format : DatasetAndExportCases()) {
    CAPTURE(format.format);
    auto cli =
        test::RunCli("convert -q --format " + format.format + " " + test::Quote(dir / "tree") +
                     " " + test::Quote(mount_point / format.output));
    CHECK(cli.exit_code == 6);
    CHECK_MESSAGE(cli.output.find("Read-only file system") != std::string::npos, cli.output);
    CHECK_MESSAGE(cli.output.find((mount_point / format.output).string()) != std::string::npos,
                  cli.output);
    CHECK(NothingLeft(mount_point));
  }
}

}  // namespace
}  // namespace packrec
