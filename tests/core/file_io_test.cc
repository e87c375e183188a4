#include <doctest/doctest.h>

#include <vector>

#include "core/checksum.h"
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

// The shard writer's files hash and write on a thread of their own: the bytes and the checksum
// must be what the caller's own thread would have written, whatever the sizes appended.
TEST_CASE("write-behind writes the same bytes and checksum as writing on the caller's thread") {
  test::TempDir dir;
  std::vector<std::byte> pattern(5 << 20);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    pattern[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  }
  // Small, buffer-sized and larger-than-buffer appends, and zeros between them.
  const std::size_t sizes[] = {1, 4095, 70000, 1 << 20, (1 << 20) + 1, 3 << 20, 17};
  std::uint64_t checksums[2] = {};
  for (const bool behind : {false, true}) {
    const fs::path path = dir / (behind ? "behind" : "plain");
    auto file = WritableFile::Create(path);
    REQUIRE(file.ok());
    (*file)->EnableChecksum();
    if (behind) (*file)->EnableWriteBehind();
    std::size_t offset = 0;
    for (int round = 0; round < 3; ++round) {
      for (const std::size_t size : sizes) {
        const std::size_t at = offset % (pattern.size() - size);
        REQUIRE((*file)->Append({pattern.data() + at, size}).ok());
        REQUIRE((*file)->AppendZeros(size % 13).ok());
        offset += size + 7;
      }
      if (round == 1) REQUIRE((*file)->Sync().ok());
    }
    REQUIRE((*file)->Close().ok());
    CHECK(fs::file_size(path) == (*file)->size());
    checksums[behind] = (*file)->checksum();
    CHECK(checksums[behind] == Xxh64(test::ReadBytes(path)));
  }
  CHECK(test::ReadBytes(dir / "plain") == test::ReadBytes(dir / "behind"));
  CHECK(checksums[0] == checksums[1]);
}

// /dev/full fails every write with ENOSPC, as a full disk does.
TEST_CASE("write-behind returns a failed write on a later call, naming the path") {
  auto file = WritableFile::OpenAt("/dev/full", 0);
  if (!file.ok()) {
    MESSAGE("skipped: /dev/full cannot be opened here: " << file.status().ToString());
    return;
  }
  (*file)->EnableWriteBehind();
  const std::vector<std::byte> chunk(300 << 10, std::byte{1});
  Status status;
  // The first buffer is handed over without waiting; its failure surfaces on the next handover.
  for (int i = 0; i < 16 && status.ok(); ++i) status = (*file)->Append(chunk);
  if (status.ok()) status = (*file)->Sync();
  CHECK(status.code() == StatusCode::kIOError);
  CHECK(status.message().find("write /dev/full") != std::string::npos);
  // Once failed, it stays failed.
  CHECK_FALSE((*file)->Sync().ok());
  CHECK_FALSE((*file)->Close().ok());
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

TEST_CASE("an export is staged: OUT appears whole at Commit, a dead run's staging is removed") {
  test::TempDir dir;
  constexpr auto kExport = OutputDirectory::OutputKind::kExport;
  const fs::path out = dir / "out";
  const fs::path staging = dir / "out.packrec-staging";
  {
    auto staged = OutputDirectory::Prepare(out, "packrec-export.json", false, kExport);
    REQUIRE(staged.ok());
    CHECK(staged->write_dir() == staging);
    CHECK_FALSE(fs::exists(out));  // nothing at OUT until the export is whole
    test::WriteText(staged->write_dir() / "shard-000000.tar", "tar");
    // Another run for the same OUT while this one lives: refused, this one's files untouched.
    auto second = OutputDirectory::Prepare(out, "packrec-export.json", true, kExport);
    CHECK(second.status().code() == StatusCode::kAlreadyExists);
    CHECK(second.status().message() ==
          out.string() + " is being written by another packrec run, through " + staging.string());
    CHECK(fs::exists(staging / "shard-000000.tar"));
    REQUIRE(staged->Commit().ok());
  }
  CHECK(test::SnapshotTree(out).size() == 1);
  CHECK_FALSE(fs::exists(staging));

  // What a killed run leaves (the staging directory, its marker no longer locked) is removed by
  // the next run; "other/" (a trailing slash) still stages beside the directory, not inside it.
  const fs::path other = dir / "other";
  test::WriteText(dir / "other.packrec-staging" / ".packrec-staging", "");
  test::WriteText(dir / "other.packrec-staging" / "shard-000000.tar.tmp", "half");
  auto after_kill =
      OutputDirectory::Prepare(other.string() + "/", "packrec-export.json", false, kExport);
  REQUIRE(after_kill.ok());
  CHECK(after_kill->write_dir() == dir / "other.packrec-staging");
  CHECK_FALSE(fs::exists(dir / "other.packrec-staging" / "shard-000000.tar.tmp"));
  after_kill->Abort();
  CHECK_FALSE(fs::exists(dir / "other.packrec-staging"));
  CHECK_FALSE(fs::exists(other));

  // A staging directory without packrec's marker is not ours: refused, left alone.
  test::WriteText(dir / "third.packrec-staging" / "notes.txt", "mine");
  CHECK(OutputDirectory::Prepare(dir / "third", "packrec-export.json", false, kExport)
            .status()
            .code() == StatusCode::kAlreadyExists);
  CHECK(fs::exists(dir / "third.packrec-staging" / "notes.txt"));

  // Empty and unmarked (a run killed between creating it and its marker): removed, as rmdir
  // removes nothing but an empty directory.
  fs::create_directories(dir / "fourth.packrec-staging");
  auto unmarked = OutputDirectory::Prepare(dir / "fourth", "packrec-export.json", false, kExport);
  REQUIRE(unmarked.ok());
  CHECK(fs::exists(dir / "fourth.packrec-staging" / ".packrec-staging"));
  unmarked->Abort();

  // An empty OUT (perhaps a mount point, which cannot be staged beside) is written in place under
  // a locked marker: a second run is refused; what a killed run wrote there is emptied by the
  // next run; a commit leaves the export without the marker.
  const fs::path empty = dir / "empty";
  fs::create_directories(empty);
  {
    auto killed = OutputDirectory::Prepare(empty, "packrec-export.json", false, kExport);
    REQUIRE(killed.ok());
    CHECK(killed->write_dir() == empty);
    CHECK(fs::exists(empty / ".packrec-writing"));
    test::WriteText(empty / "shard-000000.tar.tmp", "half");
    auto second = OutputDirectory::Prepare(empty, "packrec-export.json", true, kExport);
    CHECK(second.status().code() == StatusCode::kAlreadyExists);
    CHECK(second.status().message().find("another packrec run") != std::string::npos);
  }  // gone without Abort, as a kill leaves it: its lock goes with it
  auto next = OutputDirectory::Prepare(empty, "packrec-export.json", false, kExport);
  REQUIRE(next.ok());
  CHECK_FALSE(fs::exists(empty / "shard-000000.tar.tmp"));
  test::WriteText(empty / "packrec-export.json", "{}");
  REQUIRE(next->Commit().ok());
  CHECK(test::SnapshotTree(empty).size() == 1);
  CHECK_FALSE(fs::exists(dir / "empty.packrec-staging"));
}

}  // namespace
}  // namespace packrec
