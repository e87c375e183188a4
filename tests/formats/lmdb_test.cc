// What only the LMDB format has: map growth, compaction, read-only file systems.
#include <doctest/doctest.h>

#include "core/random.h"
#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

WriterOptions Lmdb() {
  WriterOptions options;
  options.format = "lmdb";
  return options;
}

TEST_CASE(
    "lmdb: a map that is too small grows instead of failing, and the file holds only its data") {
  test::TempDir dir;
  std::vector<test::TestRecord> records;
  SplitMix64 random(9);
  for (std::uint32_t i = 0; i < 40; ++i) {
    std::vector<std::byte> bytes(100 << 10);  // incompressible, 4 MiB in all
    for (std::byte& b : bytes) b = static_cast<std::byte>(random.Next());
    records.push_back({"big/" + std::to_string(i) + ".bin", i % 3, std::move(bytes)});
  }
  std::uint64_t payload = 0;
  for (const auto& r : records) payload += r.bytes.size();
  REQUIRE(payload > (2u << 20));
  WriterOptions options = Lmdb();
  options.map_size_bytes = 1 << 20;  // 1 MiB: must double a few times
  options.commit_records = 10;
  test::WriteDataset(dir / "ds", records, options);
  CHECK_FALSE(fs::exists(dir / "ds" / "lock.mdb"));  // readers make their own
  auto reader = OpenDataset(dir / "ds");
  REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
  ReadScratch scratch;
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto view = (*reader)->Read(i, scratch);
    REQUIRE(view.ok());
    CHECK(test::Copy(view->bytes) == records[i].bytes);
  }
  // Compacted: no free pages, no map-sized sparse file; and no scratch environment left.
  const auto size = fs::file_size(dir / "ds" / "data.mdb");
  CHECK(size < payload + payload / 4 + (64u << 10));
  CHECK_FALSE(fs::exists(dir / "ds" / ".packrec-compact"));
}

TEST_CASE("lmdb: a dataset on a read-only file system opens without a lock file") {
  test::TempDir dir;
  const fs::path mount_point = dir / "ro";
  test::ScopedTmpfs tmpfs(mount_point, "16m");
  if (!tmpfs.mounted()) {
    MESSAGE("skipped: cannot mount a tmpfs here (needs root)");
    return;
  }
  const auto records = test::MakeRecords(10);
  test::WriteDataset(mount_point / "ds", records, Lmdb());
  fs::remove(mount_point / "ds" / "lock.mdb");
  REQUIRE(tmpfs.RemountReadOnly());
  auto reader = OpenDataset(mount_point / "ds");
  REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
  ReadScratch scratch;
  auto view = (*reader)->Read(9, scratch);
  REQUIRE(view.ok());
  CHECK(test::Copy(view->bytes) == records[9].bytes);
  CHECK_FALSE(fs::exists(mount_point / "ds" / "lock.mdb"));
}

TEST_CASE("lmdb: an LMDB environment packrec did not write is refused by name") {
  test::TempDir dir;
  // A real LMDB environment without packrec's manifest key: what another tool wrote.
  WriterOptions options = Lmdb();
  test::WriteDataset(dir / "ours", test::MakeRecords(2), options);
  auto reader = OpenDataset(dir / "ours");
  REQUIRE(reader.ok());
  // Random bytes where data.mdb should be.
  std::vector<std::byte> noise(64 << 10);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::byte>(i * 13 + 7);
  test::WriteBytes(dir / "noise" / "data.mdb", noise);
  auto refused = OpenDataset(dir / "noise");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("data.mdb") != std::string::npos);
}

}  // namespace
}  // namespace packrec
