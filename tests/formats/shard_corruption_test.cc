#include <doctest/doctest.h>

#include "core/checksum.h"
#include "core/random.h"
#include "shard/manifest.h"
#include "shard/shard_layout.h"
#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::Copy;

std::string ManifestText(const fs::path& dataset) {
  const auto bytes = test::ReadBytes(dataset / "manifest.json");
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Rewrites a shard with `bytes`, recomputing the index checksum, the footer and the manifest's
// size and checksum, so only the deliberate damage remains: what a crafted file looks like.
void ResealShard(const fs::path& dataset, const std::string& file, std::vector<std::byte> bytes) {
  using namespace shard;
  Footer footer;
  auto tail = std::span<std::byte>(bytes).last<kFooterSize>();
  REQUIRE(DecodeFooter(tail, &footer) == DecodeError::kNone);
  footer.metadata_xxh64 = Xxh64(std::span<const std::byte>(bytes).subspan(
      footer.keys_offset, bytes.size() - kFooterSize - footer.keys_offset));
  EncodeFooter(footer, tail);
  test::WriteBytes(dataset / file, bytes);
  auto manifest = ParseManifest(ManifestText(dataset), "manifest.json");
  REQUIRE(manifest.ok());
  for (ManifestShard& entry : manifest->shards) {
    if (entry.file == file) {
      entry.size_bytes = bytes.size();
      entry.xxh64 = Xxh64(bytes);
    }
  }
  test::WriteText(dataset / "manifest.json", *SerializeManifest(*manifest));
}

struct Fixture {
  test::TempDir dir;
  fs::path ds = dir / "ds";
  std::vector<test::TestRecord> records = test::MakeRecords(30);
  Fixture() {
    WriterOptions options;
    options.shard_size_bytes = 16 << 10;  // several shards
    test::WriteDataset(ds, records, options);
  }
  std::unique_ptr<Reader> Open(bool allow_damaged = false) const {
    OpenOptions options;
    options.allow_damaged_shards = allow_damaged;
    auto reader = OpenDataset(ds, options);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    return std::move(reader).value();
  }
  Status OpenError() const {
    auto reader = OpenDataset(ds);
    REQUIRE_FALSE(reader.ok());
    return reader.status();
  }
};

TEST_CASE("a flipped byte in a payload: verify names shard, record and key and only it fails") {
  Fixture f;
  const auto reader_before = f.Open();
  ReadScratch scratch;
  const std::uint64_t target = 17;
  auto view = reader_before->Read(target, scratch);
  REQUIRE(view.ok());
  const std::string key(view->key);
  // Find the shard and the offset of record 17 inside it.
  std::string shard_file;
  for (const auto& file : reader_before->info().files) {
    if (target >= file.first_record && target < file.first_record + file.record_count) {
      shard_file = file.file;
    }
  }
  const auto shard_bytes = test::ReadBytes(f.ds / shard_file);
  const auto* base = shard_bytes.data();
  // The view points into the mapping of the same file: find its offset by content.
  const auto it =
      std::search(shard_bytes.begin(), shard_bytes.end(), view->bytes.begin(), view->bytes.end());
  REQUIRE(it != shard_bytes.end());
  const auto offset = static_cast<std::uint64_t>(&*it - base);
  test::FlipByte(f.ds / shard_file, offset + view->bytes.size() / 2);

  const auto reader = f.Open();  // payloads are not hashed at open
  auto damaged = reader->Read(target, scratch);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == StatusCode::kCorruption);
  const std::string& message = damaged.status().message();
  CHECK(message.find(shard_file) != std::string::npos);
  CHECK(message.find("record 17") != std::string::npos);
  CHECK(message.find(key) != std::string::npos);
  CHECK(message.find("checksum mismatch") != std::string::npos);
  CHECK(message.find("byte offset " + std::to_string(offset)) != std::string::npos);
  for (std::uint64_t i = 0; i < f.records.size(); ++i) {
    if (i == target) continue;
    auto other = reader->Read(i, scratch);
    REQUIRE(other.ok());
    CHECK(Copy(other->bytes) == f.records[i].bytes);
  }
  test::CollectingReporter reporter;
  const VerifyStats stats = reader->Verify(reporter);
  REQUIRE(stats.problems == 1);
  const VerifyProblem& problem = reporter.problems[0];
  CHECK(problem.file == shard_file);
  CHECK(problem.record_index == target);
  CHECK(problem.key == key);
  CHECK(problem.byte_offset == offset);
  CHECK(stats.records_checked == f.records.size());
}

TEST_CASE("a shard truncated anywhere in its footer or last records is 'truncated', not a crash") {
  Fixture f;
  REQUIRE(f.Open()->info().files.size() > 1);
  const std::string file = f.Open()->info().files.back().file;
  const auto original = test::ReadBytes(f.ds / file);
  const std::uint64_t size = original.size();
  for (std::uint64_t cut = size - 1; cut + 4096 > size && cut > 0;
       cut -= (cut + 80 > size ? 1 : 97)) {
    test::WriteBytes(f.ds / file, original);
    test::TruncateFile(f.ds / file, cut);
    const Status status = f.OpenError();
    REQUIRE_MESSAGE(status.code() == StatusCode::kTruncated, status.ToString());
    CHECK(status.message().find("truncated (expected " + std::to_string(size) + " bytes, got " +
                                std::to_string(cut) + ")") != std::string::npos);
  }
  // With damaged shards allowed, the other shards still read and verify names the bad one.
  test::TruncateFile(f.ds / file, size / 2);
  const auto reader = f.Open(/*allow_damaged=*/true);
  ReadScratch scratch;
  CHECK(reader->Read(0, scratch).ok());
  CHECK(reader->Read(reader->size() - 1, scratch).status().code() == StatusCode::kTruncated);
  test::CollectingReporter reporter;
  CHECK(reader->Verify(reporter).problems == 1);
  CHECK(reporter.problems[0].file == file);
}

TEST_CASE("header, footer and index damage are found at open, each with its own message") {
  Fixture f;
  const std::string file = f.Open()->info().files.front().file;
  const auto original = test::ReadBytes(f.ds / file);
  const std::uint64_t size = original.size();
  struct Case {
    std::uint64_t offset;
    const char* expected;
  };
  for (const Case& c :
       {Case{0, "bad magic"}, Case{9, "header checksum mismatch"},
        Case{size - 64, "footer checksum mismatch"}, Case{size - 3, "footer magic missing"},
        Case{size - 64 - 10, "index checksum mismatch"}}) {
    test::WriteBytes(f.ds / file, original);
    test::FlipByte(f.ds / file, c.offset);
    const Status status = f.OpenError();
    CHECK(status.code() == StatusCode::kCorruption);
    CHECK_MESSAGE(status.message().find(c.expected) != std::string::npos, status.message());
    CHECK(status.message().find(file) != std::string::npos);
  }
}

TEST_CASE("damage in padding is caught by verify's whole-file checksum") {
  test::TempDir dir;
  WriterOptions options;
  options.shard.align_bytes = 4096;  // a known gap of zeros between the header and record 0
  test::WriteDataset(dir / "ds", test::MakeRecords(3), options);
  test::FlipByte(dir / "ds" / "shard-000000.pkr", 1000);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  test::CollectingReporter reporter;
  CHECK((*reader)->Verify(reporter).problems == 1);
  CHECK(reporter.problems[0].status.message().find("file checksum mismatch") != std::string::npos);
}

TEST_CASE("zero-byte shards, random bytes and missing shards are distinct errors") {
  Fixture f;
  const std::string file = f.Open()->info().files.front().file;
  const auto size = test::ReadBytes(f.ds / file).size();
  test::TruncateFile(f.ds / file, 0);
  CHECK(f.OpenError().code() == StatusCode::kTruncated);
  std::vector<std::byte> noise(size);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::byte>(i * 7 + 3);
  test::WriteBytes(f.ds / file, noise);
  CHECK(f.OpenError().message().find("bad magic") != std::string::npos);
  fs::remove(f.ds / file);
  const Status missing = f.OpenError();
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK(missing.message().find(file) != std::string::npos);
}

TEST_CASE("manifest damage: flipped byte, missing file, newer version") {
  Fixture f;
  std::string text = ManifestText(f.ds);
  const std::size_t at = text.find("\"record_count\": 30");
  REQUIRE(at != std::string::npos);
  text[at + 17] = '1';  // "record_count": 31 -- valid JSON, wrong content
  test::WriteText(f.ds / "manifest.json", text);
  Status status = f.OpenError();
  CHECK(status.code() == StatusCode::kCorruption);
  CHECK(status.message().find("checksum mismatch") != std::string::npos);

  test::WriteText(f.ds / "manifest.json", "{ not json");
  CHECK(f.OpenError().code() == StatusCode::kCorruption);

  fs::remove(f.ds / "manifest.json");
  status = f.OpenError();
  CHECK(status.code() == StatusCode::kNotFound);

  shard::Manifest future;
  future.common.format_version = shard::kShardVersionWithWebp + 1;
  test::WriteText(f.ds / "manifest.json", *shard::SerializeManifest(future));
  status = f.OpenError();
  CHECK(status.code() == StatusCode::kNotSupported);
  CHECK(status.message().find("newer") != std::string::npos);
}

TEST_CASE("a shard from a newer format version is 'not supported'") {
  Fixture f;
  const std::string file = f.Open()->info().files.front().file;
  auto bytes = test::ReadBytes(f.ds / file);
  shard::Header header;
  REQUIRE(shard::DecodeHeader(std::span<const std::byte>(bytes).first<shard::kHeaderSize>(),
                              &header) == shard::DecodeError::kNone);
  header.format_version = 9;
  shard::EncodeHeader(header, std::span<std::byte>(bytes).first<shard::kHeaderSize>());
  ResealShard(f.ds, file, bytes);
  const Status status = f.OpenError();
  CHECK(status.code() == StatusCode::kNotSupported);
  CHECK(status.message().find("version 9") != std::string::npos);
}

TEST_CASE("impossible index entries are rejected at open, never read through") {
  Fixture f;
  const std::string file = f.Open()->info().files.front().file;
  const auto original = test::ReadBytes(f.ds / file);
  shard::Footer footer;
  REQUIRE(shard::DecodeFooter(std::span<const std::byte>(original).last<shard::kFooterSize>(),
                              &footer) == shard::DecodeError::kNone);
  auto entry_span = [&](std::vector<std::byte>& bytes, std::uint64_t i) {
    return std::span<std::byte>(bytes.data() + footer.index_offset + i * shard::kIndexEntrySizeV1,
                                shard::kIndexEntrySizeV1);
  };
  struct Mutation {
    const char* name;
    void (*apply)(shard::IndexEntry&);
  };
  for (const Mutation& m : {
           Mutation{"past the end", [](shard::IndexEntry& e) { e.offset = 1ull << 40; }},
           Mutation{"overflowing", [](shard::IndexEntry& e) { e.stored_size = ~0ull - 8; }},
           Mutation{"into the index", [](shard::IndexEntry& e) { e.stored_size += 1 << 20; }},
           Mutation{"key outside", [](shard::IndexEntry& e) { e.key_offset = 1u << 30; }},
           Mutation{"huge raw size",
                    [](shard::IndexEntry& e) {
                      e.compression = 1;
                      e.raw_size = 1ull << 50;
                    }},
       }) {
    CAPTURE(m.name);
    auto bytes = original;
    shard::IndexEntry entry;
    REQUIRE(shard::DecodeIndexEntry(entry_span(bytes, 2), 1, &entry) == shard::DecodeError::kNone);
    m.apply(entry);
    shard::EncodeIndexEntry(entry, 1, entry_span(bytes, 2));
    ResealShard(f.ds, file, bytes);
    const Status status = f.OpenError();
    CHECK(status.code() == StatusCode::kCorruption);
    CHECK(status.message().find("record 2") != std::string::npos);
    CHECK(status.message().find("impossible") != std::string::npos);
  }
}

TEST_CASE("a record moved into another slot fails its checksum: the checksum binds the index") {
  Fixture f;
  const std::string file = f.Open()->info().files.front().file;
  auto bytes = test::ReadBytes(f.ds / file);
  shard::Footer footer;
  REQUIRE(shard::DecodeFooter(std::span<const std::byte>(bytes).last<shard::kFooterSize>(),
                              &footer) == shard::DecodeError::kNone);
  // Point entry 1 at record 0's payload, checksum and all (a copy of its whole index entry but
  // the key), as a buggy writer or a bad merge could.
  auto entry_at = [&](std::uint64_t i) {
    return std::span<std::byte>(bytes.data() + footer.index_offset + i * shard::kIndexEntrySizeV1,
                                shard::kIndexEntrySizeV1);
  };
  shard::IndexEntry first, second;
  REQUIRE(shard::DecodeIndexEntry(entry_at(0), 1, &first) == shard::DecodeError::kNone);
  REQUIRE(shard::DecodeIndexEntry(entry_at(1), 1, &second) == shard::DecodeError::kNone);
  first.key_offset = second.key_offset;
  first.key_size = second.key_size;
  shard::EncodeIndexEntry(first, 1, entry_at(1));
  ResealShard(f.ds, file, bytes);
  const auto reader = f.Open();
  ReadScratch scratch;
  CHECK(reader->Read(0, scratch).ok());
  const auto moved = reader->Read(1, scratch);
  CHECK(moved.status().code() == StatusCode::kCorruption);
  CHECK(moved.status().message().find("record 1") != std::string::npos);
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

// Seeded random damage anywhere in a shard or the manifest: every outcome is either an error or
// the original bytes, never a crash, a hang or silently different data (ASan/UBSan in CI watch
// the memory side).
TEST_CASE("random bit flips and truncations never crash a reader or change what it returns") {
  test::TempDir dir;
  const auto records = test::MakeRecords(12);
  WriterOptions options;
  options.shard_size_bytes = 16 << 10;
  test::WriteDataset(dir / "clean", records, options);
  const auto clean = test::SnapshotTree(dir / "clean");
  SplitMix64 random(2026);
  int errors = 0;
  for (int round = 0; round < 300; ++round) {
    const fs::path ds = dir / "ds";
    fs::remove_all(ds);
    fs::copy(dir / "clean", ds);
    const auto& [name, bytes] = clean[random.Below(clean.size())];
    CAPTURE(name);
    const bool truncate = random.Below(4) == 0;
    const std::uint64_t offset = random.Below(bytes.size());  // the new size when truncating
    CAPTURE(truncate);
    CAPTURE(offset);
    if (truncate) {
      test::TruncateFile(ds / name, offset);
    } else {
      auto damaged = bytes;
      damaged[offset] ^= static_cast<std::byte>(1u << random.Below(8));
      test::WriteBytes(ds / name, damaged);
    }
    OpenOptions open;
    open.allow_damaged_shards = random.Below(2) == 0;
    auto reader = OpenDataset(ds, open);
    if (!reader.ok()) {
      ++errors;
      continue;
    }
    ReadScratch scratch;
    for (std::uint64_t i = 0; i < (*reader)->size(); ++i) {
      auto view = (*reader)->Read(i, scratch);
      if (view.ok()) {
        CHECK(Copy(view->bytes) == records[i].bytes);
        CHECK(view->key == records[i].key);
      } else {
        ++errors;
      }
    }
    Status scan = (*reader)->ForEach([&](const RecordView& view) {
      CHECK(Copy(view.bytes) == records[view.index].bytes);
      return Status::OK();
    });
    test::CollectingReporter reporter;
    const VerifyStats stats = (*reader)->Verify(reporter);
    // A reader that opened a damaged shard must find the damage in a scan or in verify. A
    // manifest that still opened passed its checksum, so its content is the original's (only
    // whitespace, like the final newline, can change without notice).
    if (name != "manifest.json") CHECK(stats.problems + (scan.ok() ? 0u : 1u) > 0);
  }
  CHECK(errors > 0);
}

}  // namespace
}  // namespace packrec
