// The batch loader over a real shard dataset of real JPEGs: orders, batch contents against
// single-image decodes, crop and flip geometry, bad records, shutdown.
#include "packrec/loader.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>

#include "decode/codecs.h"
#include "formats/shard_test_util.h"

namespace packrec {
namespace {

using test::OpenShared;

LoaderOptions Small(TransformKind transform) {
  LoaderOptions options;
  options.batch_size = 8;
  options.threads = 2;
  options.prefetch_batches = 3;
  options.output_size = 24;
  options.resize_size = 28;
  options.transform = transform;
  options.seed = 42;
  return options;
}

// Every batch of one epoch, in order.
std::vector<std::shared_ptr<const Batch>> Drain(Loader& loader) {
  std::vector<std::shared_ptr<const Batch>> batches;
  for (;;) {
    auto batch = loader.Next();
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    if (*batch == nullptr) return batches;
    batches.push_back(*batch);
  }
}

TEST_CASE("epoch order: a permutation fixed by seed and epoch, new each epoch") {
  LoaderOptions options;
  options.seed = 7;
  const auto a = EpochOrder(1000, options, 0);
  CHECK(a == EpochOrder(1000, options, 0));
  CHECK(a != EpochOrder(1000, options, 1));
  options.seed = 8;
  CHECK(a != EpochOrder(1000, options, 0));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint64_t i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  options.shuffle = ShuffleMode::kNone;
  const auto plain = EpochOrder(10, options, 3);
  CHECK(plain == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("epoch order: windowed shuffle keeps each window's records together") {
  LoaderOptions options;
  options.shuffle = ShuffleMode::kWindowed;
  options.shuffle_window = 100;
  const auto order = EpochOrder(1050, options, 2);
  REQUIRE(order.size() == 1050);
  std::set<std::uint64_t> seen(order.begin(), order.end());
  CHECK(seen.size() == 1050);
  // Runs of records from one window, one window after another.
  std::set<std::uint64_t> windows_done;
  std::uint64_t current = order[0] / 100;
  for (const std::uint64_t record : order) {
    if (record / 100 != current) {
      CHECK(windows_done.insert(current).second);
      current = record / 100;
    }
  }
  CHECK(windows_done.size() == 10);  // 11 windows; the last run is the 11th
  CHECK(order != EpochOrder(1050, options, 3));
}

TEST_CASE("epoch order: ranks are disjoint, equal and together complete") {
  LoaderOptions options;
  options.seed = 3;
  options.world_size = 4;
  std::vector<std::uint64_t> all;
  for (std::uint32_t rank = 0; rank < 4; ++rank) {
    options.rank = rank;
    const auto part = EpochOrder(1000, options, 5);
    CHECK(part.size() == 250);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  for (std::uint64_t i = 0; i < 1000; ++i) REQUIRE(all[i] == i);
  // 1001 records in global batches of 4 x 100: short (every record once; the last global batch
  // of 201 split 51, 50, 50, 50), padded to 1200 by repeats, or cut to 800.
  options.batch_size = 100;
  std::multiset<std::uint64_t> short_end, padded, cut;
  const std::vector<std::pair<LastBatch, std::multiset<std::uint64_t>*>> modes = {
      {LastBatch::kShort, &short_end}, {LastBatch::kPad, &padded}, {LastBatch::kDrop, &cut}};
  for (const auto& [mode, into] : modes) {
    options.last_batch = mode;
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
      options.rank = rank;
      const auto part = EpochOrder(1001, options, 5);
      const std::size_t expected = mode == LastBatch::kPad    ? 300u
                                   : mode == LastBatch::kDrop ? 200u
                                                              : (rank == 0 ? 251u : 250u);
      CHECK(part.size() == expected);
      into->insert(part.begin(), part.end());
    }
  }
  CHECK(short_end.size() == 1001);
  CHECK(std::set<std::uint64_t>(short_end.begin(), short_end.end()).size() == 1001);
  CHECK(padded.size() == 1200);
  CHECK(std::set<std::uint64_t>(padded.begin(), padded.end()).size() == 1001);
  CHECK(cut.size() == 800);
  CHECK(std::set<std::uint64_t>(cut.begin(), cut.end()).size() == 800);
}

// Image i of `batch` is `record`'s bytes decoded alone with the eval transform (24 x 24).
void CheckEvalImage(const Batch& batch, std::uint32_t i, const std::vector<std::byte>& record,
                    const LoaderOptions& options, DecodeScratch& scratch) {
  std::vector<std::uint8_t> expected(24 * 24 * 3);
  DecodeRequest request{24,
                        24,
                        [&](std::uint32_t w, std::uint32_t h) { return EvalRegion(w, h, options); },
                        false,
                        {}};
  REQUIRE(DecodeInto(record, request, expected, scratch).ok());
  CHECK(std::equal(expected.begin(), expected.end(), batch.image(i).begin()));
}

TEST_CASE("loader eval: every record once, in order, equal to its single-image decode") {
  test::TempDir dir;
  const auto records = test::MakeRecords(30);
  test::WriteDataset(dir / "ds", records);
  auto reader = OpenShared(dir / "ds");
  const LoaderOptions options = Small(TransformKind::kEval);
  auto loader = Loader::Create(reader, options);
  REQUIRE(loader.ok());
  CHECK((*loader)->batches_per_epoch() == 4);  // 8 + 8 + 8 + 6
  const auto order = EpochOrder(30, options, 0);
  const auto batches = Drain(**loader);
  REQUIRE(batches.size() == 4);
  std::size_t position = 0;
  DecodeScratch scratch;
  for (const auto& batch : batches) {
    CHECK(batch->epoch() == 0);
    CHECK(batch->height() == 24);
    for (std::uint32_t i = 0; i < batch->size(); ++i, ++position) {
      const std::uint64_t record = batch->record_indices()[i];
      CHECK(record == order[position]);
      CHECK(batch->labels()[i] == records[record].label);
      CheckEvalImage(*batch, i, records[record].bytes, options, scratch);
    }
  }
  CHECK(position == 30);
  CHECK(batches.back()->size() == 6);
  // Another epoch: another order, the same records.
  (*loader)->StartEpoch(1);
  std::multiset<std::uint64_t> seen;
  std::vector<std::uint64_t> second;
  for (const auto& batch : Drain(**loader)) {
    CHECK(batch->epoch() == 1);
    for (const std::uint64_t record : batch->record_indices()) {
      seen.insert(record);
      second.push_back(record);
    }
  }
  CHECK(seen.size() == 30);
  CHECK(std::set<std::uint64_t>(seen.begin(), seen.end()).size() == 30);
  CHECK(second == EpochOrder(30, options, 1));
  // LastBatch::kDrop: only full batches.
  LoaderOptions drop = options;
  drop.last_batch = LastBatch::kDrop;
  auto dropping = Loader::Create(reader, drop);
  REQUIRE(dropping.ok());
  CHECK(Drain(**dropping).size() == 3);
}

TEST_CASE("loader train: crop and flip geometry match a reference decode, crop and mirror") {
  test::TempDir dir;
  std::vector<test::TestRecord> records;
  for (int i = 0; i < 12; ++i) {
    records.push_back({"c/" + std::to_string(i) + ".jpg", 0,
                       test::MakeJpeg(static_cast<std::uint32_t>(160 + i * 8), 120, 70u + i)});
  }
  test::WriteDataset(dir / "ds", records);
  auto reader = OpenShared(dir / "ds");
  LoaderOptions options = Small(TransformKind::kTrain);
  auto loader = Loader::Create(reader, options);
  REQUIRE(loader.ok());
  int flips = 0;
  for (const auto& batch : Drain(**loader)) {
    for (std::uint32_t i = 0; i < batch->size(); ++i) {
      const std::uint64_t record = batch->record_indices()[i];
      auto full = DecodeJpeg(records[record].bytes);
      REQUIRE(full.ok());
      bool flip = false;
      const Rect region = TrainRegion(full->width, full->height, options, 0, record, &flip);
      flips += flip ? 1 : 0;
      // The region is inside the image, its area and aspect ratio within the options' ranges
      // (or the central fallback).
      CHECK(region.x + region.width <= full->width);
      CHECK(region.y + region.height <= full->height);
      const double area = static_cast<double>(region.width) * region.height /
                          (static_cast<double>(full->width) * full->height);
      CHECK(area <= 1.0);
      CHECK(area >= 0.08 * 0.95);
      // The loader's image: the reference region, resized, then mirrored.
      std::vector<std::uint8_t> crop(std::size_t{region.width} * region.height * 3);
      for (std::uint32_t y = 0; y < region.height; ++y) {
        for (std::uint32_t x = 0; x < region.width; ++x) {
          const std::uint32_t sx = flip ? region.x + region.width - 1 - x : region.x + x;
          for (int c = 0; c < 3; ++c) {
            crop[(std::size_t{y} * region.width + x) * 3 + c] =
                full->data[(std::size_t{region.y + y} * full->width + sx) * 3 + c];
          }
        }
      }
      // Decode the same region at its own size (no resize) through the loader's path, and
      // compare with the reference crop: equal up to chroma upsampling at iMCU edges.
      std::vector<std::uint8_t> ours(crop.size());
      DecodeScratch scratch;
      DecodeRequest request{region.width,
                            region.height,
                            [region](std::uint32_t, std::uint32_t) { return region; },
                            flip,
                            {}};
      REQUIRE(DecodeInto(records[record].bytes, request, ours, scratch).ok());
      int worst = 0;
      for (std::size_t k = 0; k < ours.size(); ++k)
        worst = std::max(worst, std::abs(ours[k] - crop[k]));
      CHECK(worst <= 3);
      // And the batch holds that region resized to the output size.
      std::vector<std::uint8_t> resized(24 * 24 * 3);
      request.out_width = request.out_height = 24;
      REQUIRE(DecodeInto(records[record].bytes, request, resized, scratch).ok());
      CHECK(std::equal(resized.begin(), resized.end(), batch->image(i).begin()));
    }
  }
  CHECK(flips > 0);
  CHECK(flips < 12);
}

TEST_CASE("loader: a corrupt record raises with its index and key, or is skipped and counted") {
  test::TempDir dir;
  auto records = test::MakeRecords(20);
  // Truncated JPEGs: two in the second batch (records 8..15), one first in the third.
  for (const std::size_t bad : {9, 13, 16})
    records[bad].bytes.resize(records[bad].bytes.size() / 2);
  test::WriteDataset(dir / "ds", records);
  auto reader = OpenShared(dir / "ds");
  // One thread fills a batch alone; four split each batch of 8 into chunks filled out of order.
  for (const unsigned threads : {1u, 4u}) {
    CAPTURE(threads);
    LoaderOptions options = Small(TransformKind::kEval);
    options.shuffle = ShuffleMode::kNone;
    options.threads = threads;
    auto loader = Loader::Create(reader, options);
    REQUIRE(loader.ok());
    auto first = (*loader)->Next();
    REQUIRE(first.ok());
    auto second = (*loader)->Next();  // the first bad record in batch order is named
    REQUIRE_FALSE(second.ok());
    CHECK(second.status().code() == StatusCode::kInvalidInput);
    CHECK(second.status().message().find("record 9 ") != std::string::npos);
    CHECK(second.status().message().find(records[9].key) != std::string::npos);
    auto third = (*loader)->Next();  // the epoch goes on after the error
    REQUIRE_FALSE(third.ok());
    CHECK(third.status().message().find("record 16 ") != std::string::npos);
    auto end = (*loader)->Next();
    REQUIRE(end.ok());
    CHECK(*end == nullptr);

    options.on_bad_record = OnBadRecord::kSkip;
    auto skipping = Loader::Create(reader, options);
    REQUIRE(skipping.ok());
    std::vector<std::uint64_t> delivered;
    std::vector<std::uint32_t> sizes;
    DecodeScratch scratch;
    for (const auto& batch : Drain(**skipping)) {
      sizes.push_back(batch->size());
      for (std::uint32_t i = 0; i < batch->size(); ++i) {
        // The images after a skipped one moved down with their labels and record numbers.
        const std::uint64_t record = batch->record_indices()[i];
        delivered.push_back(record);
        CHECK(batch->labels()[i] == records[record].label);
        CheckEvalImage(*batch, i, records[record].bytes, options, scratch);
      }
      CHECK(batch->skipped() == (batch->index() == 1 ? 2u : batch->index() == 2 ? 1u : 0u));
    }
    CHECK(sizes == std::vector<std::uint32_t>{8, 6, 3});
    std::vector<std::uint64_t> expected_records;
    for (std::uint64_t r = 0; r < 20; ++r) {
      if (r != 9 && r != 13 && r != 16) expected_records.push_back(r);
    }
    CHECK(delivered == expected_records);
    CHECK((*skipping)->stats().skipped == 3);
    CHECK((*skipping)->stats().images == 17);
  }
}

TEST_CASE("loader none: the encoded bytes of each record, as stored") {
  test::TempDir dir;
  const auto records = test::MakeRecords(10);
  test::WriteDataset(dir / "ds", records);
  auto loader = Loader::Create(OpenShared(dir / "ds"), Small(TransformKind::kNone));
  REQUIRE(loader.ok());
  std::size_t count = 0;
  for (const auto& batch : Drain(**loader)) {
    for (std::uint32_t i = 0; i < batch->size(); ++i, ++count) {
      const auto& expected = records[batch->record_indices()[i]].bytes;
      CHECK(test::Copy(batch->encoded(i)) == expected);
    }
  }
  CHECK(count == 10);
}

TEST_CASE("loader: destroyed mid-epoch it stops promptly, and held batches stay valid") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(200));
  LoaderOptions options = Small(TransformKind::kEval);
  options.prefetch_batches = 4;
  std::shared_ptr<const Batch> kept;
  const auto start = std::chrono::steady_clock::now();
  {
    auto loader = Loader::Create(OpenShared(dir / "ds"), options);
    REQUIRE(loader.ok());
    auto batch = (*loader)->Next();
    REQUIRE(batch.ok());
    kept = *batch;
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE(kept != nullptr);
  std::uint64_t sum = 0;  // touches every byte of the kept batch (ASan watches)
  for (const std::uint8_t b : kept->images()) sum += b;
  CHECK(sum > 0);
  CHECK(kept->size() == 8);
}

TEST_CASE("loader: options that cannot work are refused by name") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(3));
  auto reader = OpenShared(dir / "ds");
  LoaderOptions options;
  options.batch_size = 0;
  CHECK(Loader::Create(reader, options).status().message().find("batch_size") != std::string::npos);
  options = {};
  options.rank = 2;
  options.world_size = 2;
  CHECK(Loader::Create(reader, options).status().message().find("rank") != std::string::npos);
  options = {};
  options.transform = TransformKind::kTrain;
  options.min_scale = 0;
  CHECK(Loader::Create(reader, options).status().code() == StatusCode::kInvalidArgument);
  CHECK(Loader::Create(nullptr, {}).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace packrec
