// What only the LMDB format has: map growth, compaction, read-only file systems, Caffe Datum
// values.
#include <doctest/doctest.h>

#include "core/random.h"
#include "lmdb/lmdb_layout.h"
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
  options.lmdb.map_size_bytes = 1 << 20;  // 1 MiB: must double a few times
  options.lmdb.commit_records = 10;
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

TEST_CASE("lmdb caffe-datum: the wire encoding parses back, and damaged values never do") {
  std::vector<std::byte> header(lmdb::kValueHeaderSize, std::byte{7});
  std::vector<std::byte> payload(300);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 31);
  std::vector<std::byte> value = lmdb::DatumPrefix(header, "cls/a.jpg", payload.size());
  value.insert(value.end(), payload.begin(), payload.end());
  const std::vector<std::byte> suffix = lmdb::DatumSuffix(1234567);
  value.insert(value.end(), suffix.begin(), suffix.end());
  lmdb::DatumFields fields;
  REQUIRE(lmdb::ParseDatum(value, &fields));
  CHECK(test::Copy(fields.data) == payload);
  CHECK(fields.label == 1234567);
  CHECK(fields.has_label);
  CHECK(fields.encoded);
  CHECK(fields.packrec.size() == lmdb::kValueHeaderSize + 9);
  // Every prefix cut short fails (nothing reads past the end; ASan watches).
  for (std::size_t size = 0; size < value.size(); ++size) {
    std::vector<std::byte> cut(value.begin(), value.begin() + static_cast<std::ptrdiff_t>(size));
    lmdb::DatumFields ignored;
    // A cut exactly between whole fields may still parse (protobuf has no end marker); then the
    // label or encoded flag is missing, which the reader refuses.
    if (lmdb::ParseDatum(cut, &ignored)) CHECK_FALSE((ignored.has_label && ignored.encoded));
  }
  // Random damage anywhere: parse or refuse, never crash.
  SplitMix64 random(4);
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::byte> damaged = value;
    damaged[random.Below(damaged.size())] = static_cast<std::byte>(random.Next());
    lmdb::DatumFields ignored;
    (void)lmdb::ParseDatum(damaged, &ignored);
  }
  // A repeated data field is refused.
  std::vector<std::byte> twice = value;
  const std::vector<std::byte> again = lmdb::DatumPrefix(header, "x", 0);
  twice.insert(twice.end(), again.begin(), again.end());
  CHECK_FALSE(lmdb::ParseDatum(twice, &fields));
}

TEST_CASE("lmdb caffe-datum: no manifest key in the database, options that cannot work refused") {
  test::TempDir dir;
  WriterOptions options = Lmdb();
  options.lmdb.values = LmdbValues::kCaffeDatum;
  const auto records = test::MakeRecords(5);
  test::WriteDataset(dir / "ds", records, options);
  CHECK(fs::exists(dir / "ds" / "packrec-manifest.json"));
  auto reader = OpenDataset(dir / "ds");
  REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
  CHECK((*reader)->size() == 5);
  // Without the manifest file the database is not a packrec dataset: said by name.
  fs::remove(dir / "ds" / "packrec-manifest.json");
  auto orphan = OpenDataset(dir / "ds");
  REQUIRE_FALSE(orphan.ok());
  CHECK(orphan.status().message().find("packrec-manifest.json") != std::string::npos);

  WriterOptions zstd = options;
  zstd.compression = Compression::kZstd;
  auto refused = CreateDatasetWriter(dir / "z", zstd);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  WriterOptions shard = options;
  shard.format = "shard";
  CHECK(CreateDatasetWriter(dir / "s", shard).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace packrec
