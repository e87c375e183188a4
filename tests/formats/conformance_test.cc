// One suite, every format: each case runs against shard and LMDB datasets written through the
// same writer interface and read through the same reader interface.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "core/checksum.h"
#include "core/random.h"
#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::Copy;

// Variants: "lmdb-caffe-datum" stores caffe.Datum values; "hdf5-in-place" tells HDF5 the payload
// total up front, so payloads go straight into /data.
const std::vector<std::string> kFormats = {"shard", "lmdb", "lmdb-caffe-datum", "hdf5",
                                           "hdf5-in-place"};

WriterOptions For(const std::string& variant) {
  WriterOptions options;
  options.format = variant.substr(0, variant.find('-'));
  if (variant == "hdf5-in-place") options.expected_payload_bytes = test::kExactPayloadBytes;
  if (variant == "lmdb-caffe-datum") options.lmdb.values = LmdbValues::kCaffeDatum;
  options.shard_size_bytes = 32 << 10;  // several shards for the shard format
  options.lmdb.commit_records = 7;      // several transactions for LMDB
  return options;
}

// The files of a dataset: the dataset itself when it is one file (HDF5), else its directory's.
std::vector<fs::path> Files(const fs::path& dataset) {
  if (fs::is_regular_file(dataset)) return {dataset};
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dataset)) files.push_back(entry.path());
  return files;
}

// The largest file of a dataset: where its records live.
fs::path DataFile(const fs::path& dataset) {
  if (fs::is_regular_file(dataset)) return dataset;
  fs::path biggest;
  std::uintmax_t size = 0;
  for (const auto& entry : fs::directory_iterator(dataset)) {
    if (entry.is_regular_file() && entry.file_size() > size) {
      size = entry.file_size();
      biggest = entry.path();
    }
  }
  return biggest;
}

TEST_CASE("conformance: round trip, random access equals sequential, sub-ranges") {
  for (const std::string& format : kFormats) {
    CAPTURE(format);
    test::TempDir dir;
    const auto records = test::MakeRecords(40);
    test::WriteDataset(dir / "ds", records, For(format));
    auto reader = OpenDataset(dir / "ds");
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    CHECK((*reader)->info().format == For(format).format);
    CHECK((*reader)->info().classes.size() == 3);
    REQUIRE((*reader)->size() == records.size());
    std::vector<std::vector<std::byte>> sequential;
    REQUIRE((*reader)
                ->ForEach([&](const RecordView& view) {
                  CHECK(view.index == sequential.size());
                  CHECK(view.key == records[view.index].key);
                  CHECK(view.label == records[view.index].label);
                  sequential.push_back(Copy(view.bytes));
                  return Status::OK();
                })
                .ok());
    REQUIRE(sequential.size() == records.size());
    std::vector<std::uint64_t> order(records.size());
    std::iota(order.begin(), order.end(), 0);
    SplitMix64 random(3);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[random.Below(i)]);
    ReadScratch scratch;
    for (std::uint64_t i : order) {
      auto view = (*reader)->Read(i, scratch);
      REQUIRE(view.ok());
      CHECK(view->index == i);
      CHECK(Copy(view->bytes) == records[i].bytes);
      CHECK(Copy(view->bytes) == sequential[i]);
      CHECK(view->key == records[i].key);
      CHECK(view->encoding == Encoding::kJpeg);
      CHECK(view->width == ProbeImage(records[i].bytes)->width);
    }
    std::vector<std::uint64_t> visited;
    REQUIRE((*reader)
                ->ForEach(
                    [&](const RecordView& view) {
                      visited.push_back(view.index);
                      return Status::OK();
                    },
                    17, 43)
                .ok());
    CHECK(visited.size() == 23);  // 40 records: 17..39
    CHECK(visited.front() == 17);
    test::CollectingReporter reporter;
    const VerifyStats stats = (*reader)->Verify(reporter);
    CHECK(stats.problems == 0);
    CHECK(stats.records_checked == records.size());
  }
}

TEST_CASE("conformance: empty and one-record datasets") {
  for (const std::string& format : kFormats) {
    CAPTURE(format);
    test::TempDir dir;
    test::WriteDataset(dir / "empty", {}, For(format));
    auto empty = OpenDataset(dir / "empty");
    REQUIRE_MESSAGE(empty.ok(), empty.status().ToString());
    CHECK((*empty)->size() == 0);
    ReadScratch scratch;
    CHECK((*empty)->Read(0, scratch).status().code() == StatusCode::kOutOfRange);
    int visits = 0;
    CHECK((*empty)
              ->ForEach([&](const RecordView&) {
                ++visits;
                return Status::OK();
              })
              .ok());
    CHECK(visits == 0);
    test::CollectingReporter reporter;
    CHECK((*empty)->Verify(reporter).problems == 0);

    const auto records = test::MakeRecords(1);
    test::WriteDataset(dir / "one", records, For(format));
    auto one = OpenDataset(dir / "one");
    REQUIRE(one.ok());
    REQUIRE((*one)->size() == 1);
    auto view = (*one)->Read(0, scratch);
    REQUIRE(view.ok());
    CHECK(Copy(view->bytes) == records[0].bytes);
    CHECK((*one)->Read(1, scratch).status().code() == StatusCode::kOutOfRange);
  }
}

TEST_CASE("conformance: a corrupt record is named, and every other record still reads") {
  for (const std::string& format : kFormats) {
    CAPTURE(format);
    test::TempDir dir;
    const auto records = test::MakeRecords(25);
    test::WriteDataset(dir / "ds", records, For(format));
    const std::uint64_t target = 11;
    // Flip a byte in the middle of every copy of record 11's payload in whichever file holds it
    // (LMDB may keep stale copies of small values in free pages).
    bool flipped = false;
    for (const fs::path& file : Files(dir / "ds")) {
      auto bytes = test::ReadBytes(file);
      const auto& payload = records[target].bytes;
      for (auto it = std::search(bytes.begin(), bytes.end(), payload.begin(), payload.end());
           it != bytes.end();
           it = std::search(it + 1, bytes.end(), payload.begin(), payload.end())) {
        it[static_cast<std::ptrdiff_t>(payload.size() / 2)] ^= std::byte{0x5a};
        flipped = true;
      }
      if (flipped) test::WriteBytes(file, bytes);
    }
    REQUIRE(flipped);
    auto reader = OpenDataset(dir / "ds");
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    ReadScratch scratch;
    auto damaged = (*reader)->Read(target, scratch);
    REQUIRE_FALSE(damaged.ok());
    CHECK(damaged.status().code() == StatusCode::kCorruption);
    CHECK(damaged.status().message().find("record 11") != std::string::npos);
    CHECK(damaged.status().message().find(records[target].key) != std::string::npos);
    CHECK(damaged.status().message().find("checksum mismatch") != std::string::npos);
    for (std::uint64_t i = 0; i < records.size(); ++i) {
      if (i == target) continue;
      auto view = (*reader)->Read(i, scratch);
      REQUIRE(view.ok());
      CHECK(Copy(view->bytes) == records[i].bytes);
    }
    // A sequential pass delivers the records before it intact, then stops on it by name.
    std::uint64_t delivered = 0;
    const Status streamed = (*reader)->ForEach([&](const RecordView& view) {
      CHECK(Copy(view.bytes) == records[view.index].bytes);
      ++delivered;
      return Status::OK();
    });
    CHECK(streamed.code() == StatusCode::kCorruption);
    CHECK(streamed.message().find("record 11") != std::string::npos);
    CHECK(delivered == target);
    test::CollectingReporter reporter;
    const VerifyStats stats = (*reader)->Verify(reporter);
    REQUIRE(stats.problems == 1);
    CHECK(reporter.problems[0].record_index == target);
    CHECK(reporter.problems[0].key == records[target].key);
    CHECK_FALSE(reporter.problems[0].file.empty());
  }
}

TEST_CASE("conformance: a truncated data file is an error at open, not a crash") {
  for (const std::string& format : kFormats) {
    CAPTURE(format);
    test::TempDir dir;
    test::WriteDataset(dir / "ds", test::MakeRecords(25), For(format));
    const fs::path data = DataFile(dir / "ds");
    const auto size = fs::file_size(data);
    for (const std::uintmax_t cut :
         {size - 1, size - 4096, size / 2, std::uintmax_t{100}, std::uintmax_t{0}}) {
      CAPTURE(cut);
      test::WriteDataset(dir / ("c" + std::to_string(cut)), test::MakeRecords(25), For(format));
      const fs::path copy = DataFile(dir / ("c" + std::to_string(cut)));
      test::TruncateFile(copy, cut);
      auto reader = OpenDataset(dir / ("c" + std::to_string(cut)));
      REQUIRE_FALSE(reader.ok());
      CHECK_MESSAGE((reader.status().code() == StatusCode::kTruncated ||
                     reader.status().code() == StatusCode::kCorruption),
                    reader.status().ToString());
    }
  }
}

// RecordInput::checksum lets convert hash on its reading thread. A writer takes it as given for
// the record number it names over bytes it stores unchanged (a wrong one shows as a bad record:
// that is how this test sees it was used), and hashes itself otherwise.
TEST_CASE("conformance: a checksum computed ahead is used for its record number and bytes only") {
  for (const std::string& format : kFormats) {
    CAPTURE(format);
    const bool zstd = format != "lmdb-caffe-datum";  // Caffe reads the image as it is
    test::TempDir dir;
    std::vector<test::TestRecord> records = test::MakeRecords(6);
    if (zstd) records.push_back({"raw/text.bin", 0, std::vector<std::byte>(5000, std::byte{'a'})});
    WriterOptions options = For(format);
    if (zstd) options.compression = Compression::kZstd;
    if (options.expected_payload_bytes == test::kExactPayloadBytes)
      options.expected_payload_bytes = 0;
    auto writer = CreateDatasetWriter(dir / "ds", options);
    REQUIRE(writer.ok());
    for (std::uint64_t i = 0; i < records.size(); ++i) {
      const test::TestRecord& record = records[i];
      auto info = ProbeImage(record.bytes);
      RecordInput input{record.key, record.label, record.bytes, info.ok() ? *info : ImageInfo{}};
      if (i < 2) input.checksum = PrecomputedChecksum{i, Xxh64(record.bytes, i)};  // right
      if (i == 2) input.checksum = PrecomputedChecksum{3, 12345};  // another record's: ignored
      if (i == 3) input.checksum = PrecomputedChecksum{3, 12345};  // wrong, and taken as given
      if (i == 6) input.checksum = PrecomputedChecksum{6, 12345};  // stored compressed: ignored
      REQUIRE((*writer)->Add(input).ok());
    }
    DatasetMetadata metadata;
    metadata.classes = {"class0", "class1", "class2"};
    metadata.listing_hash = "0000000000000000";
    REQUIRE((*writer)->Finish(metadata).ok());
    auto reader = OpenDataset(dir / "ds");
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    ReadScratch scratch;
    for (std::uint64_t i = 0; i < records.size(); ++i) {
      CAPTURE(i);
      auto view = (*reader)->Read(i, scratch);
      if (i == 3) {
        REQUIRE_FALSE(view.ok());
        CHECK(view.status().message().find("checksum mismatch") != std::string::npos);
        continue;
      }
      REQUIRE_MESSAGE(view.ok(), view.status().ToString());
      CHECK(Copy(view->bytes) == records[i].bytes);
    }
  }
}

TEST_CASE("conformance: zstd round trip for compressible payloads") {
  for (const std::string& format : kFormats) {
    if (format == "lmdb-caffe-datum") continue;  // Caffe reads the image as it is: refused
    CAPTURE(format);
    test::TempDir dir;
    std::vector<test::TestRecord> records = test::MakeRecords(3);
    records.push_back({"png/a.png", 2, test::MakePng(128, 64, 1)});
    records.push_back({"raw/text.bin", 0, std::vector<std::byte>(5000, std::byte{'a'})});
    WriterOptions options = For(format);
    options.compression = Compression::kZstd;
    test::WriteDataset(dir / "ds", records, options);
    auto reader = OpenDataset(dir / "ds");
    REQUIRE(reader.ok());
    std::uint64_t raw = 0;
    for (const auto& r : records) raw += r.bytes.size();
    CHECK((*reader)->info().payload_bytes < raw);
    ReadScratch scratch;
    for (std::size_t i = 0; i < records.size(); ++i) {
      auto view = (*reader)->Read(i, scratch);
      REQUIRE(view.ok());
      CHECK(Copy(view->bytes) == records[i].bytes);
    }
    std::size_t visited = 0;
    CHECK((*reader)
              ->ForEach([&](const RecordView& view) {
                CHECK(Copy(view.bytes) == records[view.index].bytes);
                ++visited;
                return Status::OK();
              })
              .ok());
    CHECK(visited == records.size());
  }
}

TEST_CASE("conformance: concurrent reads from four threads and reads in a forked child") {
  for (const std::string& format : kFormats) {
    CAPTURE(format);
    test::TempDir dir;
    const auto records = test::MakeRecords(50);
    test::WriteDataset(dir / "ds", records, For(format));
    auto reader = OpenDataset(dir / "ds");
    REQUIRE(reader.ok());
    const Reader& shared = **reader;
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        ReadScratch scratch;  // one per thread, as the contract asks
        SplitMix64 random(static_cast<std::uint64_t>(t));
        for (int n = 0; n < 300; ++n) {
          const std::uint64_t i = random.Below(records.size());
          auto view = shared.Read(i, scratch);
          if (!view.ok() || Copy(view->bytes) != records[i].bytes) ++mismatches;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK(mismatches == 0);

    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The child keeps using the parent's reader (no doctest macros here: only the exit code).
      ReadScratch scratch;
      for (std::uint64_t i = 0; i < records.size(); ++i) {
        auto view = shared.Read(i, scratch);
        if (!view.ok() || Copy(view->bytes) != records[i].bytes) ::_exit(1);
      }
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The parent's reader still works after the child is gone.
    ReadScratch scratch;
    CHECK(shared.Read(0, scratch).ok());
  }
}

TEST_CASE(
    "conformance: replacing a dataset of one format with another, and refusing without overwrite") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(5), For("lmdb"));
  auto refused = CreateDatasetWriter(dir / "ds", For("shard"));
  CHECK(refused.status().code() == StatusCode::kAlreadyExists);
  WriterOptions overwrite = For("lmdb");
  overwrite.overwrite = true;
  test::WriteDataset(dir / "ds", test::MakeRecords(7), overwrite);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  CHECK((*reader)->size() == 7);
}

}  // namespace
}  // namespace packrec
