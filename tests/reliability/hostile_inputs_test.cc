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

// A tar written by Python's tarfile in the PAX format (member names of any length or shape):
// `members` is a Python tuple list of (name, body), where `data` is the bytes of `image`.
void WritePaxTar(const fs::path& tar, const fs::path& image, const std::string& members) {
  const fs::path script = tar.string() + ".py";
  test::WriteText(script,
                  "import sys, tarfile, io\n"
                  "data = open(sys.argv[1], 'rb').read()\n"
                  "with tarfile.open(sys.argv[2], 'w', format=tarfile.PAX_FORMAT) as tar:\n"
                  "    for name, body in (" +
                      members +
                      "):\n"
                      "        info = tarfile.TarInfo(name); info.size = len(body)\n"
                      "        tar.addfile(info, io.BytesIO(body))\n");
  REQUIRE(std::system(("/usr/bin/python3 " + test::Quote(script) + " " + test::Quote(image) + " " +
                       test::Quote(tar))
                          .c_str()) == 0);
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
  options.on_error = OnBadRecord::kSkip;
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
  options.on_error = OnBadRecord::kFail;
  options.output = dir / "out-fail";
  stats = Convert(options);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().code() == StatusCode::kInvalidInput);
  CHECK_MESSAGE(stats.status().remedy() == Remedy::kSkipBadInput, stats.status().ToString());
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

// A FIFO where a dataset's file or a RecordIO .lst should be: named, never waited on, never taken
// for a missing file.
TEST_CASE("a FIFO in a shard's or a .lst's place is refused by name, without a hang") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 6, /*seed=*/5, /*size=*/64);
  REQUIRE(test::RunCli("convert -q --shard-size 16KiB " + test::Quote(dir / "tree") + " " +
                       test::Quote(dir / "ds"))
              .exit_code == 0);
  fs::remove(dir / "ds" / "shard-000001.pkr");
  REQUIRE(::mkfifo((dir / "ds" / "shard-000001.pkr").c_str(), 0644) == 0);
  for (const std::string command : {"info", "verify"}) {
    CAPTURE(command);
    const test::CommandResult run =
        test::RunCli("--help >/dev/null; timeout 20 " + std::string(PACKREC_CLI_PATH) + " " +
                     command + " " + test::Quote(dir / "ds"));
    CHECK_MESSAGE((run.exit_code == 3 || run.exit_code == 5), run.output);
    CHECK_MESSAGE(run.output.find("shard-000001.pkr: not a regular file") != std::string::npos,
                  run.output);
  }
  REQUIRE(test::RunCli("convert -q --format recordio " + test::Quote(dir / "tree") + " " +
                       test::Quote(dir / "rio"))
              .exit_code == 0);
  fs::path lst;
  for (const auto& entry : fs::directory_iterator(dir / "rio")) {
    if (entry.path().extension() == ".lst") lst = entry.path();
  }
  REQUIRE_FALSE(lst.empty());
  fs::remove(lst);
  REQUIRE(::mkfifo(lst.c_str(), 0644) == 0);
  const test::CommandResult imported =
      test::RunCli("--help >/dev/null; timeout 20 " + std::string(PACKREC_CLI_PATH) +
                   " convert -q " + test::Quote(dir / "rio") + " " + test::Quote(dir / "back"));
  CHECK_MESSAGE(imported.exit_code == 3, imported.output);
  CHECK_MESSAGE(
      imported.output.find(lst.filename().string() + ": not a regular file") != std::string::npos,
      imported.output);
}

// Flags whose values cannot work are refused naming the flag (exit 2), before anything is read
// or written: a part spec with a second slash, a list import of a directory, a folder import of
// a file, a pixels layout larger than an image may be.
TEST_CASE("convert refuses --part 0/2/3, --from list DIR, --from folder FILE and a huge --size") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 3, /*seed=*/5, /*size=*/64);
  test::WriteText(dir / "list.txt", "n01440764/n01440764_0.JPEG 0\n");
  const std::string tree = test::Quote(dir / "tree");
  const std::string out = test::Quote(dir / "out");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"convert -q " + tree + " " + out + " --part 0/2/3", "--part"},
      {"convert -q " + tree + " " + out + " --from list", "is a directory"},
      {"convert -q " + test::Quote(dir / "list.txt") + " " + out + " --from folder", "is a file"},
      {"convert -q " + tree + " " + test::Quote(dir / "out.h5") +
           " --format hdf5 --hdf5-layout pixels --size 20000 20000",
       "--size 20000 20000"},
  };
  for (const auto& [args, why] : refused) {
    CAPTURE(args);
    const test::CommandResult run = test::RunCli(args);
    CHECK_MESSAGE(run.exit_code == 2, run.output);
    CHECK_MESSAGE(run.output.find(why) != std::string::npos, run.output);
    CHECK_FALSE(fs::exists(dir / "out"));
    CHECK_FALSE(fs::exists(dir / "out.h5"));
  }
}

// A key longer than any format stores (65,535 bytes) is one reject under --on-error skip; it used
// to stop the whole import with exit 2. The tar is written by Python's tarfile (pax names).
TEST_CASE("an import record whose key is over 65535 bytes is one reject, not the import's end") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 1, 2, /*seed=*/5, /*size=*/64);
  const fs::path image = *fs::directory_iterator(*fs::directory_iterator(dir / "tree"));
  WritePaxTar(dir / "long.tar", image,
              "('a.jpg', data), ('a.cls', b'1'), ('k' * 70000 + '.jpg', data), "
              "('k' * 70000 + '.cls', b'2'), ('b.jpg', data), ('b.cls', b'3')");
  const test::CommandResult skipped =
      test::RunCli("convert -q --on-error skip --from wds " + test::Quote(dir / "long.tar") + " " +
                   test::Quote(dir / "out"));
  REQUIRE_MESSAGE(skipped.exit_code == 0, skipped.output);
  auto reader = OpenDataset(dir / "out");
  REQUIRE(reader.ok());
  CHECK((*reader)->size() == 2);
  const std::string rejects = ReadText(dir / "out" / "rejects.tsv");
  CHECK_MESSAGE(rejects.find("over the 65535 a key may have") != std::string::npos, rejects);
  const test::CommandResult failed = test::RunCli(
      "convert -q --from wds " + test::Quote(dir / "long.tar") + " " + test::Quote(dir / "out2"));
  CHECK_MESSAGE(failed.exit_code == 3, failed.output);
  CHECK_FALSE(fs::exists(dir / "out2"));
}

// Which keys are legal is decided at convert time (core/keys.h): a file name with a newline or a
// tab, or an import's key with an empty, "." or ".." component or a leading '/', is that record's
// reject, so that extract never refuses a dataset convert made. rejects.tsv keeps one line each.
TEST_CASE("keys extract could not write are rejected at convert time, one line each") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 1, 2, /*seed=*/5, /*size=*/64);
  const fs::path class_dir = *fs::directory_iterator(dir / "tree");
  test::WriteBytes(class_dir / "new\nline.jpg", test::MakeJpeg(16, 16, 1));
  test::WriteBytes(class_dir / "tab\there.jpg", test::MakeJpeg(16, 16, 2));
  ConvertOptions options;
  options.source = dir / "tree";
  options.output = dir / "out";
  options.on_error = OnBadRecord::kSkip;
  Result<ConvertStats> stats = Convert(options);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  CHECK(stats->records_written == 2);
  const std::string rejects = ReadText(dir / "out" / "rejects.tsv");
  CHECK_MESSAGE(rejects.find("new\\x0aline.jpg") != std::string::npos, rejects);
  CHECK_MESSAGE(rejects.find("holds a control character") != std::string::npos, rejects);
  std::size_t lines = 0;
  for (const char c : rejects) lines += c == '\n' ? 1 : 0;
  CHECK(lines == 3);  // the header and one line a reject
  const test::CommandResult extracted =
      test::RunCli("extract " + test::Quote(dir / "out") + " " + test::Quote(dir / "extracted"));
  CHECK_MESSAGE(extracted.exit_code == 0, extracted.output);
  options.output = dir / "strict";
  options.on_error = OnBadRecord::kFail;
  const Result<ConvertStats> strict = Convert(options);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.status().code() == StatusCode::kInvalidInput);
  CHECK_FALSE(fs::exists(dir / "strict"));
  // An import's keys: from tar member names, written by Python's tarfile.
  const fs::path image = *fs::directory_iterator(class_dir);
  WritePaxTar(dir / "keys.tar", image,
              "('good.jpg', data), ('a//b.jpg', data), ('x/../y.jpg', data), ('./z.jpg', data)");
  const test::CommandResult imported =
      test::RunCli("convert -q --on-error skip --from wds " + test::Quote(dir / "keys.tar") + " " +
                   test::Quote(dir / "imported"));
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.output);
  auto reader = OpenDataset(dir / "imported");
  REQUIRE(reader.ok());
  // "./z.jpg" is GNU tar's spelling of z.jpg (tar -cf keys.tar .): kept, as "z.jpg".
  REQUIRE((*reader)->size() == 2);
  ReadScratch scratch;
  auto second = (*reader)->Read(1, scratch);
  REQUIRE(second.ok());
  CHECK(second->key == "z.jpg");
  const std::string import_rejects = ReadText(dir / "imported" / "rejects.tsv");
  CHECK_MESSAGE(import_rejects.find("empty path component") != std::string::npos, import_rejects);
  CHECK_MESSAGE(import_rejects.find("'.' or '..' path component") != std::string::npos,
                import_rejects);
}

}  // namespace
}  // namespace packrec
