#include <doctest/doctest.h>

#include <vector>

#include "core/file_io.h"
#include "core/output_dir.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

TEST_CASE("writable file appends through its buffer, and mapped file reads it back") {
  test::TempDir dir;
  auto file = WritableFile::Create(dir / "data");
  REQUIRE(file.ok());
  std::vector<std::byte> big(3 << 20, std::byte{7});
  REQUIRE((*file)->Append(AsBytes("head")).ok());
  REQUIRE((*file)->AppendZeros(5000).ok());
  REQUIRE((*file)->Append(big).ok());
  REQUIRE((*file)->Sync().ok());
  REQUIRE((*file)->Close().ok());
  CHECK((*file)->size() == 4 + 5000 + big.size());
  auto map = MappedFile::Open(dir / "data");
  REQUIRE(map.ok());
  REQUIRE(map->size() == 4 + 5000 + big.size());
  CHECK(map->bytes()[0] == std::byte{'h'});
  CHECK(map->bytes()[4 + 4999] == std::byte{0});
  CHECK(map->bytes()[map->size() - 1] == std::byte{7});
}

TEST_CASE("file errors name the path and the operation") {
  test::TempDir dir;
  auto missing = ReadWholeFile(dir / "missing.jpg");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("missing.jpg") != std::string::npos);
  test::WriteText(dir / "exists", "x");
  auto exists = WritableFile::Create(dir / "exists");
  REQUIRE_FALSE(exists.ok());
  CHECK(exists.status().message().find("create") != std::string::npos);
  CHECK(exists.status().message().find("exists") != std::string::npos);
}

TEST_CASE("atomic write leaves no tmp file and replaces the target") {
  test::TempDir dir;
  REQUIRE(WriteFileAtomically(dir / "m.json", AsBytes("one")).ok());
  REQUIRE(WriteFileAtomically(dir / "m.json", AsBytes("two")).ok());
  CHECK_FALSE(fs::exists(dir / "m.json.tmp"));
  const auto bytes = test::ReadBytes(dir / "m.json");
  CHECK(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) == "two");
}

TEST_CASE("output directory: created, reused when empty, never deleted when not ours") {
  test::TempDir dir;
  auto fresh = OutputDirectory::Prepare(dir / "new", "manifest.json", false);
  REQUIRE(fresh.ok());
  CHECK(fresh->write_dir() == dir / "new");
  REQUIRE(fresh->Commit().ok());
  auto empty = OutputDirectory::Prepare(dir / "new", "manifest.json", false);
  REQUIRE(empty.ok());
  test::WriteText(empty->write_dir() / "partial", "x");
  empty->Abort();
  CHECK(fs::is_empty(dir / "new"));

  test::WriteText(dir / "precious" / "thesis.tex", "years of work");
  auto refused = OutputDirectory::Prepare(dir / "precious", "manifest.json", true);
  CHECK(refused.status().code() == StatusCode::kAlreadyExists);
  CHECK(fs::exists(dir / "precious" / "thesis.tex"));

  test::WriteText(dir / "file", "x");
  CHECK(OutputDirectory::Prepare(dir / "file", "manifest.json", true).status().code() ==
        StatusCode::kAlreadyExists);
}

TEST_CASE("replacing a dataset is staged: a failed run keeps the old one, a commit swaps") {
  test::TempDir dir;
  const fs::path ds = dir / "ds";
  test::WriteText(ds / "manifest.json", "old manifest");
  test::WriteText(ds / "shard-000000.pkr", "old shard");
  CHECK(OutputDirectory::Prepare(ds, "manifest.json", false).status().code() ==
        StatusCode::kAlreadyExists);

  auto failed = OutputDirectory::Prepare(ds, "manifest.json", true);
  REQUIRE(failed.ok());
  CHECK(failed->write_dir() != ds);
  test::WriteText(failed->write_dir() / "shard-000000.pkr", "new shard");
  failed->Abort();
  CHECK_FALSE(fs::exists(failed->write_dir()));
  CHECK(test::SnapshotTree(ds).size() == 2);
  CHECK(test::ReadBytes(ds / "shard-000000.pkr").size() == 9);  // "old shard"

  auto replaced = OutputDirectory::Prepare(ds, "manifest.json", true);
  REQUIRE(replaced.ok());
  test::WriteText(replaced->write_dir() / "manifest.json", "new manifest");
  REQUIRE(replaced->Commit().ok());
  const auto files = test::SnapshotTree(ds);
  REQUIRE(files.size() == 1);
  CHECK(files[0].first == "manifest.json");
  CHECK(files[0].second.size() == 12);  // "new manifest"
  CHECK_FALSE(fs::exists(replaced->write_dir()));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    CHECK(entry.path().filename() == "ds");  // no staging or old directory left behind
  }
}

}  // namespace
}  // namespace packrec
