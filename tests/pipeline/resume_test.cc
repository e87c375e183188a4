// Deterministic, resumable, elastic loading over real shard datasets of real JPEGs: the epoch
// sequence as a function, thread-count independence, stop-save-resume equal to an uninterrupted
// epoch, the same global sequence on 1, 2 and 4 ranks, exact epochs, and refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "formats/shard_test_util.h"
#include "packrec/convert.h"
#include "packrec/loader.h"
#include "packrec/synth.h"
#include "pipeline/epoch_sequence.h"

namespace packrec {
namespace {

using test::OpenShared;

LoaderOptions Small() {
  LoaderOptions options;
  options.batch_size = 6;
  options.threads = 2;
  options.prefetch_batches = 3;
  options.output_size = 16;
  options.resize_size = 18;
  options.transform =
      TransformKind::kTrain;  // random crops: pixels depend on (seed, epoch, record)
  options.seed = 11;
  options.shuffle_window = 8;
  return options;
}

// What a run of batches delivered: the record indices in order, and every image byte.
struct Delivered {
  std::vector<std::uint64_t> records;
  std::vector<std::uint8_t> pixels;
  std::uint64_t batches = 0;
  std::uint64_t padded = 0;

  void Add(const Batch& batch) {
    records.insert(records.end(), batch.record_indices().begin(), batch.record_indices().end());
    pixels.insert(pixels.end(), batch.images().begin(), batch.images().end());
    ++batches;
    padded += batch.padded();
  }
  void Append(const Delivered& more) {
    records.insert(records.end(), more.records.begin(), more.records.end());
    pixels.insert(pixels.end(), more.pixels.begin(), more.pixels.end());
    batches += more.batches;
    padded += more.padded;
  }
};

// Up to `limit` batches of the current epoch (all of them by default).
Delivered Take(Loader& loader, std::uint64_t limit = ~std::uint64_t{0}) {
  Delivered out;
  while (out.batches < limit) {
    auto batch = loader.Next();
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    if (*batch == nullptr) break;
    out.Add(**batch);
  }
  return out;
}

std::unique_ptr<Loader> Make(std::shared_ptr<const Reader> reader, const LoaderOptions& options,
                             const std::optional<LoaderState>& resume = std::nullopt) {
  auto loader = Loader::Create(std::move(reader), options, resume);
  REQUIRE_MESSAGE(loader.ok(), loader.status().ToString());
  return std::move(*loader);
}

// The state after a checkpoint's round trip through its JSON text.
LoaderState ThroughJson(const LoaderState& state) {
  auto parsed = LoaderState::FromJson(state.ToJson());
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  return *parsed;
}

TEST_CASE("epoch sequence: a permutation for every size and mode, fixed by its inputs") {
  for (const ShuffleMode mode :
       {ShuffleMode::kNone, ShuffleMode::kGlobal, ShuffleMode::kWindowed}) {
    for (const std::uint64_t size :
         {0ull, 1ull, 2ull, 3ull, 7ull, 8ull, 9ull, 63ull, 64ull, 65ull, 1000ull, 4099ull}) {
      LoaderOptions options;
      options.shuffle = mode;
      options.shuffle_window = 8;
      options.seed = 5;
      const EpochSequence sequence(size, options, 2);
      REQUIRE(sequence.length() == size);
      std::vector<std::uint64_t> seen;
      for (std::uint64_t p = 0; p < size; ++p) seen.push_back(sequence.At(p));
      std::vector<std::uint64_t> sorted = seen;
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::uint64_t> identity(size);
      std::iota(identity.begin(), identity.end(), std::uint64_t{0});
      CHECK_MESSAGE(sorted == identity, "size ", size, " mode ", ShuffleModeName(mode));
      // Recomputed from scratch: the same (a pure function).
      const EpochSequence again(size, options, 2);
      for (std::uint64_t p = 0; p < size; ++p) REQUIRE(again.At(p) == seen[p]);
      if (mode != ShuffleMode::kNone && size >= 64) {
        CHECK(seen != identity);
        const EpochSequence next_epoch(size, options, 3);
        std::uint64_t same = 0;
        for (std::uint64_t p = 0; p < size; ++p) same += next_epoch.At(p) == seen[p] ? 1 : 0;
        CHECK(same < size / 8);  // a new order each epoch, not a rotation of the old one
      }
      if (mode == ShuffleMode::kWindowed && size > 0) {
        // Windows of 8 neighbouring records, each visited once, contiguously.
        std::set<std::uint64_t> windows_done;
        for (std::uint64_t p = 0; p < size; p += 1) {
          const std::uint64_t window = seen[p] / 8;
          if (p == 0 || window != seen[p - 1] / 8) CHECK(windows_done.insert(window).second);
        }
        CHECK(windows_done.size() == (size + 7) / 8);
      }
    }
  }
}

TEST_CASE("epoch sequence: shuffled positions look uniform (no record sticks near its index)") {
  LoaderOptions options;
  options.seed = 1;
  const std::uint64_t size = 10000;
  const EpochSequence sequence(size, options, 0);
  // Mean displacement of a uniform permutation is size / 3; a weak shuffle stays far below.
  double displacement = 0;
  std::uint64_t first_half_in_first_half = 0;
  for (std::uint64_t p = 0; p < size; ++p) {
    const std::uint64_t record = sequence.At(p);
    displacement += record > p ? double(record - p) : double(p - record);
    if (p < size / 2 && record < size / 2) ++first_half_in_first_half;
  }
  displacement /= size;
  CHECK(displacement > size / 3.0 * 0.95);
  CHECK(displacement < size / 3.0 * 1.05);
  // Binomial(5000, 1/2)-like: 2500 +- a few standard deviations (35 each).
  CHECK(first_half_in_first_half > 2300);
  CHECK(first_half_in_first_half < 2700);
}

TEST_CASE("loader order and pixels do not depend on the thread count or prefetch depth") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(45));
  auto reader = OpenShared(dir / "ds");
  std::optional<Delivered> reference;
  for (const unsigned threads : {1u, 2u, 4u}) {
    for (const std::uint32_t prefetch : {1u, 5u}) {
      LoaderOptions options = Small();
      options.threads = threads;
      options.prefetch_batches = prefetch;
      auto loader = Make(reader, options);
      loader->StartEpoch(1);
      const Delivered run = Take(*loader);
      CHECK(run.records == EpochOrder(45, options, 1));
      if (!reference) {
        reference = run;
      } else {
        CHECK_MESSAGE(run.records == reference->records, threads, " threads");
        CHECK_MESSAGE(run.pixels == reference->pixels, threads, " threads");
      }
    }
  }
}

TEST_CASE("stop after k batches, save, resume: the concatenation is the uninterrupted epoch") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(47));
  auto reader = OpenShared(dir / "ds");
  for (const ShuffleMode mode :
       {ShuffleMode::kGlobal, ShuffleMode::kWindowed, ShuffleMode::kNone}) {
    for (const LastBatch last : {LastBatch::kShort, LastBatch::kPad, LastBatch::kDrop}) {
      LoaderOptions options = Small();
      options.shuffle = mode;
      options.last_batch = last;
      auto whole_loader = Make(reader, options);
      whole_loader->StartEpoch(3);
      const Delivered whole = Take(*whole_loader);
      const std::uint64_t batches = whole_loader->batches_per_epoch();
      REQUIRE(whole.batches == batches);
      for (std::uint64_t k = 0; k <= batches; ++k) {
        CAPTURE(k);
        CAPTURE(ShuffleModeName(mode));
        CAPTURE(LastBatchName(last));
        auto first = Make(reader, options);
        first->StartEpoch(3);
        Delivered run = Take(*first, k);
        const LoaderState saved = ThroughJson(first->State());
        CHECK(saved.epoch == 3);
        CHECK(saved.position == std::min<std::uint64_t>(k * 6, first->plan().global_records));
        first.reset();  // the job is gone; only the state survives
        auto resumed = Make(reader, options, saved);
        const Delivered rest = Take(*resumed);
        // O(1): the resumed loader read and decoded only what it delivered.
        CHECK(resumed->stats().images == rest.records.size());
        run.Append(rest);
        CHECK(run.records == whole.records);
        CHECK(run.pixels == whole.pixels);
        // Resume on a live loader (mid-epoch elsewhere) does the same.
        auto live = Make(reader, options);
        Take(*live, 2);
        REQUIRE(live->Resume(saved).ok());
        CHECK(Take(*live).records == rest.records);
      }
    }
  }
}

TEST_CASE("elastic: world_size 1, 2 and 4 with one global batch give one global sequence") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(50));
  auto reader = OpenShared(dir / "ds");
  for (const LastBatch last : {LastBatch::kShort, LastBatch::kPad, LastBatch::kDrop}) {
    CAPTURE(LastBatchName(last));
    LoaderOptions options = Small();
    options.last_batch = last;
    std::optional<std::vector<std::vector<std::uint64_t>>> reference;  // global batches
    for (const std::uint32_t world : {1u, 2u, 4u}) {
      options.world_size = world;
      options.batch_size = 12 / world;
      std::vector<std::vector<std::uint64_t>> global;
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        options.rank = rank;
        auto loader = Make(reader, options);
        loader->StartEpoch(2);
        std::uint64_t index = 0;
        for (;;) {
          auto batch = loader->Next();
          REQUIRE(batch.ok());
          if (*batch == nullptr) break;
          if (global.size() <= index) global.resize(index + 1);
          // Ranks in order: rank r's batch is the r-th slice of the global batch.
          global[index].insert(global[index].end(), (*batch)->record_indices().begin(),
                               (*batch)->record_indices().end());
          ++index;
        }
        CHECK(index == loader->batches_per_epoch());  // every rank takes the same steps
      }
      if (!reference) {
        reference = global;
      } else {
        CHECK_MESSAGE(global == *reference, "world_size ", world);
      }
    }
  }
}

TEST_CASE(
    "elastic resume: saved on 2 ranks, continued on 4 and on 1, the global sequence goes on") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(40));
  auto reader = OpenShared(dir / "ds");
  LoaderOptions one = Small();
  one.batch_size = 8;
  auto whole_loader = Make(reader, one);
  const Delivered whole = Take(*whole_loader);  // 5 global batches of 8
  // Two ranks of 4 take 2 steps; rank 1's state (any rank's) is saved.
  LoaderOptions two = one;
  two.world_size = 2;
  two.batch_size = 4;
  std::vector<std::uint64_t> sequence;
  std::vector<std::vector<std::uint64_t>> per_rank(2);
  std::optional<LoaderState> saved;
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    two.rank = rank;
    auto loader = Make(reader, two);
    for (int step = 0; step < 2; ++step) {
      auto batch = loader->Next();
      REQUIRE((batch.ok() && *batch != nullptr));
      per_rank[rank].insert(per_rank[rank].end(), (*batch)->record_indices().begin(),
                            (*batch)->record_indices().end());
    }
    saved = ThroughJson(loader->State());
  }
  for (int step = 0; step < 2; ++step) {
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      sequence.insert(sequence.end(), per_rank[rank].begin() + step * 4,
                      per_rank[rank].begin() + step * 4 + 4);
    }
  }
  REQUIRE(saved->position == 16);
  for (const std::uint32_t world : {4u, 1u}) {
    LoaderOptions next = one;
    next.world_size = world;
    next.batch_size = 8 / world;
    std::vector<std::vector<std::uint64_t>> global;
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      next.rank = rank;
      auto loader = Make(reader, next, *saved);
      std::uint64_t step = 0;
      for (;;) {
        auto batch = loader->Next();
        REQUIRE(batch.ok());
        if (*batch == nullptr) break;
        if (global.size() <= step) global.resize(step + 1);
        global[step].insert(global[step].end(), (*batch)->record_indices().begin(),
                            (*batch)->record_indices().end());
        ++step;
      }
    }
    std::vector<std::uint64_t> continued = sequence;
    for (const auto& batch : global) continued.insert(continued.end(), batch.begin(), batch.end());
    CHECK_MESSAGE(continued == whole.records, "resumed on world_size ", world);
  }
  // A global batch of 12 cannot continue from position 16: refused, by name.
  LoaderOptions other = one;
  other.batch_size = 12;
  auto refused = Loader::Create(reader, other, *saved);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("global batch") != std::string::npos);
  // A global batch of 4 divides 16: the sequence goes on in smaller steps.
  other.batch_size = 4;
  auto smaller = Make(reader, other, *saved);
  const Delivered rest = Take(*smaller);
  std::vector<std::uint64_t> continued = sequence;
  continued.insert(continued.end(), rest.records.begin(), rest.records.end());
  CHECK(continued == whole.records);
}

TEST_CASE("exact epochs: short, padded or dropped, reported in the plan and the batches") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(23));
  auto reader = OpenShared(dir / "ds");
  LoaderOptions options = Small();
  options.batch_size = 2;
  options.world_size = 4;  // global batch 8: 23 = 8 + 8 + 7
  for (const LastBatch last : {LastBatch::kShort, LastBatch::kPad, LastBatch::kDrop}) {
    CAPTURE(LastBatchName(last));
    options.last_batch = last;
    std::multiset<std::uint64_t> all;
    std::uint64_t padded = 0;
    std::vector<std::uint32_t> last_sizes;
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
      options.rank = rank;
      auto loader = Make(reader, options);
      const EpochPlan plan = loader->plan();
      const Delivered run = Take(*loader);
      all.insert(run.records.begin(), run.records.end());
      padded += run.padded;
      CHECK(run.records.size() == plan.records);
      CHECK(run.batches == plan.batches);
      if (last == LastBatch::kShort) {
        CHECK(plan.batches == 3);
        CHECK(plan.padded == 0);
        CHECK(plan.dropped == 0);
      } else if (last == LastBatch::kPad) {
        CHECK(plan.batches == 3);
        CHECK(plan.padded == 1);
        CHECK(plan.records == 6);
      } else {
        CHECK(plan.batches == 2);
        CHECK(plan.dropped == 7);
      }
    }
    const std::set<std::uint64_t> distinct(all.begin(), all.end());
    if (last == LastBatch::kShort) {
      CHECK(all.size() == 23);  // every record exactly once across the ranks
      CHECK(distinct.size() == 23);
    } else if (last == LastBatch::kPad) {
      CHECK(all.size() == 24);  // every batch full; one repeat, reported
      CHECK(distinct.size() == 23);
      CHECK(padded == 1);
    } else {
      CHECK(all.size() == 16);
      CHECK(distinct.size() == 16);
    }
  }
}

TEST_CASE("resume refuses another dataset, another order and a state that is not one") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", test::MakeRecords(30));
  test::WriteDataset(dir / "more", test::MakeRecords(31));
  auto reader = OpenShared(dir / "ds");
  LoaderOptions options = Small();
  auto loader = Make(reader, options);
  Take(*loader, 2);
  const LoaderState saved = loader->State();
  CHECK(saved.fingerprint == DatasetFingerprint(reader->info()));

  const auto refused = [&](std::shared_ptr<const Reader> on, const LoaderOptions& with,
                           const std::string& names) {
    auto made = Loader::Create(std::move(on), with, saved);
    REQUIRE_FALSE(made.ok());
    CHECK(made.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(made.status().message().find(names) != std::string::npos,
                  made.status().message());
  };
  refused(OpenShared(dir / "more"), options, "fingerprint");
  LoaderOptions changed = options;
  changed.seed = 12;
  refused(reader, changed, "seed");
  changed = options;
  changed.shuffle = ShuffleMode::kWindowed;
  refused(reader, changed, "shuffle");
  changed = options;
  changed.last_batch = LastBatch::kPad;
  refused(reader, changed, "last_batch");
  // Resume on a live loader: refused, and the loader goes on where it was.
  auto live = Make(OpenShared(dir / "more"), options);
  Take(*live, 1);
  CHECK_FALSE(live->Resume(saved).ok());
  CHECK(live->State().position == 6);

  // A damaged or foreign state is refused by field, not resumed somewhere else.
  std::string text = saved.ToJson();
  CHECK(LoaderState::FromJson("{}").status().message().find("kind") != std::string::npos);
  CHECK(LoaderState::FromJson("not json").status().code() == StatusCode::kInvalidInput);
  std::string no_position = text;
  no_position.replace(no_position.find("\"position\""), 10, "\"posit1on\"");
  CHECK(LoaderState::FromJson(no_position).status().message().find("position") !=
        std::string::npos);
  std::string negative = text;
  negative.replace(negative.find("\"epoch\":0"), 9, "\"epoch\":-1");
  CHECK(LoaderState::FromJson(negative).status().message().find("epoch") != std::string::npos);
  std::string newer = text;
  newer.replace(newer.find("\"version\":1"), 11, "\"version\":9");
  CHECK(LoaderState::FromJson(newer).status().code() == StatusCode::kNotSupported);
}

TEST_CASE("fingerprint: one listing in every format agrees; another listing or order does not") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 4, 1, 40);
  const auto convert = [&](const std::string& format, const std::string& name,
                           std::optional<std::uint64_t> shuffle_seed) {
    ConvertOptions options;
    options.source = dir / "tree";
    options.output = dir / name;
    options.writer.format = format;
    options.shuffle_seed = shuffle_seed;
    options.threads = 1;
    auto stats = Convert(options);
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
    return DatasetFingerprint(OpenShared(dir / name)->info());
  };
  const std::string shard = convert("shard", "a.pkr", std::nullopt);
  CHECK(convert("lmdb", "a.lmdb", std::nullopt) == shard);
  CHECK(convert("hdf5", "a.h5", std::nullopt) == shard);
  CHECK(convert("shard", "shuffled.pkr", 7) != shard);
  // One image fewer in the listing.
  const std::filesystem::path first_class = *std::filesystem::directory_iterator(dir / "tree");
  REQUIRE(std::filesystem::remove(std::filesystem::directory_iterator(first_class)->path()));
  CHECK(convert("shard", "fewer.pkr", std::nullopt) != shard);
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

// A dataset of 60 records in a multiple of 4 shard files (at least 8).
std::shared_ptr<const Reader> ManyShards(const test::TempDir& dir) {
  const auto records = test::MakeRecords(60);
  for (std::uint64_t size = 24 << 10; size >= 4096; size -= 1024) {
    const std::filesystem::path path = dir / ("ds-" + std::to_string(size));
    WriterOptions options;
    options.shard_size_bytes = size;
    test::WriteDataset(path, records, options);
    auto reader = OpenShared(path);
    const std::size_t files = reader->info().files.size();
    if (files % 4 == 0 && files >= 8) return reader;
  }
  FAIL("no shard size gave a multiple of 4 files");
  return nullptr;
}

// The file each record lies in.
std::vector<std::size_t> FileOf(const Reader& reader) {
  std::vector<std::size_t> file(reader.size());
  for (std::size_t f = 0; f < reader.info().files.size(); ++f) {
    const DatasetFileInfo& info = reader.info().files[f];
    for (std::uint64_t i = 0; i < info.record_count; ++i) file[info.first_record + i] = f;
  }
  return file;
}

TEST_CASE("shuffle shards: each rank reads only its own files, new ones each epoch") {
  test::TempDir dir;
  auto reader = ManyShards(dir);
  const std::vector<std::size_t> file_of = FileOf(*reader);
  for (const std::uint32_t world : {2u, 4u}) {
    for (const LastBatch last : {LastBatch::kPad, LastBatch::kDrop}) {
      CAPTURE(world);
      CAPTURE(LastBatchName(last));
      LoaderOptions options = Small();
      options.shuffle = ShuffleMode::kShards;
      options.world_size = world;
      options.batch_size = 4;
      options.last_batch = last;
      std::vector<std::set<std::size_t>> files_by_epoch_rank;
      for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
        std::set<std::size_t> seen_files;
        std::multiset<std::uint64_t> all;
        std::uint64_t padded = 0;
        std::optional<std::uint64_t> steps;
        for (std::uint32_t rank = 0; rank < world; ++rank) {
          options.rank = rank;
          auto loader = Make(reader, options);
          loader->StartEpoch(epoch);
          const Delivered run = Take(*loader);
          if (!steps) steps = run.batches;
          CHECK(run.batches == *steps);  // the same steps on every rank
          std::set<std::size_t> mine;
          for (const std::uint64_t record : run.records) mine.insert(file_of[record]);
          for (const std::size_t f : mine) CHECK(seen_files.insert(f).second);  // disjoint files
          CHECK(mine.size() == reader->info().files.size() / world);
          all.insert(run.records.begin(), run.records.end());
          padded += run.padded;
          files_by_epoch_rank.push_back(mine);
          // The plan adds up: padding when padding, drops when dropping.
          const EpochPlan plan = loader->plan();
          CHECK(run.records.size() == plan.records);
          if (last == LastBatch::kPad) {
            CHECK(plan.dropped == 0);
          } else {
            CHECK(plan.padded == 0);
          }
        }
        const std::set<std::uint64_t> distinct(all.begin(), all.end());
        if (last == LastBatch::kPad) CHECK(distinct.size() == reader->size());  // all read
      }
      // Epoch 1 reassigned the files (with 8+ files and 2+ ranks, not all ranks keep theirs).
      bool moved = false;
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        moved = moved || files_by_epoch_rank[rank] != files_by_epoch_rank[world + rank];
      }
      CHECK(moved);
    }
  }
}

TEST_CASE("shuffle shards: resumes on the same world_size, refuses another, and checks options") {
  test::TempDir dir;
  auto reader = ManyShards(dir);
  LoaderOptions options = Small();
  options.shuffle = ShuffleMode::kShards;
  options.world_size = 2;
  options.rank = 1;
  options.batch_size = 4;
  options.last_batch = LastBatch::kPad;
  auto whole_loader = Make(reader, options);
  const Delivered whole = Take(*whole_loader);
  auto first = Make(reader, options);
  Delivered run = Take(*first, 2);
  const LoaderState saved = ThroughJson(first->State());
  CHECK(saved.shuffle == ShuffleMode::kShards);
  run.Append(Take(*Make(reader, options, saved)));
  CHECK(run.records == whole.records);
  LoaderOptions four = options;
  four.world_size = 4;
  four.batch_size = 2;  // the same global batch, but the order depends on world_size here
  auto refused = Loader::Create(reader, four, saved);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("world_size") != std::string::npos);

  LoaderOptions bad = options;
  bad.last_batch = LastBatch::kShort;
  CHECK(Loader::Create(reader, bad).status().message().find("pad or drop") != std::string::npos);
  bad = options;
  bad.world_size = 3;  // the file count is a multiple of 4
  bad.rank = 0;
  if (reader->info().files.size() % 3 != 0) {
    CHECK(Loader::Create(reader, bad).status().message().find("must divide") != std::string::npos);
  }
}

}  // namespace
}  // namespace packrec
