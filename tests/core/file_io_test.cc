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
  bool created = false;
  REQUIRE(PrepareOutputDirectory(dir / "new", "manifest.json", false, &created).ok());
  CHECK(created);
  REQUIRE(PrepareOutputDirectory(dir / "new", "manifest.json", false, &created).ok());
  CHECK_FALSE(created);

  test::WriteText(dir / "precious" / "thesis.tex", "years of work");
  Status refused = PrepareOutputDirectory(dir / "precious", "manifest.json", true, &created);
  CHECK(refused.code() == StatusCode::kAlreadyExists);
  CHECK(fs::exists(dir / "precious" / "thesis.tex"));

  test::WriteText(dir / "old" / "manifest.json", "{}");
  test::WriteText(dir / "old" / "shard-000000.pkr", "x");
  CHECK(PrepareOutputDirectory(dir / "old", "manifest.json", false, &created).code() ==
        StatusCode::kAlreadyExists);
  REQUIRE(PrepareOutputDirectory(dir / "old", "manifest.json", true, &created).ok());
  CHECK(fs::is_empty(dir / "old"));

  test::WriteText(dir / "file", "x");
  CHECK(PrepareOutputDirectory(dir / "file", "manifest.json", true, &created).code() ==
        StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace packrec
