// Image folders whose images have side files (<stem>.txt, .json, .cls, .mask.bin): convert keeps
// each as a field, extract gives every file back byte for byte, bad side files are named rejects.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "formats/shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

// Every regular file below `root`, by relative path, with its bytes.
std::map<std::string, std::vector<std::byte>> Files(const fs::path& root) {
  std::map<std::string, std::vector<std::byte>> files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      files[entry.path().lexically_relative(root).generic_string()] = test::ReadBytes(entry.path());
    }
  }
  return files;
}

// Two classes of four images; each with a caption, JSON metadata, a class file and a mask, except
// that image 3 of each class has no mask and image 2 no caption.
void MakeSideFileTree(const fs::path& root) {
  for (const std::string cls : {"cat", "dog"}) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      const fs::path stem = root / cls / ("000" + std::to_string(i));
      fs::create_directories(stem.parent_path());
      test::WriteBytes(stem.string() + ".jpg", test::MakeJpeg(40 + 3 * i, 30, i));
      if (i != 2)
        test::WriteText(stem.string() + ".txt",
                        "a " + cls + ", number " + std::to_string(i) + "\n");
      test::WriteText(stem.string() + ".json",
                      "{\"id\": " + std::to_string(i) + ", \"tags\": [\"" + cls + "\"]}");
      test::WriteText(stem.string() + ".cls", std::to_string(i));
      if (i != 3)
        test::WriteBytes(stem.string() + ".mask.bin", test::MakePng(40 + 3 * i, 30, 7 + i));
    }
  }
}

TEST_CASE("folder with side files -> shard -> extract gives every file back byte for byte") {
  test::TempDir dir;
  MakeSideFileTree(dir / "tree");
  REQUIRE(test::RunCli("convert " + test::Quote(dir / "tree") + " " + test::Quote(dir / "ds"))
              .exit_code == 0);
  const test::CommandResult info = test::RunCli("info --json " + test::Quote(dir / "ds"));
  REQUIRE(info.exit_code == 0);
  const nlohmann::json described = nlohmann::json::parse(info.output);
  CHECK(described["records"] == 8);
  CHECK(described["format_version"] == 2);
  std::vector<std::string> names, types;
  for (const nlohmann::json& field : described["fields"]) {
    names.push_back(field["name"]);
    types.push_back(field["type"]);
  }
  CHECK(names == std::vector<std::string>{"cls", "json", "mask.bin", "txt"});
  CHECK(types == std::vector<std::string>{"text", "json", "bytes", "text"});
  REQUIRE(test::RunCli("verify " + test::Quote(dir / "ds")).exit_code == 0);
  const test::CommandResult extracted =
      test::RunCli("extract " + test::Quote(dir / "ds") + " " + test::Quote(dir / "out"));
  REQUIRE_MESSAGE(extracted.exit_code == 0, extracted.output);
  const auto before = Files(dir / "tree");
  const auto after = Files(dir / "out");
  CHECK(before.size() == 8 + 6 + 8 + 8 + 6);
  CHECK(before == after);

  // Through shard -> shard and a two-part conversion merged: the same files again.
  REQUIRE(test::RunCli("convert " + test::Quote(dir / "ds") + " " + test::Quote(dir / "copy"))
              .exit_code == 0);
  for (const char* part : {"0/2", "1/2"}) {
    REQUIRE(test::RunCli("convert " + test::Quote(dir / "tree") + " " + test::Quote(dir / "parts") +
                         " --part " + part)
                .exit_code == 0);
  }
  REQUIRE(test::RunCli("merge " + test::Quote(dir / "merged") + " " + test::Quote(dir / "parts"))
              .exit_code == 0);
  for (const char* name : {"copy", "merged"}) {
    CAPTURE(name);
    REQUIRE(test::RunCli("extract " + test::Quote(dir / name) + " " +
                         test::Quote(dir / (std::string(name) + "-out")))
                .exit_code == 0);
    CHECK(Files(dir / (std::string(name) + "-out")) == before);
  }
}

TEST_CASE("a side file that does not match its field is its image's reject, naming the file") {
  test::TempDir dir;
  MakeSideFileTree(dir / "tree");
  test::WriteText(dir / "tree" / "cat" / "0001.json", "{\"id\": 1, ");
  test::WriteBytes(dir / "tree" / "dog" / "0000.txt",
                   {std::byte{'a'}, std::byte{0xff}, std::byte{'b'}});
  const test::CommandResult failed =
      test::RunCli("convert " + test::Quote(dir / "tree") + " " + test::Quote(dir / "ds"));
  CHECK(failed.exit_code != 0);
  CHECK(failed.output.find("0001.json") != std::string::npos);
  CHECK(failed.output.find("not valid JSON") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "ds" / "manifest.json"));

  const test::CommandResult skipped = test::RunCli(
      "convert --on-error skip " + test::Quote(dir / "tree") + " " + test::Quote(dir / "ds"));
  REQUIRE_MESSAGE(skipped.exit_code == 0, skipped.output);
  const std::vector<std::byte> rejects = test::ReadBytes(dir / "ds" / "rejects.tsv");
  const std::string text(reinterpret_cast<const char*>(rejects.data()), rejects.size());
  CHECK(text.find("cat/0001.jpg") != std::string::npos);
  CHECK(text.find("0001.json (field 'json', json): not valid JSON") != std::string::npos);
  CHECK(text.find("dog/0000.txt (field 'txt', text): not valid UTF-8") != std::string::npos);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  CHECK((*reader)->size() == 6);
}

TEST_CASE(
    "side-file rules: every image is a record of its own, one side file for two images is a "
    "reject") {
  test::TempDir dir;
  const fs::path cls = dir / "tree" / "a";
  fs::create_directories(cls);
  test::WriteBytes(cls / "x.jpg", test::MakeJpeg(16, 16, 1));
  test::WriteBytes(cls / "x.png", test::MakePng(16, 16, 2));  // a record, as in ImageFolder
  test::WriteText(cls / "x.txt", "whose?");                   // x.jpg's or x.png's: neither
  test::WriteBytes(cls / "y.jpg", test::MakeJpeg(16, 16, 3));
  test::WriteBytes(cls / "y.thumb.jpg", test::MakeJpeg(8, 8, 4));  // a record, not a field
  test::WriteBytes(cls / "y.seg.bin", test::MakePng(16, 16, 5));   // y.jpg's field seg.bin
  test::WriteText(cls / "y.label", "3");  // cannot be a field: label is the record's own
  test::WriteText(cls / "notes.md", "not an image, nobody's side file");
  const test::CommandResult run = test::RunCli(
      "convert --on-error skip " + test::Quote(dir / "tree") + " " + test::Quote(dir / "ds"));
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  REQUIRE((*reader)->size() == 4);
  REQUIRE((*reader)->info().fields.size() == 1);
  CHECK((*reader)->info().fields[0].name == "seg.bin");
  ReadScratch scratch;
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; i < 4; ++i) {
    auto view = (*reader)->Read(i, scratch);
    REQUIRE(view.ok());
    keys.emplace_back(view->key);
    CHECK(view->fields[0].present == (view->key == "a/y.jpg"));
  }
  CHECK(keys == std::vector<std::string>{"a/x.jpg", "a/x.png", "a/y.jpg", "a/y.thumb.jpg"});
  const std::vector<std::byte> rejects = test::ReadBytes(dir / "ds" / "rejects.tsv");
  const std::string text(reinterpret_cast<const char*>(rejects.data()), rejects.size());
  CHECK(text.find("x.txt\ta side file of 2 images with the same stem") != std::string::npos);
  CHECK(text.find("y.label\tits suffix cannot name a field: field 'label': the name is the "
                  "record's own") != std::string::npos);
}

TEST_CASE("a format that cannot keep the fields refuses the conversion and says which can") {
  test::TempDir dir;
  MakeSideFileTree(dir / "tree");
  const test::CommandResult run = test::RunCli(
      "convert --format recordio " + test::Quote(dir / "tree") + " " + test::Quote(dir / "ds"));
  CHECK(run.exit_code != 0);
  CHECK(run.output.find("does not store record fields") != std::string::npos);
  CHECK(run.output.find("the shard, lmdb, hdf5, wds and tfrecord formats keep it") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "ds"));
}

TEST_CASE("folder with side files -> LMDB or HDF5 -> extract gives every file back byte for byte") {
  for (const std::string format : {"lmdb", "hdf5"}) {
    CAPTURE(format);
    test::TempDir dir;
    MakeSideFileTree(dir / "tree");
    const fs::path ds = dir / (format == "hdf5" ? "ds.h5" : "ds");
    REQUIRE(test::RunCli("convert --format " + format + " " + test::Quote(dir / "tree") + " " +
                         test::Quote(ds))
                .exit_code == 0);
    REQUIRE(test::RunCli("verify " + test::Quote(ds)).exit_code == 0);
    REQUIRE(test::RunCli("extract " + test::Quote(ds) + " " + test::Quote(dir / "out")).exit_code ==
            0);
    CHECK(Files(dir / "tree") == Files(dir / "out"));
    // -> shard keeps them too.
    REQUIRE(
        test::RunCli("convert " + test::Quote(ds) + " " + test::Quote(dir / "shard")).exit_code ==
        0);
    REQUIRE(test::RunCli("extract " + test::Quote(dir / "shard") + " " + test::Quote(dir / "out2"))
                .exit_code == 0);
    CHECK(Files(dir / "tree") == Files(dir / "out2"));
  }
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

TEST_CASE("records with fields are byte-identical whatever the thread count") {
  test::TempDir dir;
  MakeSideFileTree(dir / "tree");
  for (const char* threads : {"1", "2", "5"}) {
    for (const char* format : {"shard", "lmdb"}) {
      const test::CommandResult run = test::RunCli(
          std::string("convert --threads ") + threads + " --format " + format + " " +
          test::Quote(dir / "tree") + " " + test::Quote(dir / (std::string(format) + threads)));
      REQUIRE_MESSAGE(run.exit_code == 0, run.output);
    }
  }
  for (const char* format : {"shard", "lmdb"}) {
    CAPTURE(format);
    const auto one = Files(dir / (std::string(format) + "1"));
    CHECK(one == Files(dir / (std::string(format) + "2")));
    CHECK(one == Files(dir / (std::string(format) + "5")));
  }
}

}  // namespace
}  // namespace packrec
