// Records that carry fields beside the image: the schema, the shard format's version 2, the
// values' checks at Add, projection, and damage named by record and field.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/endian.h"
#include "core/file_io.h"
#include "packrec/loader.h"
#include "packrec/reader.h"
#include "packrec/writer.h"
#include "shard/shard_layout.h"
#include "shard_test_util.h"
#include "storage/field_block.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::vector<FieldSpec> DetectionSchema() {
  return {{"caption", FieldType::kText, "txt", {}},
          {"meta", FieldType::kJson, "json", {}},
          {"mask", FieldType::kBytes, "mask.png", {}},
          {"boxes", FieldType::kFloat32, "", {4}},
          {"labels", FieldType::kInt64, "", {}}};
}

template <typename T>
std::vector<std::byte> Numbers(std::vector<T> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian hosts only (x86, arm)
  return bytes;
}

std::vector<std::byte> Text(const std::string& text) {
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return {begin, begin + text.size()};
}

// Record i: every field, except that odd records lack the mask and record 2 has no boxes.
struct FieldRecord {
  std::vector<std::vector<std::byte>> values;
  std::vector<FieldView> views;
};

FieldRecord MakeFieldRecord(std::size_t i) {
  FieldRecord record;
  const auto n = static_cast<float>(i);
  record.values = {Text("a photo, number " + std::to_string(i) + " \xc3\xa9t\xc3\xa9\n"),
                   Text("{\"i\": " + std::to_string(i) + ", \"tags\": [\"x\"]}"),
                   test::MakePng(8, 8 + static_cast<std::uint32_t>(i), i),
                   Numbers<float>({n, 1, 2, 3, 10, 11, 12, 13 + n}),
                   Numbers<std::int64_t>({static_cast<std::int64_t>(i), -1})};
  for (std::size_t f = 0; f < record.values.size(); ++f) {
    const bool present = !(f == 2 && i % 2 == 1) && !(f == 3 && i == 2);
    record.views.push_back({present, present ? std::span<const std::byte>(record.values[f])
                                             : std::span<const std::byte>()});
  }
  return record;
}

void WriteFieldDataset(const fs::path& dir, std::size_t count, WriterOptions options = {}) {
  options.fields = DetectionSchema();
  auto writer = CreateDatasetWriter(dir, options);
  REQUIRE_MESSAGE(writer.ok(), writer.status().ToString());
  const std::vector<test::TestRecord> images = test::MakeRecords(count);
  for (std::size_t i = 0; i < count; ++i) {
    const FieldRecord fields = MakeFieldRecord(i);
    RecordInput input{images[i].key, images[i].label, images[i].bytes,
                      *ProbeImage(images[i].bytes)};
    input.fields = fields.views;
    const Status added = (*writer)->Add(input);
    REQUIRE_MESSAGE(added.ok(), added.ToString());
  }
  REQUIRE((*writer)->Finish({}).ok());
}

bool SameBytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

void CheckFieldRecords(const Reader& reader, std::size_t count) {
  REQUIRE(reader.info().fields == DetectionSchema());
  ReadScratch scratch;
  for (std::size_t i = 0; i < count; ++i) {
    const FieldRecord expected = MakeFieldRecord(i);
    auto view = reader.Read(i, scratch);
    REQUIRE_MESSAGE(view.ok(), view.status().ToString());
    REQUIRE(view->fields.size() == expected.views.size());
    for (std::size_t f = 0; f < expected.views.size(); ++f) {
      CHECK(view->fields[f].present == expected.views[f].present);
      CHECK(SameBytes(view->fields[f].bytes, expected.views[f].bytes));
    }
  }
}

// Where a test writes its dataset of `format`: HDF5's is one file.
fs::path DatasetPath(const test::TempDir& dir, const std::string& name, const std::string& format) {
  return dir / (format == "hdf5" ? name + ".h5" : name);
}

TEST_CASE("shard, LMDB and HDF5 datasets keep every field of every record, absent ones absent") {
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    test::TempDir dir;
    WriterOptions options;
    options.format = format;
    WriteFieldDataset(DatasetPath(dir, "ds", format), 7, options);
    auto reader = OpenDataset(DatasetPath(dir, "ds", format));
    REQUIRE(reader.ok());
    CHECK((*reader)->info().format_version == (format == "shard" ? 2u : 3u));
    CheckFieldRecords(**reader, 7);
    ReadScratch scratch;
    auto boxes = (*reader)->ReadField(1, 3, scratch);
    REQUIRE(boxes.ok());
    // In a shard, numeric values are 8-byte aligned: they can be viewed as int64 / float in place.
    if (format == "shard") CHECK(reinterpret_cast<std::uintptr_t>(boxes->bytes.data()) % 8 == 0);
    float second_box_last = 0;
    std::memcpy(&second_box_last, boxes->bytes.data() + 7 * sizeof(float), sizeof(float));
    CHECK(second_box_last == 14.0f);
    CHECK_FALSE((*reader)->ReadField(2, 3, scratch)->present);
    CHECK((*reader)->ReadField(0, 5, scratch).status().code() == StatusCode::kOutOfRange);
    // Compressed images, several shards or LMDB transactions: the same fields; ForEach streams
    // them too.
    WriterOptions small = options;
    small.shard_size_bytes = 4096;
    small.lmdb.commit_records = 2;
    small.compression = Compression::kZstd;
    WriteFieldDataset(DatasetPath(dir, "small", format), 7, small);
    auto split = OpenDataset(DatasetPath(dir, "small", format));
    REQUIRE(split.ok());
    if (format == "shard") CHECK((*split)->info().files.size() > 1);
    CheckFieldRecords(**split, 7);
    std::size_t seen = 0;
    REQUIRE((*split)
                ->ForEach(
                    [&](const RecordView& view) {
                      const FieldRecord expected = MakeFieldRecord(view.index);
                      REQUIRE(view.fields.size() == expected.views.size());
                      for (std::size_t f = 0; f < expected.views.size(); ++f) {
                        CHECK(view.fields[f].present == expected.views[f].present);
                        CHECK(SameBytes(view.fields[f].bytes, expected.views[f].bytes));
                      }
                      ++seen;
                      return Status::OK();
                    },
                    2)
                .ok());
    CHECK(seen == 5);
    test::CollectingReporter reporter;
    CHECK((*split)->Verify(reporter).problems == 0);
  }
}

TEST_CASE("a dataset without fields is still written as shard version 1, byte for byte") {
  test::TempDir dir;
  test::WriteDataset(dir / "plain", test::MakeRecords(3));
  auto reader = OpenDataset(dir / "plain");
  REQUIRE(reader.ok());
  CHECK((*reader)->info().format_version == 1);
  CHECK((*reader)->info().fields.empty());
  const std::vector<std::byte> manifest_bytes = test::ReadBytes(dir / "plain" / "manifest.json");
  const std::string manifest(reinterpret_cast<const char*>(manifest_bytes.data()),
                             manifest_bytes.size());
  CHECK(manifest.find("\"fields\"") == std::string::npos);
  ReadScratch scratch;
  CHECK((*reader)->Read(0, scratch)->fields.empty());
}

TEST_CASE("the labels of every record are read from the index, not the images") {
  test::TempDir dir;
  WriteFieldDataset(dir / "ds", 9);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  auto labels = (*reader)->ReadLabels();
  REQUIRE(labels.ok());
  REQUIRE(labels->size() == 9);
  for (std::size_t i = 0; i < 9; ++i) CHECK((*labels)[i] == i % 3);
  // Record 4's image zeroed: its label and fields still read, its image fails its checksum.
  ReadScratch scratch;
  auto location = (*reader)->Locate(4);
  REQUIRE(location.ok());
  std::vector<std::byte> bytes = test::ReadBytes(location->file);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(location->offset), location->stored_size,
              std::byte{0});
  test::WriteBytes(location->file, bytes);
  auto damaged = OpenDataset(dir / "ds");
  REQUIRE(damaged.ok());
  CHECK((*damaged)->ReadLabels().ok());
  auto caption = (*damaged)->ReadField(4, 0, scratch);
  REQUIRE(caption.ok());
  CHECK(SameBytes(caption->bytes, MakeFieldRecord(4).views[0].bytes));
  CHECK((*damaged)->Read(4, scratch).status().code() == StatusCode::kCorruption);
}

TEST_CASE("values that do not match their field are refused at Add, naming record and field") {
  test::TempDir dir;
  WriterOptions options;
  options.fields = DetectionSchema();
  auto writer = CreateDatasetWriter(dir / "ds", options);
  REQUIRE(writer.ok());
  const std::vector<test::TestRecord> images = test::MakeRecords(1);
  const auto add_with = [&](std::size_t field, std::vector<std::byte> value) {
    FieldRecord fields = MakeFieldRecord(0);
    fields.values[field] = std::move(value);
    fields.views[field] = {true, fields.values[field]};
    RecordInput input{images[0].key, 0, images[0].bytes, *ProbeImage(images[0].bytes)};
    input.fields = fields.views;
    return (*writer)->Add(input);
  };
  const Status text = add_with(0, {std::byte{0xc3}, std::byte{0x28}});
  CHECK(text.code() == StatusCode::kInvalidArgument);
  CHECK(text.message().find("field 'caption'") != std::string::npos);
  CHECK(text.message().find("UTF-8") != std::string::npos);
  const Status json = add_with(1, Text("{\"unterminated\": "));
  CHECK(json.message().find("field 'meta'") != std::string::npos);
  CHECK(json.message().find("JSON") != std::string::npos);
  const Status boxes = add_with(3, Numbers<float>({1, 2, 3}));
  CHECK(boxes.message().find("field 'boxes'") != std::string::npos);
  CHECK(boxes.message().find("N x 4") != std::string::npos);
  CHECK(add_with(4, Text("1234567")).code() == StatusCode::kInvalidArgument);
  CHECK(add_with(1, Text("[1, 2]")).ok());
  CHECK((*writer)->records_written() == 1);
}

TEST_CASE("a schema is checked: names unique and not the record's own, shapes on numbers only") {
  test::TempDir dir;
  const auto refused = [&](std::vector<FieldSpec> fields) {
    WriterOptions options;
    options.fields = std::move(fields);
    return CreateDatasetWriter(dir / "ds", options).status();
  };
  CHECK(refused({{"a", FieldType::kText, "", {}}, {"a", FieldType::kJson, "", {}}})
            .message()
            .find("appears twice") != std::string::npos);
  CHECK(refused({{"label", FieldType::kInt64, "", {}}}).code() == StatusCode::kInvalidArgument);
  CHECK(refused({{"", FieldType::kText, "", {}}}).code() == StatusCode::kInvalidArgument);
  CHECK(refused({{"a/b", FieldType::kText, "", {}}}).code() == StatusCode::kInvalidArgument);
  CHECK(refused({{"t", FieldType::kText, "", {4}}}).code() == StatusCode::kInvalidArgument);
  CHECK(refused({{"n", FieldType::kInt64, "", {0}}}).code() == StatusCode::kInvalidArgument);
  CHECK(refused({{"s", FieldType::kBytes, "../x", {}}}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("formats that do not store fields refuse a schema instead of dropping it") {
  test::TempDir dir;
  for (const std::string format : {"wds", "tfrecord"}) {
    WriterOptions options;
    options.format = format;
    options.fields = DetectionSchema();
    CAPTURE(format);
    Result<std::unique_ptr<DatasetWriter>> writer = CreateDatasetWriter(dir / format, options);
    CHECK_MESSAGE(writer.ok(), writer.status().ToString());
  }
  WriterOptions recordio;
  recordio.format = "recordio";
  recordio.fields = DetectionSchema();
  const Status status = CreateDatasetWriter(dir / "recordio", recordio).status();
  CHECK(status.code() == StatusCode::kNotSupported);
  CHECK(status.message().find("fields") != std::string::npos);
  WriterOptions datum;
  datum.format = "lmdb";
  datum.lmdb.values = LmdbValues::kCaffeDatum;
  datum.fields = DetectionSchema();
  CHECK(CreateDatasetWriter(dir / "datum", datum).status().code() == StatusCode::kNotSupported);
}

TEST_CASE("a flipped bit in any field's bytes is found and named by record and field") {
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    test::TempDir dir;
    WriterOptions options;
    options.format = format;
    const fs::path path = DatasetPath(dir, "ds", format);
    WriteFieldDataset(path, 4, options);
    const fs::path file = format == "hdf5"    ? path
                          : format == "shard" ? path / "shard-000000.pkr"
                                              : path / "data.mdb";
    const std::vector<std::byte> original = test::ReadBytes(file);
    for (std::size_t field = 0; field < DetectionSchema().size(); ++field) {
      CAPTURE(field);
      test::WriteBytes(file, original);
      const FieldRecord expected = MakeFieldRecord(2);
      if (!expected.views[field].present) continue;
      // The value's bytes, found in the file (they are stored as they are).
      const std::span<const std::byte> value = expected.views[field].bytes;
      const auto found = std::search(original.begin(), original.end(), value.begin(), value.end());
      REQUIRE(found != original.end());
      test::FlipByte(file, static_cast<std::uint64_t>(found - original.begin()) + value.size() / 2);
      auto reader = OpenDataset(path);
      REQUIRE(reader.ok());
      test::CollectingReporter collect;
      (*reader)->Verify(collect);
      REQUIRE(!collect.problems.empty());
      const std::string name = DetectionSchema()[field].name;
      const VerifyProblem& problem = collect.problems.front();
      CHECK(problem.record_index == 2u);
      CHECK(problem.status.message().find("field '" + name + "'") != std::string::npos);
      ReadScratch scratch;
      const Status read = (*reader)->ReadField(2, field, scratch).status();
      CHECK(read.code() == StatusCode::kCorruption);
      CHECK(read.message().find("field '" + name + "'") != std::string::npos);
      CHECK((*reader)->Read(2, scratch).status().code() == StatusCode::kCorruption);
    }
  }
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

TEST_CASE("the loader delivers the requested fields of each batch's records, in batch order") {
  test::TempDir dir;
  WriteFieldDataset(dir / "ds", 11);
  const std::shared_ptr<const Reader> reader = test::OpenShared(dir / "ds");
  for (const TransformKind transform : {TransformKind::kEval, TransformKind::kNone}) {
    CAPTURE(static_cast<int>(transform));
    LoaderOptions options;
    options.batch_size = 4;
    options.threads = 3;
    options.output_size = 32;
    options.resize_size = 32;
    options.transform = transform;
    options.fields = {"boxes", "caption", "mask"};  // schema fields 3, 0, 2
    auto loader = Loader::Create(reader, options);
    REQUIRE_MESSAGE(loader.ok(), loader.status().ToString());
    std::size_t records = 0;
    for (;;) {
      auto batch = (*loader)->Next();
      REQUIRE(batch.ok());
      if (*batch == nullptr) break;
      const Batch& b = **batch;
      REQUIRE(b.field_count() == 3);
      for (std::uint32_t i = 0; i < b.size(); ++i) {
        const FieldRecord expected = MakeFieldRecord(b.record_indices()[i]);
        const std::size_t schema_index[] = {3, 0, 2};
        for (std::size_t j = 0; j < 3; ++j) {
          const FieldView want = expected.views[schema_index[j]];
          CHECK(b.field(j, i).present == want.present);
          CHECK(SameBytes(b.field(j, i).bytes, want.bytes));
        }
      }
      records += b.size();
    }
    CHECK(records == 11);
  }
  LoaderOptions unknown;
  unknown.fields = {"masks"};
  const Status refused = Loader::Create(reader, unknown).status();
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("no field 'masks'") != std::string::npos);
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

// Adds records [begin, end) of the field test records to `writer`.
void AddFieldRecords(DatasetWriter& writer, std::size_t begin, std::size_t end) {
  const std::vector<test::TestRecord> images = test::MakeRecords(end);
  for (std::size_t i = begin; i < end; ++i) {
    const FieldRecord fields = MakeFieldRecord(i);
    RecordInput input{images[i].key, images[i].label, images[i].bytes,
                      *ProbeImage(images[i].bytes)};
    input.fields = fields.views;
    REQUIRE((*&writer).Add(input).ok());
  }
}

// (HDF5's resume point is always the start: a resumed HDF5 conversion writes everything again.)
TEST_CASE("a resumed conversion with fields ends with every field of every record") {
  for (const std::string format : {"shard", "lmdb"}) {
    CAPTURE(format);
    test::TempDir dir;
    const fs::path path = DatasetPath(dir, "ds", format);
    WriterOptions options;
    options.format = format;
    options.fields = DetectionSchema();
    options.resumable = true;
    options.shard_size_bytes = 4096;  // shards seal (and offer resume points) every few records
    options.checkpoint_bytes = 1;     // LMDB: a resume point after every record
    {
      auto writer = CreateDatasetWriter(path, options);
      REQUIRE(writer.ok());
      AddFieldRecords(**writer, 0, 6);
      REQUIRE((*writer)->Checkpoint([](std::uint64_t) { return std::string("{}"); }).ok());
      AddFieldRecords(**writer, 6, 8);  // after the resume point: redone
      (*writer)->AbortKeepingCheckpoint();
    }
    auto resumed = ResumeDatasetWriter(path, options);
    REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
    AddFieldRecords(*resumed->writer, resumed->records, 11);
    REQUIRE(resumed->writer->Finish({}).ok());
    auto reader = OpenDataset(path);
    REQUIRE(reader.ok());
    CHECK((*reader)->size() == 11);
    CheckFieldRecords(**reader, 11);
    test::CollectingReporter reporter;
    CHECK((*reader)->Verify(reporter).problems == 0);
  }
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

std::vector<std::byte> Bytes(std::string_view text) {
  const auto bytes = AsBytes(text);
  return {bytes.begin(), bytes.end()};
}

TEST_CASE("a field block written before the schema grew reads its new fields as absent") {
  const std::vector<std::byte> caption = Bytes("a caption");
  const std::vector<FieldView> one = {{true, caption}};
  std::vector<std::byte> short_block;
  REQUIRE(AppendFieldBlock(1, one, short_block).ok());
  std::vector<std::byte> empty_block;
  REQUIRE(AppendFieldBlock(0, {}, empty_block).ok());
  CHECK(empty_block.empty());
  std::vector<FieldView> views;
  // Three fields now: the first as written, the two added after it absent.
  REQUIRE(DecodeFieldBlock(short_block, 3, views).ok());
  REQUIRE(views.size() == 3);
  CHECK(views[0].present);
  CHECK(std::string(AsText(views[0].bytes)) == "a caption");
  CHECK_FALSE(views[1].present);
  CHECK_FALSE(views[2].present);
  CHECK(FieldTableEntries(short_block, 3).value() == 1);
  CHECK(FieldTableEntries(empty_block, 3).value() == 0);
  REQUIRE(DecodeFieldBlock(empty_block, 2, views).ok());
  CHECK_FALSE(views[0].present);
  // A full table reads as before; an absent-only block's length is its table's.
  std::vector<std::byte> absent;
  REQUIRE(AppendFieldBlock(2, {}, absent).ok());
  CHECK(FieldTableEntries(absent, 2).value() == 2);
  CHECK(FieldTableEntries(absent, 5).value() == 2);
  CHECK(DecodeFieldValue(short_block, 3, 0, /*verify=*/true).ok());
  // A block whose size ends no table, or an entry pointing into the table, is corrupt.
  std::vector<std::byte> ragged = absent;
  ragged.resize(ragged.size() + 8);
  CHECK(FieldTableEntries(ragged, 3).status().code() == StatusCode::kCorruption);
  std::vector<std::byte> into_table = short_block;
  StoreLE<std::uint32_t>(into_table.data(), 8);
  CHECK(FieldTableEntries(into_table, 3).status().code() == StatusCode::kCorruption);
}

TEST_CASE(
    "a schema grown mid-write reads back in every format, and a dataset without fields "
    "before the first one met") {
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    test::TempDir dir;
    WriterOptions options;
    options.format = format;
    options.shard_size_bytes = 4096;
    const fs::path path = dir / (format == "hdf5" ? "ds.h5" : "ds");
    auto writer = CreateDatasetWriter(path, options);
    REQUIRE(writer.ok());
    const std::vector<std::byte> image = test::MakeJpeg(16, 12, 3);
    const ImageInfo info = *ProbeImage(image);
    const std::vector<std::byte> text = Bytes("late caption");
    const std::vector<std::byte> numbers(16, std::byte{1});
    for (std::uint32_t i = 0; i < 12; ++i) {
      if (i == 5) {
        const std::vector<FieldSpec> added = {{"txt", FieldType::kText, "txt", {}}};
        REQUIRE((*writer)->AddFields(added).ok());
      }
      if (i == 8) {
        const std::vector<FieldSpec> added = {{"ids", FieldType::kInt64, "", {}}};
        REQUIRE((*writer)->AddFields(added).ok());
      }
      const std::string key = "r" + std::to_string(i) + ".jpg";
      std::vector<FieldView> values;
      if (i >= 5) values.push_back({i % 2 == 1, text});
      if (i >= 8) values.push_back({true, numbers});
      RecordInput record{key, i % 3, image, info};
      record.fields = values;
      REQUIRE((*writer)->Add(record).ok());
    }
    const std::vector<FieldSpec> taken = {{"txt", FieldType::kText, "", {}}};
    CHECK((*writer)->AddFields(taken).code() == StatusCode::kInvalidArgument);
    REQUIRE((*writer)->Finish(DatasetMetadata{}).ok());
    auto reader = OpenDataset(path);
    REQUIRE(reader.ok());
    REQUIRE((*reader)->info().fields.size() == 2);
    ReadScratch scratch;
    for (std::uint64_t i = 0; i < 12; ++i) {
      CAPTURE(i);
      auto view = (*reader)->Read(i, scratch);
      REQUIRE_MESSAGE(view.ok(), view.status().ToString());
      REQUIRE(view->fields.size() == 2);
      CHECK(view->fields[0].present == (i >= 5 && i % 2 == 1));
      CHECK(view->fields[1].present == (i >= 8));
      auto ids = (*reader)->ReadField(i, 1, scratch);
      REQUIRE(ids.ok());
      CHECK(ids->present == (i >= 8));
    }
  }
}

}  // namespace
}  // namespace packrec
