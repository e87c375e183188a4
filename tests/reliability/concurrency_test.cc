// Readers and the loader under concurrency, run by the ThreadSanitizer job (scripts/test.sh --tsan)
// as well as the normal suites: 16 threads reading one reader of every format at random, a reader
// opened again and again while a conversion into the same path runs, and 16 loader threads
// sharing each batch while epochs are abandoned half-way; an import prepared on 8 workers.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "../formats/shard_test_util.h"
#include "core/checksum.h"
#include "packrec/convert.h"
#include "packrec/loader.h"
#include "packrec/reader.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

TEST_CASE("16 threads reading one reader at random, every format: every record right") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 40, /*seed=*/11, /*size=*/96);
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    const fs::path path = dir / (format == "hdf5" ? "ds.h5" : "ds-" + format);
    ConvertOptions options;
    options.source = dir / "tree";
    options.output = path;
    options.writer.format = format;
    options.writer.shard_size_bytes = 64 << 10;  // several shards
    options.threads = 4;
    REQUIRE(Convert(options).ok());
    auto reader = OpenDataset(path);
    REQUIRE(reader.ok());
    const std::uint64_t count = (*reader)->size();
    REQUIRE(count == 120);
    // What each record must read back as, taken on one thread first.
    std::vector<std::uint64_t> expected(count);
    {
      ReadScratch scratch;
      for (std::uint64_t i = 0; i < count; ++i) {
        auto record = (*reader)->Read(i, scratch);
        REQUIRE(record.ok());
        expected[i] = Xxh64(record->bytes) ^ (std::uint64_t{record->label} << 56);
      }
    }
    std::atomic<int> wrong{0};
    std::atomic<int> reads{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        ReadScratch scratch;  // one per thread, as the Reader contract asks
        std::mt19937_64 random(static_cast<std::uint64_t>(t) * 7919);
        for (int n = 0; n < 400; ++n) {
          const std::uint64_t i = random() % count;
          auto record = (*reader)->Read(i, scratch);
          if (!record.ok() ||
              (Xxh64(record->bytes) ^ (std::uint64_t{record->label} << 56)) != expected[i]) {
            ++wrong;
          }
          ++reads;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK(wrong == 0);
    CHECK(reads == 16 * 400);
  }
}

TEST_CASE("a reader opened while a conversion runs sees no dataset, then the whole one") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 150, /*seed=*/12, /*size=*/128);
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    const fs::path path = dir / (format == "hdf5" ? "live.h5" : "live-" + format);
    ConvertOptions options;
    options.source = dir / "tree";
    options.output = path;
    options.writer.format = format;
    options.writer.shard_size_bytes = 32 << 10;  // many sealed shards while it runs
    options.threads = 2;
    std::atomic<bool> done{false};
    std::thread conversion([&] {
      CHECK(Convert(options).ok());
      done = true;
    });
    int partial = 0, absent = 0, whole = 0;
    while (!done) {
      auto reader = OpenDataset(path);
      if (!reader.ok()) {
        ++absent;  // no manifest yet: not a dataset
      } else if ((*reader)->size() == 300) {
        ++whole;
      } else {
        ++partial;
      }
    }
    conversion.join();
    CHECK(partial == 0);
    MESSAGE(format << ": opened " << absent << " times before it was whole, " << whole << " after");
    auto reader = OpenDataset(path);
    REQUIRE(reader.ok());
    CHECK((*reader)->size() == 300);
  }
}

TEST_CASE(
    "16 loader threads share each batch; epochs abandoned half-way leave the next one whole") {
  const test::TempDir dir;
  auto records = test::MakeRecords(100);
  for (const std::size_t bad : {5, 50, 51})
    records[bad].bytes.resize(records[bad].bytes.size() / 3);
  test::WriteDataset(dir.path() / "ds", records);
  auto reader = test::OpenShared(dir.path() / "ds");
  LoaderOptions options;
  options.batch_size = 8;
  options.threads = 16;
  options.prefetch_batches = 2;
  options.output_size = 16;
  options.resize_size = 18;
  options.on_bad_record = OnBadRecord::kSkip;
  options.seed = 7;
  auto loader = Loader::Create(reader, options);
  REQUIRE(loader.ok());
  for (std::uint64_t epoch = 0; epoch < 6; ++epoch) {
    (*loader)->StartEpoch(epoch);
    for (std::uint64_t taken = 0; taken < epoch;
         ++taken) {  // then abandoned with batches in flight
      auto batch = (*loader)->Next();
      REQUIRE(batch.ok());
      REQUIRE(*batch != nullptr);
      CHECK((*batch)->epoch() == epoch);
    }
  }
  (*loader)->StartEpoch(9);
  std::vector<std::uint64_t> delivered;
  for (;;) {
    auto batch = (*loader)->Next();
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    if (*batch == nullptr) break;
    CHECK((*batch)->epoch() == 9);
    for (std::uint32_t i = 0; i < (*batch)->size(); ++i) {
      const std::uint64_t record = (*batch)->record_indices()[i];
      delivered.push_back(record);
      CHECK((*batch)->labels()[i] == records[record].label);
    }
  }
  std::vector<std::uint64_t> expected;
  for (const std::uint64_t record : EpochOrder(100, options, 9)) {
    if (record != 5 && record != 50 && record != 51) expected.push_back(record);
  }
  CHECK(delivered == expected);
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

// A RecordIO export of `dir/tree` whose records `bad` carry bytes that are no image: the framing
// reads them, and preparing them (on the import's workers) rejects them.
fs::path RecordIoWithUnreadableImages(const fs::path& dir, const std::vector<std::uint64_t>& bad) {
  const test::OneFileExport rec = test::ExportOneFile(dir / "tree", dir / "rec", "recordio");
  std::vector<std::byte> bytes = test::ReadBytes(rec.file);
  for (const std::uint64_t number : bad) {
    // Past the frame header (8 bytes) and im2rec's image header (24): the JPEG's SOI marker.
    const std::uint64_t offset = rec.offsets.at(number);
    REQUIRE(offset + 34 < bytes.size());
    REQUIRE(bytes[offset + 32] == std::byte{0xFF});
    bytes[offset + 32] = bytes[offset + 33] = std::byte{0};
  }
  test::WriteBytes(rec.file, bytes);
  return dir / "rec";
}

// A TFRecord export of `dir/tree` with a byte flipped inside each of the records `bad`: their data
// CRC fails, which the import's workers check (TFRecord leaves it to them: DeferChecks).
fs::path TfRecordWithDamagedRecords(const fs::path& dir, const std::vector<std::uint64_t>& bad) {
  const test::OneFileExport tf = test::ExportOneFile(dir / "tree", dir / "tf", "tfrecord");
  std::vector<std::byte> bytes = test::ReadBytes(tf.file);
  for (const std::uint64_t number : bad) {
    const std::uint64_t offset = tf.offsets.at(number);
    REQUIRE(offset + 12 + 40 < bytes.size());
    bytes[offset + 12 + 40] ^= std::byte{1};  // past the frame header (12 bytes): the data
  }
  test::WriteBytes(tf.file, bytes);
  return dir / "tf";
}

TEST_CASE("an import prepared on 8 workers equals the one prepared on 1, rejects and all") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 40, /*seed=*/4, /*size=*/64);
  // Neighbours, a lone one and the last: each shifts the numbers of the records after it, which
  // the workers guess ahead when they compute checksums.
  const std::vector<std::uint64_t> bad = {5, 6, 61, 119};
  for (const fs::path& source : {RecordIoWithUnreadableImages(dir.path(), bad),
                                 TfRecordWithDamagedRecords(dir.path(), bad)}) {
    CAPTURE(source);
    std::vector<std::vector<std::string>> results;
    for (const unsigned threads : {1u, 8u}) {
      CAPTURE(threads);
      ConvertOptions in;
      in.source = source;
      in.output = dir / (source.filename().string() + "-in-" + std::to_string(threads));
      in.threads = threads;
      in.on_error = OnBadRecord::kSkip;
      Result<ConvertStats> stats = Convert(in);
      REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
      CHECK(stats->records_written == 116);
      REQUIRE(stats->rejects.size() == bad.size());
      for (std::size_t i = 0; i < bad.size(); ++i) {
        CHECK(stats->rejects[i].path.find("record " + std::to_string(bad[i]) + " ") !=
              std::string::npos);
      }
      auto reader = OpenDataset(in.output);
      REQUIRE(reader.ok());
      ReadScratch scratch;
      std::vector<std::string> records;
      for (std::uint64_t i = 0; i < (*reader)->size(); ++i) {
        auto view = (*reader)->Read(i, scratch);  // checks the stored checksum
        REQUIRE_MESSAGE(view.ok(), view.status().ToString());
        records.push_back(std::string(view->key) + " " + std::to_string(view->label) + " " +
                          Hex64(Xxh64(view->bytes)));
      }
      results.push_back(std::move(records));

      // Under --on-error fail, the first bad record in source order is the one named, and the
      // import stops with records still being prepared.
      in.on_error = OnBadRecord::kFail;
      in.writer.overwrite = true;
      Result<ConvertStats> failed = Convert(in);
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.status().message().find("record 5 ") != std::string::npos);
    }
    CHECK(results[0].size() == 116);
    CHECK(results[0] == results[1]);
  }
}

}  // namespace
}  // namespace packrec
