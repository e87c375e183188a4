// Datasets on shared storage: many readers at once, on a writable directory and on a read-only
// mount, and not one byte or file written next to the data by any format's reader or the loader.
#include <doctest/doctest.h>

#include <thread>

#include "formats/shard_test_util.h"
#include "packrec/convert.h"
#include "packrec/dataset_ops.h"
#include "packrec/loader.h"
#include "packrec/synth.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

void MakeAll(const fs::path& tree, const fs::path& into) {
  SynthOptions synth;
  synth.classes = 3;
  synth.per_class = 8;
  synth.mean_width = 48;
  synth.mean_height = 40;
  REQUIRE(WriteSyntheticTree(tree, synth).ok());
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    ConvertOptions options;
    options.source = tree;
    options.output = into / ("ds-" + format);
    options.writer.format = format;
    options.threads = 1;
    auto stats = Convert(options);
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  }
}

// Four readers at once (as four machines would), each reading every record, plus a verify and
// a loader epoch.
void ReadEverything(const fs::path& path) {
  auto opened = OpenDataset(path);
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  std::shared_ptr<const Reader> reader(std::move(*opened));
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> read(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto own = OpenDataset(path);  // its own handle, as another process would have
      if (!own.ok()) return;
      ReadScratch scratch;
      for (std::uint64_t i = 0; i < (*own)->size(); ++i) read[t] += (*own)->Read(i, scratch).ok();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::uint64_t n : read) CHECK(n == reader->size());
  test::CollectingReporter problems;
  VerifyDataset(*reader, {}, problems);
  CHECK(problems.problems.empty());
  LoaderOptions options;
  options.batch_size = 5;
  options.threads = 2;
  options.output_size = 16;
  options.resize_size = 18;
  auto loader = Loader::Create(reader, options);
  REQUIRE(loader.ok());
  std::uint64_t images = 0;
  for (auto batch = (*loader)->Next(); batch.ok() && *batch != nullptr; batch = (*loader)->Next()) {
    images += (*batch)->size();
  }
  CHECK(images == reader->size());
}

TEST_CASE("readers of every format write nothing next to the data, even where they could") {
  test::TempDir dir;
  MakeAll(dir / "tree", dir / "data");
  const auto before = test::SnapshotTree(dir / "data");
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    ReadEverything(dir / "data" / ("ds-" + format));
  }
  CHECK(test::SnapshotTree(dir / "data") == before);  // no lock.mdb, no new or changed file
}

TEST_CASE("every format reads from a read-only mount") {
  test::TempDir dir;
  test::ScopedTmpfs tmpfs(dir / "ro", "32m");
  if (!tmpfs.mounted()) {
    MESSAGE("skipped: cannot mount a tmpfs here (not root)");
    return;
  }
  MakeAll(dir / "tree", dir / "ro");
  REQUIRE(tmpfs.RemountReadOnly());
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    ReadEverything(dir / "ro" / ("ds-" + format));
  }
}

}  // namespace
}  // namespace packrec
