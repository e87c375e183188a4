#include <doctest/doctest.h>

#include "packrec/ingest.h"
#include "test_util.h"

namespace packrec {
namespace {

TEST_CASE("caffe list: 'path label', split at the last space, relative to the root") {
  test::TempDir dir;
  test::WriteText(dir / "train.txt",
                  "# comment\nn01/a.jpg 0\n\nn02/with space.jpg 7\r\n./n03/c.png 12\n");
  auto listing = ReadListFile(dir / "train.txt", dir.path(), ListFileKind::kAuto);
  REQUIRE(listing.ok());
  CHECK(listing->kind == "caffe-list");
  REQUIRE(listing->items.size() == 3);
  CHECK(listing->items[0].key == "n01/a.jpg");
  CHECK(listing->items[1].key == "n02/with space.jpg");
  CHECK(listing->items[1].label == 7);
  CHECK(listing->items[2].key == "n03/c.png");
  CHECK(listing->items[2].label == 12);
  CHECK(listing->items[2].path == dir / "n03/c.png");
}

TEST_CASE("mxnet .lst: index, label (float as im2rec writes it), path") {
  test::TempDir dir;
  test::WriteText(dir / "train.lst", "0\t3.000000\tcls/a.jpg\n1\t5\t2\tcls/b c.jpg\n");
  auto listing = ReadListFile(dir / "train.lst", dir / "images", ListFileKind::kAuto);
  // The root must exist.
  CHECK(listing.status().code() == StatusCode::kInvalidArgument);
  std::filesystem::create_directories(dir / "images");
  listing = ReadListFile(dir / "train.lst", dir / "images", ListFileKind::kAuto);
  REQUIRE(listing.ok());
  CHECK(listing->kind == "mxnet-list");
  REQUIRE(listing->items.size() == 2);
  CHECK(listing->items[0].label == 3);
  CHECK(listing->items[1].label == 5);  // first label of a multi-label line
  CHECK(listing->items[1].key == "cls/b c.jpg");
}

TEST_CASE("list file errors name the file and line") {
  test::TempDir dir;
  test::WriteText(dir / "bad.txt", "a.jpg 1\nb.jpg minus-one\n");
  auto caffe = ReadListFile(dir / "bad.txt", dir.path(), ListFileKind::kCaffe);
  REQUIRE_FALSE(caffe.ok());
  CHECK(caffe.status().code() == StatusCode::kInvalidInput);
  CHECK(caffe.status().message().find("bad.txt:2") != std::string::npos);

  test::WriteText(dir / "bad.lst", "0\t1.5\ta.jpg\n");
  auto mxnet = ReadListFile(dir / "bad.lst", dir.path(), ListFileKind::kMxnet);
  REQUIRE_FALSE(mxnet.ok());
  CHECK(mxnet.status().message().find("bad.lst:1") != std::string::npos);

  auto missing = ReadListFile(dir / "none.txt", dir.path(), ListFileKind::kAuto);
  CHECK(missing.status().code() == StatusCode::kNotFound);

  test::WriteBytes(dir / "image.jpg", test::MakeJpeg(8, 8, 1));
  auto binary = ReadListFile(dir / "image.jpg", dir.path(), ListFileKind::kAuto);
  CHECK(binary.status().code() == StatusCode::kInvalidInput);
  CHECK(binary.status().message().find("not a directory") != std::string::npos);
}

}  // namespace
}  // namespace packrec
