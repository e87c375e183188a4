// Inputs that are not plain image files, met while converting a tree: FIFOs (which must not block
// the conversion), symlink loops, dangling symlinks, unreadable files, files that change while
// they are read. Each is a reject with its reason, or, with --on-error fail, the named error.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "../formats/shard_test_util.h"
#include "core/file_io.h"
#include "packrec/convert.h"
#include "packrec/reader.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  const std::vector<std::byte> bytes = test::ReadBytes(path);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST_CASE("FIFOs, symlink loops, dangling links and unreadable files are rejects, never a hang") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 4, /*seed=*/5, /*size=*/64);
  const fs::path cls = dir / "tree" / "n01440764";  // synth's first class
  REQUIRE(::mkfifo((cls / "pipe.jpg").c_str(), 0644) == 0);
  fs::create_directories(cls / "sub");
  fs::create_directory_symlink("..", cls / "sub" / "back");  // class_000/sub/back -> class_000
  fs::create_symlink("self.jpg", cls / "self.jpg");          // a link to itself
  fs::create_symlink("missing.jpg", cls / "dangling.jpg");
  const bool root = ::geteuid() == 0;  // root reads a mode-000 file anyway
  if (!root) {
    test::WriteBytes(cls / "locked.jpg", test::MakeJpeg(32, 32, 1));
    fs::permissions(cls / "locked.jpg", fs::perms::none);
  }

  ConvertOptions options;
  options.source = dir / "tree";
  options.output = dir / "out";
  options.on_error = OnError::kSkip;
  const auto start = std::chrono::steady_clock::now();
  Result<ConvertStats> stats = Convert(options);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));  // no FIFO wait
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  CHECK(stats->records_written == 8);
  const std::string rejects = ReadText(dir / "out" / "rejects.tsv");
  CAPTURE(rejects);
  CHECK(rejects.find("pipe.jpg\tread") != std::string::npos);
  CHECK(rejects.find("not a regular file") != std::string::npos);
  CHECK(rejects.find("sub/back\ta symlink loop") != std::string::npos);
  CHECK(rejects.find("self.jpg") != std::string::npos);
  CHECK(rejects.find("Too many levels of symbolic links") != std::string::npos);
  CHECK(rejects.find("dangling.jpg") != std::string::npos);
  CHECK(rejects.find("No such file or directory") != std::string::npos);
  if (!root) CHECK(rejects.find("Permission denied") != std::string::npos);
  // The loop was not followed: every record is one of the 8 images, listed once.
  auto reader = OpenDataset(dir / "out");
  REQUIRE(reader.ok());
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < (*reader)->size(); ++i) {
    auto record = (*reader)->Read(i, scratch);
    REQUIRE(record.ok());
    CHECK(record->key.find("back") == std::string::npos);
  }

  // --on-error fail: the first of them is the error, named, and nothing is written.
  options.on_error = OnError::kFail;
  options.output = dir / "out-fail";
  stats = Convert(options);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().code() == StatusCode::kInvalidInput);
  CHECK_MESSAGE(stats.status().message().find("--on-error skip") != std::string::npos,
                stats.status().ToString());
  CHECK_FALSE(fs::exists(dir / "out-fail" / "manifest.json"));
  if (!root) fs::permissions(cls / "locked.jpg", fs::perms::owner_all);
}

TEST_CASE("a file that changes while it is read is refused, not stored half old, half new") {
  test::TempDir dir;
  const fs::path path = dir / "growing.jpg";
  test::WriteBytes(path, test::MakeJpeg(64, 64, 2));
  auto file = RandomAccessFile::Open(path);
  REQUIRE(file.ok());
  auto size = (*file)->RegularFileSize();
  REQUIRE(size.ok());
  CHECK((*file)->CheckUnchanged().ok());
  {
    std::ofstream append(path, std::ios::app | std::ios::binary);
    append << "more bytes from a writer";
  }
  const Status changed = (*file)->CheckUnchanged();
  CHECK(changed.code() == StatusCode::kInvalidInput);
  CHECK_MESSAGE(changed.message().find("changed while it was read") != std::string::npos,
                changed.ToString());
  CHECK(changed.message().find(path.string()) != std::string::npos);
  // A file removed after listing: the list names it, reading it fails by name.
  fs::remove(path);
  auto gone = ReadWholeFile(path);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().message().find("No such file or directory") != std::string::npos);
}

}  // namespace
}  // namespace packrec
