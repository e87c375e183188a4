// Pins the shard format's bytes. tests/golden/shard-v1/ (no fields), shard-v2/ (the same
// records with four fields) and shard-v3/ (shard-v1 with record 2 marked WebP: version-1 shard
// files, a version-3 manifest) were written by this test with PACKREC_UPDATE_GOLDEN=1; any change
// to it is a format change: bump the version and update docs/formats/shard.md in the same commit.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>

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

std::vector<FieldSpec> GoldenSchema() {
  return {{"caption", FieldType::kText, "txt", {}},
          {"meta", FieldType::kJson, "json", {}},
          {"boxes", FieldType::kFloat32, "", {4}},
          {"ids", FieldType::kInt64, "", {}}};
}

// Record i's field values: every field, except that record 1 has no boxes.
std::vector<std::vector<std::byte>> GoldenFieldValues(std::uint32_t i) {
  const auto bytes_of = [](const std::string& text) {
    const auto* begin = reinterpret_cast<const std::byte*>(text.data());
    return std::vector<std::byte>(begin, begin + text.size());
  };
  std::vector<std::byte> boxes(8 * sizeof(float));
  for (std::size_t k = 0; k < 8; ++k) {
    const float value = static_cast<float>(i * 10 + k) + 0.5f;
    std::memcpy(boxes.data() + k * sizeof(float), &value, sizeof value);  // little-endian hosts
  }
  std::vector<std::byte> ids(2 * sizeof(std::int64_t));
  const std::int64_t pair[2] = {static_cast<std::int64_t>(i), -static_cast<std::int64_t>(i) - 1};
  std::memcpy(ids.data(), pair, sizeof pair);
  return {bytes_of("caption " + std::to_string(i)), bytes_of("{\"i\":" + std::to_string(i) + "}"),
          i == 1 ? std::vector<std::byte>{} : boxes, ids};
}

// The pinned datasets: the shard format's versions.
enum class Golden { kV1 = 1, kV2Fields = 2, kV3Webp = 3 };
constexpr Golden kGoldens[] = {Golden::kV1, Golden::kV2Fields, Golden::kV3Webp};

void WriteGolden(const fs::path& dir, Golden golden) {
  const bool with_fields = golden == Golden::kV2Fields;
  WriterOptions options;
  if (with_fields) options.fields = GoldenSchema();
  options.shard_size_bytes = 4096;  // the minimum: with align 64 the five records need 2 shards
  options.shard.align_bytes = 64;
  auto writer = CreateDatasetWriter(dir, options);
  REQUIRE(writer.ok());
  std::uint32_t i = 0;
  for (const auto& record : GoldenRecords()) {
    ImageInfo image;
    image.encoding = golden == Golden::kV3Webp && i == 2 ? Encoding::kWebp : Encoding::kJpeg;
    image.width = 640 + i;
    image.height = 480 + i;
    image.channels = 3;
    image.subsampling = Subsampling::k420;
    image.progressive = i == 3;
    RecordInput input{record.key, record.label, record.bytes, image};
    const std::vector<std::vector<std::byte>> values = GoldenFieldValues(i);
    std::vector<FieldView> views;
    for (std::size_t f = 0; f < values.size(); ++f) {
      views.push_back({!(f == 2 && i == 1), values[f]});
    }
    if (with_fields) input.fields = views;
    REQUIRE((*writer)->Add(input).ok());
    ++i;
  }
  DatasetMetadata metadata;
  metadata.classes = {"cls0", "cls1"};
  metadata.listing_hash = "00112233445566ff";
  metadata.source_kind = "api";
  metadata.options_json = R"({"golden":true})";
  REQUIRE((*writer)->Finish(metadata).ok());
}

fs::path GoldenDir(Golden golden) {
  return fs::path(PACKREC_GOLDEN_DIR) / ("shard-v" + std::to_string(static_cast<int>(golden)));
}

TEST_CASE("golden: today's writer produces the pinned shard bytes") {
  for (const Golden version : kGoldens) {
    CAPTURE(static_cast<int>(version));
    const fs::path golden = GoldenDir(version);
    if (std::getenv("PACKREC_UPDATE_GOLDEN") != nullptr) {
      fs::remove_all(golden);
      WriteGolden(golden, version);
    }
    test::TempDir dir;
    WriteGolden(dir / "ds", version);
    const auto fresh = test::SnapshotTree(dir / "ds");
    const auto pinned = test::SnapshotTree(golden);
    REQUIRE(fresh.size() == pinned.size());
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      CAPTURE(fresh[i].first);
      CHECK(fresh[i].first == pinned[i].first);
      if (fresh[i].first == "manifest.json") continue;  // carries the packrec version; see below
      CHECK(fresh[i].second == pinned[i].second);
    }
  }
}

TEST_CASE("golden: the pinned datasets read back with today's reader") {
  for (const Golden version : kGoldens) {
    CAPTURE(static_cast<int>(version));
    const bool with_fields = version == Golden::kV2Fields;
    auto reader = OpenDataset(GoldenDir(version));
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    const auto records = GoldenRecords();
    REQUIRE((*reader)->size() == records.size());
    CHECK((*reader)->info().format_version == static_cast<std::uint32_t>(version));
    CHECK((*reader)->info().files.size() == (with_fields ? 3u : 2u));
    CHECK((*reader)->info().classes == std::vector<std::string>{"cls0", "cls1"});
    CHECK((*reader)->info().listing_hash == "00112233445566ff");
    CHECK((*reader)->info().fields == (with_fields ? GoldenSchema() : std::vector<FieldSpec>{}));
    ReadScratch scratch;
    for (std::uint32_t i = 0; i < records.size(); ++i) {
      auto view = (*reader)->Read(i, scratch);
      REQUIRE(view.ok());
      CHECK(view->key == records[i].key);
      CHECK(view->label == records[i].label);
      CHECK(test::Copy(view->bytes) == records[i].bytes);
      CHECK(view->encoding ==
            (version == Golden::kV3Webp && i == 2 ? Encoding::kWebp : Encoding::kJpeg));
      CHECK(view->width == 640 + i);
      CHECK(view->height == 480 + i);
      REQUIRE(view->fields.size() == (with_fields ? 4u : 0u));
      const std::vector<std::vector<std::byte>> values = GoldenFieldValues(i);
      for (std::size_t f = 0; f < view->fields.size(); ++f) {
        CHECK(view->fields[f].present == !(f == 2 && i == 1));
        if (view->fields[f].present) CHECK(test::Copy(view->fields[f].bytes) == values[f]);
      }
    }
    test::CollectingReporter reporter;
    CHECK((*reader)->Verify(reporter).problems == 0);
    // Version 3 is a manifest version: its shard files are version-1 files.
    const std::vector<std::byte> header = test::ReadBytes(GoldenDir(version) / "shard-000000.pkr");
    REQUIRE(header.size() > 12);
    CHECK(static_cast<int>(header[8]) == (with_fields ? 2 : 1));
  }
}

}  // namespace
}  // namespace packrec
