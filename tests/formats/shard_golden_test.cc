// Pins the shard format's bytes. tests/golden/shard-v1/ was written by this test with
// PACKREC_UPDATE_GOLDEN=1; any change to it is a format change: bump the version and update
// docs/formats/shard.md in the same commit.
#include <doctest/doctest.h>

#include <cstdlib>

#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::vector<test::TestRecord> GoldenRecords() {
  std::vector<test::TestRecord> records;
  for (std::uint32_t i = 0; i < 5; ++i) {
    std::vector<std::byte> bytes(700 + i * 300);
    for (std::size_t b = 0; b < bytes.size(); ++b) bytes[b] = static_cast<std::byte>(b * (i + 3));
    records.push_back(
        {"cls" + std::to_string(i % 2) + "/file-" + std::to_string(i) + ".jpg", i % 2, bytes});
  }
  return records;
}

void WriteGolden(const fs::path& dir) {
  WriterOptions options;
  options.shard_size_bytes = 4096;  // the minimum: with align 64 the five records need 2 shards
  options.shard.align_bytes = 64;
  auto writer = CreateDatasetWriter(dir, options);
  REQUIRE(writer.ok());
  std::uint32_t i = 0;
  for (const auto& record : GoldenRecords()) {
    ImageInfo image;
    image.encoding = Encoding::kJpeg;
    image.width = 640 + i;
    image.height = 480 + i;
    image.channels = 3;
    image.subsampling = Subsampling::k420;
    image.progressive = i == 3;
    REQUIRE((*writer)->Add({record.key, record.label, record.bytes, image}).ok());
    ++i;
  }
  DatasetMetadata metadata;
  metadata.classes = {"cls0", "cls1"};
  metadata.listing_hash = "00112233445566ff";
  metadata.source_kind = "api";
  metadata.options_json = R"({"golden":true})";
  REQUIRE((*writer)->Finish(metadata).ok());
}

const fs::path kGoldenDir = fs::path(PACKREC_GOLDEN_DIR) / "shard-v1";

TEST_CASE("golden: today's writer produces the pinned shard bytes") {
  if (std::getenv("PACKREC_UPDATE_GOLDEN") != nullptr) {
    fs::remove_all(kGoldenDir);
    WriteGolden(kGoldenDir);
  }
  test::TempDir dir;
  WriteGolden(dir / "ds");
  const auto fresh = test::SnapshotTree(dir / "ds");
  const auto pinned = test::SnapshotTree(kGoldenDir);
  REQUIRE(fresh.size() == pinned.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    CAPTURE(fresh[i].first);
    CHECK(fresh[i].first == pinned[i].first);
    if (fresh[i].first == "manifest.json") continue;  // carries the packrec version; see below
    CHECK(fresh[i].second == pinned[i].second);
  }
}

TEST_CASE("golden: the pinned dataset reads back with today's reader") {
  auto reader = OpenDataset(kGoldenDir);
  REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
  const auto records = GoldenRecords();
  REQUIRE((*reader)->size() == records.size());
  CHECK((*reader)->info().files.size() == 2);
  CHECK((*reader)->info().classes == std::vector<std::string>{"cls0", "cls1"});
  CHECK((*reader)->info().listing_hash == "00112233445566ff");
  ReadScratch scratch;
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto view = (*reader)->Read(i, scratch);
    REQUIRE(view.ok());
    CHECK(view->key == records[i].key);
    CHECK(view->label == records[i].label);
    CHECK(test::Copy(view->bytes) == records[i].bytes);
    CHECK(view->width == 640 + i);
    CHECK(view->height == 480 + i);
  }
  test::CollectingReporter reporter;
  CHECK((*reader)->Verify(reporter).problems == 0);
}

}  // namespace
}  // namespace packrec
