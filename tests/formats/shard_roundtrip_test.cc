#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "core/random.h"
#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::Copy;

TEST_CASE("shard round trip: every record's key, label, bytes and image metadata come back") {
  test::TempDir dir;
  const auto records = test::MakeRecords(40);
  test::WriteDataset(dir / "ds", records);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  CHECK((*reader)->info().format == "shard");
  CHECK((*reader)->info().classes.size() == 3);
  REQUIRE((*reader)->size() == records.size());
  ReadScratch scratch;
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto view = (*reader)->Read(i, scratch);
    REQUIRE(view.ok());
    CHECK(view->index == i);
    CHECK(view->key == records[i].key);
    CHECK(view->label == records[i].label);
    CHECK(Copy(view->bytes) == records[i].bytes);
    CHECK(view->encoding == Encoding::kJpeg);
    auto info = ProbeImage(records[i].bytes);
    CHECK(view->width == info->width);
    CHECK(view->height == info->height);
    CHECK(view->channels == 3);
    // Zero-copy and aligned: the view points into the mapping at a 64-byte boundary.
    CHECK(reinterpret_cast<std::uintptr_t>(view->bytes.data()) % 64 == 0);
  }
  test::CollectingReporter reporter;
  const VerifyStats stats = (*reader)->Verify(reporter);
  CHECK(stats.problems == 0);
  CHECK(stats.records_checked == records.size());
  CHECK(fs::exists(dir / "ds" / "manifest.json"));
  for (const auto& entry : fs::directory_iterator(dir / "ds")) {
    CHECK(entry.path().extension() != ".tmp");
  }
}

TEST_CASE("shards split at the size target, and a record larger than a shard gets its own") {
  test::TempDir dir;
  auto records = test::MakeRecords(30);
  // One record far larger than the target.
  records.insert(records.begin() + 10,
                 test::TestRecord{"big/huge.jpg", 1, test::MakeJpeg(1600, 1200, 99)});
  REQUIRE(records[10].bytes.size() > (128 << 10));  // larger than a streaming window
  WriterOptions options;
  options.shard_size_bytes = 16 << 10;
  options.shard.align_bytes = 4096;
  test::WriteDataset(dir / "ds", records, options);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  const auto& files = (*reader)->info().files;
  REQUIRE(files.size() > 3);
  std::uint64_t next = 0;
  bool big_alone = false;
  for (const DatasetFileInfo& file : files) {
    CHECK(file.first_record == next);
    CHECK(file.record_count >= 1);
    CHECK(fs::file_size(dir / "ds" / file.file) == file.size_bytes);
    if (file.record_count > 1) CHECK(file.size_bytes <= options.shard_size_bytes);
    if (file.first_record == 10) big_alone = file.record_count == 1;
    next += file.record_count;
  }
  CHECK(next == records.size());
  CHECK(big_alone);
  ReadScratch scratch;
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto view = (*reader)->Read(i, scratch);
    REQUIRE(view.ok());
    CHECK(Copy(view->bytes) == records[i].bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(view->bytes.data()) % 4096 == 0);
  }
  // The streaming scan crosses shards and windows and delivers the same bytes.
  std::size_t visited = 0;
  REQUIRE((*reader)
              ->ForEach([&](const RecordView& view) {
                CHECK(Copy(view.bytes) == records[view.index].bytes);
                CHECK(view.key == records[view.index].key);
                ++visited;
                return Status::OK();
              })
              .ok());
  CHECK(visited == records.size());
}

TEST_CASE("a shard that shrinks under an open reader gives an error in a scan, not a crash") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(20));
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  test::TruncateFile(dir / "ds" / "shard-000000.pkr", 5000);
  std::size_t visited = 0;
  const Status status = (*reader)->ForEach([&](const RecordView&) {
    ++visited;
    return Status::OK();
  });
  CHECK(status.code() == StatusCode::kTruncated);
  CHECK(status.message().find("shard-000000.pkr") != std::string::npos);
  CHECK(visited < 20);
}

TEST_CASE("writer options are validated with the flag named") {
  test::TempDir dir;
  WriterOptions options;
  options.shard.align_bytes = 48;
  auto bad_align = CreateDatasetWriter(dir / "a", options);
  CHECK(bad_align.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad_align.status().message().find("--align") != std::string::npos);
  options = {};
  options.shard_size_bytes = 100;
  CHECK(CreateDatasetWriter(dir / "b", options).status().message().find("--shard-size") !=
        std::string::npos);
  options = {};
  options.format = "parquet";
  CHECK(CreateDatasetWriter(dir / "c", options).status().message().find("--format") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "a"));

  // Dataset metadata that cannot be stored is an error from Finish, not an exception.
  for (const auto& [classes, options_json] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"ok"}, "not json"}, {{"ok"}, "[1, 2]"}, {{"bad \xff utf-8"}, "{}"}}) {
    auto writer = CreateDatasetWriter(dir / "meta", {});
    REQUIRE(writer.ok());
    DatasetMetadata metadata;
    metadata.classes = classes;
    metadata.options_json = options_json;
    CHECK((*writer)->Finish(metadata).code() == StatusCode::kInvalidArgument);
    (*writer)->Abort();
    CHECK_FALSE(fs::exists(dir / "meta"));
  }
}

TEST_CASE("an aborted writer leaves nothing behind") {
  test::TempDir dir;
  WriterOptions options;
  options.shard_size_bytes = 8 << 10;
  auto writer = CreateDatasetWriter(dir / "ds", options);
  REQUIRE(writer.ok());
  for (const auto& record : test::MakeRecords(10)) {
    REQUIRE((*writer)->Add({record.key, record.label, record.bytes, {}}).ok());
  }
  (*writer)->Abort();
  CHECK_FALSE(fs::exists(dir / "ds"));
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

using test::Copy;

}  // namespace
}  // namespace packrec
