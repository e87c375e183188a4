// What only the HDF5 format has: the pixels layout, and /data written in place when the payload
// total is announced (and still correct when the announcement was wrong).
#include <doctest/doctest.h>
#include <hdf5.h>

#include <algorithm>
#include <chrono>

#include "core/random.h"
#include "packrec/convert.h"
#include "packrec/dataset_ops.h"
#include "packrec/synth.h"
#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::Copy;

std::vector<fs::path> LeftoversBeside(const fs::path& file) {
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(file.parent_path())) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp") != std::string::npos) leftovers.push_back(entry.path());
  }
  return leftovers;
}

// A few bytes of HDF5 metadata can declare far more values than the file stores (unwritten
// storage reads as fill values). Each index dataset the reader sizes a buffer by (here the key
// blob, the one whose length no record count fixes) must store what it declares.
TEST_CASE("hdf5: a dataset declaring 2^40 values it does not store is refused, not allocated") {
  test::TempDir dir;
  WriterOptions options;
  options.format = "hdf5";
  test::WriteDataset(dir / "ds.h5", test::MakeRecords(5), options);
  {
    const hid_t file = H5Fopen((dir / "ds.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    REQUIRE(H5Ldelete(file, "key_bytes", H5P_DEFAULT) >= 0);
    const hsize_t declared = hsize_t{1} << 40;
    const hid_t space = H5Screate_simple(1, &declared, nullptr);
    const hid_t dataset =
        H5Dcreate2(file, "key_bytes", H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(dataset >= 0);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Fclose(file);
  }
  CHECK(fs::file_size(dir / "ds.h5") < 1024 * 1024);
  const auto start = std::chrono::steady_clock::now();
  auto reader = OpenDataset(dir / "ds.h5");
  REQUIRE_FALSE(reader.ok());
  CHECK(reader.status().code() == StatusCode::kCorruption);
  CHECK_MESSAGE(reader.status().message().find("/key_bytes declares 1099511627776 values") !=
                    std::string::npos,
                reader.status().ToString());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("hdf5 in place: a wrong payload total still gives an exact file, nothing left over") {
  const auto records = test::MakeRecords(30);
  std::uint64_t total = 0;
  for (const auto& record : records) total += record.bytes.size();
  // Exact, too large (an input rejected after the total was taken) and too small (an input grew).
  for (const std::uint64_t announced : {total, total + 777, total - 1000, std::uint64_t{1}}) {
    CAPTURE(announced);
    test::TempDir dir;
    WriterOptions options;
    options.format = "hdf5";
    options.expected_payload_bytes = announced;
    test::WriteDataset(dir / "ds.h5", records, options);
    CHECK(LeftoversBeside(dir / "ds.h5").empty());
    auto reader = OpenDataset(dir / "ds.h5");
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    REQUIRE((*reader)->size() == records.size());
    CHECK((*reader)->info().payload_bytes == total);
    ReadScratch scratch;
    for (std::uint64_t i = 0; i < records.size(); ++i) {
      auto view = (*reader)->Read(i, scratch);
      REQUIRE(view.ok());
      CHECK(Copy(view->bytes) == records[i].bytes);
    }
    test::CollectingReporter reporter;
    CHECK((*reader)->Verify(reporter).problems == 0);
    // Every byte written once: the file is the payloads plus a little HDF5 metadata.
    CHECK(fs::file_size(dir / "ds.h5") < total + 64 * 1024);
  }
}

TEST_CASE("hdf5 pixels: every record is what DecodeResizedRgb makes of its source") {
  test::TempDir dir;
  SynthOptions synth;
  synth.classes = 2;
  synth.per_class = 6;
  synth.mean_width = 120;
  synth.mean_height = 90;
  REQUIRE(WriteSyntheticTree(dir / "tree", synth).ok());
  // A grayscale JPEG and a PNG too: both come out as RGB.
  test::WriteBytes(dir / "tree" / "n00000000" / "gray.jpg", test::MakeJpeg(50, 70, 4, true));
  test::WriteBytes(dir / "tree" / "n00000000" / "rgb.png", test::MakePng(40, 30, 5));
  for (const Compression compression : {Compression::kNone, Compression::kDeflate}) {
    CAPTURE(static_cast<int>(compression));
    ConvertOptions options;
    options.source = dir / "tree";
    options.output = dir / ("pixels" + std::to_string(static_cast<int>(compression)) + ".h5");
    options.writer.format = "hdf5";
    options.writer.hdf5.layout = Hdf5Layout::kPixels;
    options.writer.hdf5.pixel_height = 24;
    options.writer.hdf5.pixel_width = 40;
    options.writer.compression = compression;
    auto stats = Convert(options);
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
    REQUIRE(stats->records_written == 14);
    auto listing = ListImageFolder(dir / "tree");
    REQUIRE(listing.ok());
    auto reader = OpenDataset(options.output);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    REQUIRE((*reader)->size() == listing->items.size());
    std::uint64_t seen = 0;
    REQUIRE((*reader)
                ->ForEach([&](const RecordView& view) {
                  const SourceItem& item = listing->items[view.index];
                  CHECK(view.key == item.key);
                  CHECK(view.label == item.label);
                  CHECK(view.encoding == Encoding::kRawRgb);
                  CHECK(view.width == 40);
                  CHECK(view.height == 24);
                  CHECK(view.channels == 3);
                  auto expected = DecodeResizedRgb(test::ReadBytes(item.path), 40, 24);
                  REQUIRE(expected.ok());
                  CHECK(Copy(view.bytes) == *expected);
                  ++seen;
                  return Status::OK();
                })
                .ok());
    CHECK(seen == 14);
    test::CollectingReporter reporter;
    CHECK(VerifyDataset(**reader, VerifyOptions{.deep = true}, reporter).problems == 0);
    // extract writes binary PPMs of the stored pixels.
    auto extracted =
        ExtractDataset(**reader, dir / ("out" + std::to_string(static_cast<int>(compression))));
    REQUIRE_MESSAGE(extracted.ok(), extracted.status().ToString());
    const auto ppm = test::ReadBytes(dir / ("out" + std::to_string(static_cast<int>(compression))) /
                                     "n00000000" / "gray.ppm");
    const std::string header = "P6\n40 24\n255\n";
    REQUIRE(ppm.size() == header.size() + 40 * 24 * 3);
    CHECK(std::equal(header.begin(), header.end(), ppm.begin(),
                     [](char c, std::byte b) { return static_cast<std::byte>(c) == b; }));
  }
}

TEST_CASE("hdf5 pixels: a flipped pixel is a checksum mismatch naming the record") {
  test::TempDir dir;
  WriterOptions options;
  options.format = "hdf5";
  options.hdf5.layout = Hdf5Layout::kPixels;
  options.hdf5.pixel_height = 8;
  options.hdf5.pixel_width = 16;
  std::vector<std::vector<std::byte>> images;
  SplitMix64 random(9);
  for (int i = 0; i < 5; ++i) {
    std::vector<std::byte> image(8 * 16 * 3);
    for (std::byte& b : image) b = static_cast<std::byte>(random.Next());
    images.push_back(std::move(image));
  }
  {
    auto writer = CreateDatasetWriter(dir / "p.h5", options);
    REQUIRE(writer.ok());
    for (int i = 0; i < 5; ++i) {
      const std::string key = "c/" + std::to_string(i) + ".jpg";
      const ImageInfo image{Encoding::kRawRgb, 16, 8, 3, Subsampling::kNone, false};
      REQUIRE((*writer)->Add({key, 0, images[static_cast<std::size_t>(i)], image}).ok());
    }
    // The wrong size is refused, naming the record.
    std::vector<std::byte> small(10);
    const auto refused =
        (*writer)->Add({"c/x.jpg", 0, small, {Encoding::kRawRgb, 16, 8, 3, {}, false}});
    CHECK(refused.code() == StatusCode::kInvalidArgument);
    CHECK(refused.message().find("record 5") != std::string::npos);
    REQUIRE((*writer)->Finish({{"c"}, "0000000000000000", "api", {}, "{}"}).ok());
  }
  auto bytes = test::ReadBytes(dir / "p.h5");
  auto it = std::search(bytes.begin(), bytes.end(), images[3].begin(), images[3].end());
  REQUIRE(it != bytes.end());
  it[100] ^= std::byte{1};
  test::WriteBytes(dir / "p.h5", bytes);
  auto reader = OpenDataset(dir / "p.h5");
  REQUIRE(reader.ok());
  ReadScratch scratch;
  auto damaged = (*reader)->Read(3, scratch);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.status().code() == StatusCode::kCorruption);
  CHECK(damaged.status().message().find("record 3 (key 'c/3.jpg')") != std::string::npos);
  auto fine = (*reader)->Read(2, scratch);
  REQUIRE(fine.ok());
  CHECK(Copy(fine->bytes) == images[2]);
  test::CollectingReporter reporter;
  CHECK((*reader)->Verify(reporter).problems == 1);
}

TEST_CASE("hdf5 layout options are checked before anything is written") {
  test::TempDir dir;
  struct Case {
    const char* what;
    WriterOptions options;
    const char* message;
  };
  auto pixels = [](std::string format) {
    WriterOptions options;
    options.format = std::move(format);
    options.hdf5.layout = Hdf5Layout::kPixels;
    options.hdf5.pixel_height = 4;
    options.hdf5.pixel_width = 4;
    return options;
  };
  std::vector<Case> cases;
  cases.push_back({"pixels for shards", pixels("shard"), "needs --format hdf5"});
  WriterOptions zstd = pixels("hdf5");
  zstd.compression = Compression::kZstd;
  cases.push_back({"zstd pixels", zstd, "deflate"});
  WriterOptions deflate;
  deflate.format = "hdf5";
  deflate.compression = Compression::kDeflate;
  cases.push_back({"deflate encoded", deflate, "pixels only"});
  WriterOptions size_only;
  size_only.format = "hdf5";
  size_only.hdf5.pixel_height = 4;
  size_only.hdf5.pixel_width = 4;
  cases.push_back({"size without pixels", size_only, "--size applies"});
  WriterOptions no_size = pixels("hdf5");
  no_size.hdf5.pixel_width = 0;
  cases.push_back({"pixels without size", no_size, "--size"});
  for (const Case& c : cases) {
    CAPTURE(c.what);
    // A shard dataset named x.h5 is refused for its name (ChooseOutputFormat): named x here.
    auto writer = CreateDatasetWriter(dir / (c.options.format == "hdf5" ? "x.h5" : "x"), c.options);
    REQUIRE_FALSE(writer.ok());
    CHECK(writer.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(writer.status().message().find(c.message) != std::string::npos,
                  writer.status().ToString());
    CHECK(fs::is_empty(dir.path()));
  }
}

}  // namespace
}  // namespace packrec
