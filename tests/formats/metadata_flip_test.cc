// Every single-bit flip of one record's metadata (its LMDB value header and key; its entries in
// HDF5's per-record datasets) is refused on read or reported by Verify: none is delivered as if it
// were true. The shard format has had this coverage from its first version (shard_corruption_test).
#include <doctest/doctest.h>
#include <hdf5.h>
#include <lmdb.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lmdb/lmdb_layout.h"
#include "shard_test_util.h"
#include "storage/manifest_json.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

struct Delivered {
  std::string key;
  std::uint32_t label = 0, width = 0, height = 0, channels = 0;
  Encoding encoding = Encoding::kUnknown;
  std::vector<std::byte> bytes;
  bool operator==(const Delivered&) const = default;
};

Delivered Deliver(const RecordView& view) {
  return {std::string(view.key),
          view.label,
          view.width,
          view.height,
          view.channels,
          view.encoding,
          std::vector<std::byte>(view.bytes.begin(), view.bytes.end())};
}

struct FlipCounts {
  int flips = 0;
  int refused_at_open = 0;
  int refused_on_read = 0;
  int reported_by_verify = 0;
  int delivered_silently = 0;
};

// Flips each bit of `file` in [begin, end) in turn (and back), opening `dataset` after each:
// record `index` must then be refused at open or on read, or read exactly as before the flip;
// and Verify must report every flip that a read does not refuse.
void FlipEachBit(const fs::path& dataset, const fs::path& file, std::uint64_t begin,
                 std::uint64_t end, std::uint64_t index, const Delivered& original,
                 FlipCounts& counts) {
  const std::vector<std::byte> clean = test::ReadBytes(file);
  REQUIRE(end <= clean.size());
  for (std::uint64_t byte = begin; byte < end; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      CAPTURE(byte);
      CAPTURE(bit);
      std::vector<std::byte> damaged = clean;
      damaged[byte] ^= std::byte(1u << bit);
      test::WriteBytes(file, damaged);
      ++counts.flips;
      OpenOptions options;
      options.verify_checksums = false;  // what the Loader's fast path reads with
      auto reader = OpenDataset(dataset, options);
      if (!reader.ok()) {
        ++counts.refused_at_open;
        continue;
      }
      ReadScratch scratch;
      const Result<RecordView> view = (*reader)->Read(index, scratch);
      if (!view.ok()) {
        ++counts.refused_on_read;
        continue;
      }
      const bool same = Deliver(*view) == original;
      test::CollectingReporter reporter;
      const bool reported = (*reader)->Verify(reporter).problems > 0;
      counts.reported_by_verify += reported ? 1 : 0;
      if (!same && !reported) ++counts.delivered_silently;
      CHECK_MESSAGE((same || reported), "a flipped bit delivered as true");
    }
  }
  test::WriteBytes(file, clean);
}

Delivered ReadOriginal(const fs::path& dataset, std::uint64_t index) {
  auto reader = OpenDataset(dataset);
  REQUIRE(reader.ok());
  ReadScratch scratch;
  auto view = (*reader)->Read(index, scratch);
  REQUIRE(view.ok());
  return Deliver(*view);
}

TEST_CASE("metadata flips: every bit of an LMDB value header and key is refused or reported") {
  test::TempDir dir;
  const std::vector<test::TestRecord> records = test::MakeRecords(6);
  WriterOptions options;
  options.format = "lmdb";
  for (const LmdbValues values : {LmdbValues::kPackrec, LmdbValues::kCaffeDatum}) {
    CAPTURE(static_cast<int>(values));
    options.lmdb.values = values;
    const fs::path dataset = dir / (values == LmdbValues::kPackrec ? "packrec" : "datum");
    test::WriteDataset(dataset, records, options);
    constexpr std::uint64_t kIndex = 4;
    const Delivered original = ReadOriginal(dataset, kIndex);
    // The value's header: the magic, then (48 bytes on) the key; unique in the file.
    const std::vector<std::byte> file = test::ReadBytes(dataset / "data.mdb");
    const std::string& key = records[kIndex].key;
    std::uint64_t header = file.size();
    for (std::uint64_t at = 0; at + 48 + key.size() <= file.size(); ++at) {
      if (std::memcmp(&file[at], "PKRV", 4) == 0 &&
          std::memcmp(&file[at + 48], key.data(), key.size()) == 0) {
        header = at;
        break;
      }
    }
    REQUIRE(header < file.size());
    FlipCounts counts;
    FlipEachBit(dataset, dataset / "data.mdb", header, header + 48 + key.size(), kIndex, original,
                counts);
    CHECK(counts.flips == static_cast<int>((48 + key.size()) * 8));
    CHECK(counts.delivered_silently == 0);
    MESSAGE("lmdb flips: " << counts.flips << ", refused at open " << counts.refused_at_open
                           << ", on read " << counts.refused_on_read << ", delivered silently "
                           << counts.delivered_silently);
  }
}

// Where element `index` of the 1-D dataset `name` lies in the file, and its size.
std::pair<std::uint64_t, std::uint64_t> ElementPlace(hid_t file, const char* name,
                                                     std::uint64_t index) {
  const hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
  REQUIRE(dataset >= 0);
  const haddr_t offset = H5Dget_offset(dataset);
  const hid_t type = H5Dget_type(dataset);
  const std::uint64_t size = H5Tget_size(type);
  H5Tclose(type);
  H5Dclose(dataset);
  REQUIRE(offset != HADDR_UNDEF);
  return {offset + index * size, size};
}

TEST_CASE("metadata flips: every bit of an HDF5 record's metadata is refused or reported") {
  test::TempDir dir;
  const std::vector<test::TestRecord> records = test::MakeRecords(6);
  WriterOptions options;
  options.format = "hdf5";
  const fs::path dataset = dir / "data.h5";
  test::WriteDataset(dataset, records, options);
  constexpr std::uint64_t kIndex = 4;
  const Delivered original = ReadOriginal(dataset, kIndex);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> places;  // file offset, bytes
  {
    const hid_t file = H5Fopen(dataset.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    REQUIRE(file >= 0);
    for (const char* name : {"labels", "width", "height", "channels", "encoding", "flags",
                             "raw_sizes", "meta_checksums"}) {
      places.push_back(ElementPlace(file, name, kIndex));
    }
    // The key's bytes, and both its offsets in /key_offsets.
    const auto [first_offset, offset_size] = ElementPlace(file, "key_offsets", kIndex);
    places.push_back({first_offset, 2 * offset_size});
    std::uint64_t key_offsets[2] = {};
    const hid_t key_offsets_set = H5Dopen2(file, "key_offsets", H5P_DEFAULT);
    const hsize_t start = kIndex, count = 2;
    const hid_t space = H5Dget_space(key_offsets_set);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    const hid_t memory = H5Screate_simple(1, &count, nullptr);
    REQUIRE(H5Dread(key_offsets_set, H5T_NATIVE_UINT64, memory, space, H5P_DEFAULT, key_offsets) >=
            0);
    H5Sclose(memory);
    H5Sclose(space);
    H5Dclose(key_offsets_set);
    const auto [key_start, byte_size] = ElementPlace(file, "key_bytes", key_offsets[0]);
    places.push_back({key_start, (key_offsets[1] - key_offsets[0]) * byte_size});
    H5Fclose(file);
  }
  FlipCounts counts;
  std::uint64_t bits = 0;
  for (const auto& [offset, size] : places) {
    FlipEachBit(dataset, dataset, offset, offset + size, kIndex, original, counts);
    bits += size * 8;
  }
  CHECK(counts.flips == static_cast<int>(bits));
  CHECK(counts.delivered_silently == 0);
  MESSAGE("hdf5 flips: " << counts.flips << ", refused at open " << counts.refused_at_open
                         << ", on read " << counts.refused_on_read << ", delivered silently "
                         << counts.delivered_silently);
}

TEST_CASE("an HDF5 label outside 0..2^32-1 is refused on read, in any layout version") {
  test::TempDir dir;
  WriterOptions options;
  options.format = "hdf5";
  const fs::path dataset = dir / "data.h5";
  test::WriteDataset(dataset, test::MakeRecords(3), options);
  {
    const hid_t file = H5Fopen(dataset.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    const hid_t labels = H5Dopen2(file, "labels", H5P_DEFAULT);
    const std::int64_t values[3] = {0, -1, 2};
    REQUIRE(H5Dwrite(labels, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    H5Dclose(labels);
    H5Fclose(file);
  }
  auto reader = OpenDataset(dataset);
  REQUIRE(reader.ok());
  ReadScratch scratch;
  const auto damaged = (*reader)->Read(1, scratch);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == StatusCode::kCorruption);
  CHECK_MESSAGE(damaged.status().message().find("label -1") != std::string::npos,
                damaged.status().ToString());
  CHECK((*reader)->Read(0, scratch).ok());
}

// Datasets written before layout version 2 still open and read; their metadata is reported as
// not covered. An LMDB dataset is turned into version 1 here as the version 1 spec says (40-byte
// headers, format_version 1); the HDF5 file is one the previous packrec wrote (tests/golden).
TEST_CASE("layout version 1 datasets still read, their metadata reported as not covered") {
  test::TempDir dir;
  const std::vector<test::TestRecord> records = test::MakeRecords(5);
  WriterOptions options;
  options.format = "lmdb";
  test::WriteDataset(dir / "lmdb", records, options);
  {
    MDB_env* env = nullptr;
    REQUIRE(mdb_env_create(&env) == 0);
    REQUIRE(mdb_env_open(env, (dir / "lmdb").c_str(), 0, 0644) == 0);
    MDB_txn* txn = nullptr;
    REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
    MDB_dbi dbi = 0;
    REQUIRE(mdb_dbi_open(txn, nullptr, 0, &dbi) == 0);
    for (std::uint64_t i = 0; i < records.size(); ++i) {
      const auto key_bytes = lmdb::RecordKey(i);
      MDB_val key{key_bytes.size(), const_cast<std::byte*>(key_bytes.data())};
      MDB_val value;
      REQUIRE(mdb_get(txn, dbi, &key, &value) == 0);
      std::vector<std::byte> v2(static_cast<std::byte*>(value.mv_data),
                                static_cast<std::byte*>(value.mv_data) + value.mv_size);
      std::vector<std::byte> v1(v2.begin(), v2.begin() + 40);  // without header_checksum
      v1[4] = std::byte{1};
      v1.insert(v1.end(), v2.begin() + 48, v2.end());
      MDB_val replaced{v1.size(), v1.data()};
      REQUIRE(mdb_put(txn, dbi, &key, &replaced, 0) == 0);
    }
    MDB_val manifest_key{lmdb::kManifestKey.size(), const_cast<char*>(lmdb::kManifestKey.data())};
    MDB_val manifest_value;
    REQUIRE(mdb_get(txn, dbi, &manifest_key, &manifest_value) == 0);
    auto manifest = ParseManifestJson(
        std::string_view(static_cast<const char*>(manifest_value.mv_data), manifest_value.mv_size),
        "test", lmdb::kManifestFormatName, 2);
    REQUIRE(manifest.ok());
    manifest->format_version = 1;
    auto text = SerializeManifestJson(*manifest);
    REQUIRE(text.ok());
    MDB_val rewritten{text->size(), text->data()};
    REQUIRE(mdb_put(txn, dbi, &manifest_key, &rewritten, 0) == 0);
    REQUIRE(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
    fs::remove(dir / "lmdb" / "lock.mdb");
  }
  for (const fs::path& dataset :
       {dir / "lmdb", fs::path(PACKREC_GOLDEN_DIR) / "hdf5-v1" / "encoded.h5"}) {
    CAPTURE(dataset);
    auto reader = OpenDataset(dataset);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    CHECK((*reader)->info().format_version == 1);
    CHECK_FALSE((*reader)->info().metadata_checksummed);
    test::CollectingReporter reporter;
    CHECK((*reader)->Verify(reporter).problems == 0);
    const test::CommandResult verified = test::RunCli("verify " + test::Quote(dataset));
    CHECK_MESSAGE(verified.exit_code == 0, verified.output);
    CHECK_MESSAGE(verified.output.find("under no checksum") != std::string::npos, verified.output);
  }
  auto lmdb_reader = OpenDataset(dir / "lmdb");
  REQUIRE(lmdb_reader.ok());
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < records.size(); ++i) {
    auto view = (*lmdb_reader)->Read(i, scratch);
    REQUIRE(view.ok());
    CHECK(view->key == records[i].key);
    CHECK(view->label == records[i].label);
    CHECK(test::Copy(view->bytes) == records[i].bytes);
  }
  // A version 2 dataset has its metadata covered, and verify says nothing of it.
  options.format = "hdf5";
  test::WriteDataset(dir / "v2.h5", records, options);
  const test::CommandResult verified = test::RunCli("verify " + test::Quote(dir / "v2.h5"));
  CHECK(verified.exit_code == 0);
  CHECK(verified.output.find("under no checksum") == std::string::npos);
}

}  // namespace
}  // namespace packrec
