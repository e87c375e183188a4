// WebP records (encoding 4) in every format: stored as they came, and the manifest's version is the
// one that makes readers from before WebP refuse the dataset (docs/formats/*.md, "WebP records"),
// also when the conversion was interrupted after its WebP records and resumed.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "packrec/image.h"
#include "packrec/reader.h"
#include "packrec/writer.h"
#include "shard_test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

// A 6 x 4 lossless WebP written by PIL (pixel (x, y) = 3 * (18 y + 3 x + channel)).
const std::vector<std::byte>& TinyWebp() {
  static const std::vector<std::byte> bytes = [] {
    const unsigned char raw[] = {
        0x52, 0x49, 0x46, 0x46, 0x30, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50,
        0x38, 0x4c, 0x24, 0x00, 0x00, 0x00, 0x2f, 0x05, 0xc0, 0x00, 0x00, 0xcd, 0x64, 0x44,
        0xff, 0x03, 0x8a, 0xda, 0x36, 0x62, 0x3a, 0x5e, 0x47, 0xe8, 0xf8, 0x73, 0xdb, 0x10,
        0xa6, 0x5f, 0x21, 0x80, 0x00, 0x28, 0x68, 0x62, 0x02, 0xfc, 0x40, 0x4d, 0x3c, 0x00};
    std::vector<std::byte> out(sizeof raw);
    for (std::size_t i = 0; i < sizeof raw; ++i) out[i] = static_cast<std::byte>(raw[i]);
    return out;
  }();
  return bytes;
}

fs::path PathFor(const test::TempDir& dir, const std::string& format) {
  return dir / (format == "hdf5" ? "ds.h5" : "ds");
}

std::uint32_t WebpVersion(const std::string& format) { return format == "shard" ? 3 : 4; }
std::uint32_t PlainVersion(const std::string& format) { return format == "shard" ? 1 : 2; }

// Record i: the WebP when i is in `webp`, else one of the test JPEGs.
void AddRecords(DatasetWriter& writer, std::size_t begin, std::size_t end,
                const std::vector<std::size_t>& webp) {
  const std::vector<test::TestRecord> jpegs = test::MakeRecords(end);
  for (std::size_t i = begin; i < end; ++i) {
    const bool is_webp = std::find(webp.begin(), webp.end(), i) != webp.end();
    const std::vector<std::byte>& bytes = is_webp ? TinyWebp() : jpegs[i].bytes;
    const Result<ImageInfo> image = ProbeImage(bytes);
    REQUIRE_MESSAGE(image.ok(), image.status().ToString());
    REQUIRE((*&writer).Add({jpegs[i].key, jpegs[i].label, bytes, *image}).ok());
  }
}

void CheckRecords(const Reader& reader, std::size_t count, const std::vector<std::size_t>& webp) {
  REQUIRE(reader.size() == count);
  ReadScratch scratch;
  for (std::size_t i = 0; i < count; ++i) {
    CAPTURE(i);
    const Result<RecordView> view = reader.Read(i, scratch);
    REQUIRE(view.ok());
    const bool is_webp = std::find(webp.begin(), webp.end(), i) != webp.end();
    CHECK((view->encoding == Encoding::kWebp) == is_webp);
    if (is_webp) {
      CHECK(test::Copy(view->bytes) == TinyWebp());
      CHECK((view->width == 6 && view->height == 4 && view->channels == 3));
    }
  }
  test::CollectingReporter reporter;
  CHECK(reader.Verify(reporter).problems == 0);
}

TEST_CASE("WebP probes as encoding 4 with its size, and a WebP cut short is refused") {
  const Result<ImageInfo> info = ProbeImage(TinyWebp());
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
  CHECK(info->encoding == Encoding::kWebp);
  CHECK((info->width == 6 && info->height == 4 && info->channels == 3));
  CHECK(CheckDecodes(TinyWebp()).ok());
  std::vector<std::byte> cut(TinyWebp().begin(), TinyWebp().end() - 10);
  const Result<ImageInfo> refused = ProbeImage(cut);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("truncated WebP") != std::string::npos);
  std::vector<std::byte> damaged = TinyWebp();
  damaged[30] ^= std::byte{0xff};
  damaged[31] ^= std::byte{0xff};
  CHECK_FALSE(CheckDecodes(damaged).ok());
}

TEST_CASE("WebP records in shard, LMDB and HDF5 datasets: stored as they came, newer version") {
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    for (const bool with_webp : {false, true}) {
      CAPTURE(with_webp);
      test::TempDir dir;
      const std::vector<std::size_t> webp =
          with_webp ? std::vector<std::size_t>{1, 4} : std::vector<std::size_t>{};
      WriterOptions options;
      options.format = format;
      auto writer = CreateDatasetWriter(PathFor(dir, format), options);
      REQUIRE(writer.ok());
      AddRecords(**writer, 0, 6, webp);
      REQUIRE((*writer)->Finish({}).ok());
      auto reader = OpenDataset(PathFor(dir, format));
      REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
      CHECK((*reader)->info().format_version ==
            (with_webp ? WebpVersion(format) : PlainVersion(format)));
      CheckRecords(**reader, 6, webp);
    }
  }
}

TEST_CASE("a conversion resumed after its WebP records still writes the WebP version") {
  for (const std::string format : {"shard", "lmdb"}) {
    CAPTURE(format);
    test::TempDir dir;
    const fs::path path = PathFor(dir, format);
    WriterOptions options;
    options.format = format;
    options.resumable = true;
    options.shard_size_bytes = 4096;  // shards seal (and offer resume points) every few records
    options.checkpoint_bytes = 1;     // LMDB: a resume point after every record
    {
      auto writer = CreateDatasetWriter(path, options);
      REQUIRE(writer.ok());
      AddRecords(**writer, 0, 6, {0});
      REQUIRE((*writer)->Checkpoint([](std::uint64_t) { return std::string("{}"); }).ok());
      AddRecords(**writer, 6, 8, {0});  // after the resume point: redone
      (*writer)->AbortKeepingCheckpoint();
    }
    auto resumed = ResumeDatasetWriter(path, options);
    REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
    REQUIRE(resumed->records > 0);  // the WebP record (record 0) is before the resume point
    AddRecords(*resumed->writer, resumed->records, 10, {0});
    REQUIRE(resumed->writer->Finish({}).ok());
    auto reader = OpenDataset(path);
    REQUIRE(reader.ok());
    CHECK((*reader)->info().format_version == WebpVersion(format));
    CheckRecords(**reader, 10, {0});
  }
}

}  // namespace
}  // namespace packrec
