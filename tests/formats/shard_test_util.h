// Builders for shard datasets used by the format tests.
#ifndef PACKREC_TESTS_FORMATS_SHARD_TEST_UTIL_H_
#define PACKREC_TESTS_FORMATS_SHARD_TEST_UTIL_H_

#include <doctest/doctest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "packrec/convert.h"
#include "packrec/image.h"
#include "packrec/reader.h"
#include "packrec/synth.h"
#include "packrec/writer.h"
#include "test_util.h"

namespace packrec::test {

struct TestRecord {
  std::string key;
  std::uint32_t label = 0;
  std::vector<std::byte> bytes;
};

// `count` real JPEGs of varied sizes (about 2-12 KB each).
inline std::vector<TestRecord> MakeRecords(std::size_t count, std::uint64_t seed = 1) {
  std::vector<TestRecord> records;
  for (std::size_t i = 0; i < count; ++i) {
    const auto w = static_cast<std::uint32_t>(32 + (i * 37 + seed) % 96);
    const auto h = static_cast<std::uint32_t>(24 + (i * 53 + seed) % 80);
    records.push_back({"class" + std::to_string(i % 3) + "/img " + std::to_string(i) + ".jpg",
                       static_cast<std::uint32_t>(i % 3), MakeJpeg(w, h, seed * 1000 + i)});
  }
  return records;
}

// As WriterOptions::expected_payload_bytes: WriteDataset puts the records' exact total there.
inline constexpr std::uint64_t kExactPayloadBytes = ~std::uint64_t{0};

inline void WriteDataset(const std::filesystem::path& dir, const std::vector<TestRecord>& records,
                         WriterOptions options = {}) {
  if (options.expected_payload_bytes == kExactPayloadBytes) {
    options.expected_payload_bytes = 0;
    for (const TestRecord& record : records) options.expected_payload_bytes += record.bytes.size();
  }
  auto writer = CreateDatasetWriter(dir, options);
  REQUIRE_MESSAGE(writer.ok(), writer.status().ToString());
  for (const TestRecord& record : records) {
    auto info = ProbeImage(record.bytes);
    ImageInfo image = info.ok() ? *info : ImageInfo{};
    REQUIRE((*writer)->Add({record.key, record.label, record.bytes, image}).ok());
  }
  DatasetMetadata metadata;
  metadata.classes = {"class0", "class1", "class2"};
  metadata.listing_hash = "0000000000000000";
  REQUIRE((*writer)->Finish(metadata).ok());
}

// Opens `path` (any format) for sharing with loaders; the test stops if it does not open.
inline std::shared_ptr<const Reader> OpenShared(const std::filesystem::path& path) {
  auto reader = OpenDataset(path);
  REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
  return std::shared_ptr<const Reader>(std::move(*reader));
}

// Every record of `a` and `b` has the same key, label and bytes, in the same order.
inline void CheckSameRecords(const Reader& a, const Reader& b) {
  REQUIRE(a.size() == b.size());
  ReadScratch sa, sb;
  for (std::uint64_t i = 0; i < a.size(); ++i) {
    auto ra = a.Read(i, sa);
    auto rb = b.Read(i, sb);
    REQUIRE((ra.ok() && rb.ok()));
    REQUIRE(ra->key == rb->key);
    REQUIRE(ra->label == rb->label);
    REQUIRE(std::equal(ra->bytes.begin(), ra->bytes.end(), rb->bytes.begin(), rb->bytes.end()));
    REQUIRE(ra->fields.size() == rb->fields.size());
    for (std::size_t f = 0; f < ra->fields.size(); ++f) {
      REQUIRE(ra->fields[f].present == rb->fields[f].present);
      REQUIRE(std::equal(ra->fields[f].bytes.begin(), ra->fields[f].bytes.end(),
                         rb->fields[f].bytes.begin(), rb->fields[f].bytes.end()));
    }
  }
}

// A synthetic ImageFolder tree of real JPEGs (and some PNGs), about size x size*7/8 pixels.
inline void SynthTree(const std::filesystem::path& out, std::uint32_t classes,
                      std::uint32_t per_class, std::uint64_t seed = 1, std::uint32_t size = 400) {
  SynthOptions options;
  options.classes = classes;
  options.per_class = per_class;
  options.seed = seed;
  options.mean_width = size;
  options.mean_height = size * 7 / 8;
  auto stats = WriteSyntheticTree(out, options);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
}

// `tree` exported into `out` as one file of `format` ("tfrecord" or "recordio"), and where each
// of its records starts, from the index written beside it (DALI's "offset size" lines for
// TFRecord, MXNet's "number offset" for RecordIO).
struct OneFileExport {
  std::filesystem::path file;
  std::vector<std::uint64_t> offsets;
};
inline OneFileExport ExportOneFile(const std::filesystem::path& tree,
                                   const std::filesystem::path& out, const std::string& format) {
  ConvertOptions options;
  options.source = tree;
  options.output = out;
  options.writer.format = format;
  auto stats = Convert(options);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  const std::string extension = format == "recordio" ? ".rec" : ".tfrecord";
  OneFileExport exported;
  exported.file = out / ("shard-000000" + extension);
  REQUIRE(std::filesystem::exists(exported.file));
  REQUIRE_FALSE(std::filesystem::exists(out / ("shard-000001" + extension)));
  std::ifstream index(out / "shard-000000.idx");
  for (std::uint64_t first = 0, second = 0; index >> first >> second;) {
    exported.offsets.push_back(format == "recordio" ? second : first);
  }
  REQUIRE(!exported.offsets.empty());
  return exported;
}

inline std::vector<std::byte> Copy(std::span<const std::byte> bytes) {
  return {bytes.begin(), bytes.end()};
}

class CollectingReporter final : public VerifyReporter {
 public:
  void Report(const VerifyProblem& problem) override { problems.push_back(problem); }
  std::vector<VerifyProblem> problems;
};

}  // namespace packrec::test

#endif  // PACKREC_TESTS_FORMATS_SHARD_TEST_UTIL_H_
