// A full disk during convert: a clear error naming the path, and nothing left behind. Uses a real
// 1 MiB tmpfs; skipped (with a message) where the test may not mount one (not root).
#include <doctest/doctest.h>

#include "packrec/convert.h"
#include "packrec/synth.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

TEST_CASE("disk full during convert: IOError names the file, exit code 6, no partial output") {
  test::TempDir dir;
  SynthOptions synth;
  synth.classes = 2;
  synth.per_class = 40;  // about 2 MiB, twice the tmpfs
  REQUIRE(WriteSyntheticTree(dir / "tree", synth).ok());
  const fs::path mount_point = dir / "small";
  test::ScopedTmpfs tmpfs(mount_point, "1m");
  if (!tmpfs.mounted()) {
    MESSAGE("skipped: cannot mount a tmpfs here (needs root)");
    return;
  }
  ConvertOptions options;
  options.source = dir / "tree";
  options.output = mount_point / "ds";
  auto result = Convert(options);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kIOError);
  CHECK(result.status().message().find("No space left on device") != std::string::npos);
  CHECK(result.status().message().find("shard-000000.pkr") != std::string::npos);
  CHECK_FALSE(fs::exists(mount_point / "ds"));

  auto cli = test::RunCli("convert -q " + test::Quote(dir / "tree") + " " +
                          test::Quote(mount_point / "ds2"));
  CHECK(cli.exit_code == 6);
  CHECK(cli.output.find("No space left on device") != std::string::npos);
  CHECK_FALSE(fs::exists(mount_point / "ds2"));
}

}  // namespace
}  // namespace packrec
