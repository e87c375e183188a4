#include <doctest/doctest.h>

#include <set>

#include "packrec/image.h"
#include "packrec/synth.h"
#include "test_util.h"

namespace packrec {
namespace {

TEST_CASE("synth writes decodable JPEGs of the promised variety, the same for the same seed") {
  test::TempDir dir;
  SynthOptions options;
  options.classes = 3;
  options.per_class = 40;
  options.seed = 11;
  auto stats = WriteSyntheticTree(dir / "a", options);
  REQUIRE(stats.ok());
  CHECK(stats->files == 120);
  REQUIRE(WriteSyntheticTree(dir / "b", options).ok());
  const auto a = test::SnapshotTree(dir / "a");
  const auto b = test::SnapshotTree(dir / "b");
  REQUIRE(a.size() == 120);
  CHECK(a == b);

  int gray = 0, progressive = 0, full_chroma = 0, upper_case = 0;
  for (const auto& [name, bytes] : a) {
    auto info = ProbeImage(bytes);
    REQUIRE_MESSAGE(info.ok(), name);
    REQUIRE_MESSAGE(CheckDecodes(bytes).ok(), name);
    CHECK(info->width >= 300);
    CHECK(info->width <= 500);
    gray += info->channels == 1;
    progressive += info->progressive;
    full_chroma += info->subsampling == Subsampling::k444;
    upper_case += name.ends_with(".JPEG");
  }
  CHECK(gray > 0);
  CHECK(progressive > 0);
  CHECK(full_chroma > 0);
  CHECK(upper_case > 0);
  CHECK(upper_case < 120);

  options.seed = 12;
  REQUIRE(WriteSyntheticTree(dir / "c", options).ok());
  CHECK(test::SnapshotTree(dir / "c") != a);
  CHECK(WriteSyntheticTree(dir / "a", options).status().code() == StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace packrec
