// MDS import: raw shards read in order through a window, only the columns a record is made from;
// zstd shards decompressed one at a time (small: 64 MiB by default). Every sample is
// bounds-checked against the shard's size before a byte of it is read.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <optional>

#include "core/endian.h"
#include "core/file_io.h"
#include "mds/mds_columns.h"
#include "mds/mds_format.h"
#include "storage/field_block.h"
#include "storage/json_util.h"
#include "storage/payload.h"
#include "storage/source_util.h"

namespace packrec::mds {
namespace {

namespace fs = std::filesystem;

// A decompressed shard larger than this is refused (MDS's own limit is per shard and small).
constexpr std::uint64_t kMaxShardBytes = 1ull << 32;

struct Column {
  std::string name;
  std::string encoding;
  std::optional<std::uint32_t> size;  // fixed-size encodings
};

struct Shard {
  std::string file;  // relative to the directory: the raw or the zstd basename
  bool zstd = false;
  std::uint64_t samples = 0;
  std::vector<Column> columns;
};

Result<std::vector<Shard>> ReadIndex(const fs::path& dir) {
  const fs::path index_path = dir / "index.json";
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadWholeFile(index_path));
  const nlohmann::json index = nlohmann::json::parse(AsText(bytes), nullptr, false);
  const auto bad = [&](const std::string& why) {
    return Status::InvalidInput(index_path.string() + ": " + why);
  };
  if (index.is_discarded() || !index.is_object()) return bad("not a JSON object");
  if (!index.contains("shards") || !index["shards"].is_array()) return bad("no \"shards\" array");
  std::vector<Shard> shards;
  for (const nlohmann::json& entry : index["shards"]) {
    const std::string where = "shard " + std::to_string(shards.size());
    if (!entry.is_object() || FieldOrNull(entry, "format") != "mds") {
      return bad(where + " is not an MDS shard (format \"mds\"); only MDS is read");
    }
    Shard shard;
    if (!FieldOrNull(entry, "samples").is_number_unsigned())
      return bad(where + ": no sample count");
    shard.samples = entry["samples"].get<std::uint64_t>();
    const nlohmann::json& names = FieldOrNull(entry, "column_names");
    const nlohmann::json& encodings = FieldOrNull(entry, "column_encodings");
    const nlohmann::json& sizes = FieldOrNull(entry, "column_sizes");
    if (!names.is_array() || !encodings.is_array() || !sizes.is_array() ||
        names.size() != encodings.size() || names.size() != sizes.size()) {
      return bad(where + ": column_names, column_encodings and column_sizes do not match");
    }
    for (std::size_t c = 0; c < names.size(); ++c) {
      if (!names[c].is_string() || !encodings[c].is_string() ||
          !(sizes[c].is_null() ||
            (sizes[c].is_number_unsigned() && sizes[c].get<std::uint64_t>() <= UINT32_MAX))) {
        return bad(where + ": column " + std::to_string(c) + " is not described properly");
      }
      Column column{names[c].get<std::string>(), encodings[c].get<std::string>(), std::nullopt};
      if (sizes[c].is_number_unsigned()) column.size = sizes[c].get<std::uint32_t>();
      shard.columns.push_back(std::move(column));
    }
    const nlohmann::json& compression = FieldOrNull(entry, "compression");
    const nlohmann::json& raw = FieldOrNull(entry, "raw_data");
    const nlohmann::json& zip = FieldOrNull(entry, "zip_data");
    const nlohmann::json& raw_basename = FieldOrNull(raw, "basename");
    const std::string raw_name = raw_basename.is_string() ? raw_basename.get<std::string>() : "";
    std::error_code error;
    if (!raw_name.empty() && fs::is_regular_file(dir / raw_name, error)) {
      shard.file = raw_name;  // already decompressed (Streaming keeps both when it can)
    } else if (FieldOrNull(zip, "basename").is_string()) {
      const std::string codec = compression.is_string() ? compression.get<std::string>() : "";
      if (codec != "zstd" && !codec.starts_with("zstd:")) {
        return bad(where + ": compression \"" + codec + "\" is not supported (zstd only)");
      }
      shard.file = zip["basename"].get<std::string>();
      shard.zstd = true;
    } else if (!raw_name.empty()) {
      shard.file = raw_name;  // missing, or not a file: one reject naming it when it is read
    } else {
      return bad(where + ": names no shard file (raw_data.basename)");
    }
    if (shard.file.find("..") != std::string::npos || shard.file.starts_with('/')) {
      return bad(where + ": shard file name " + shard.file + " leaves the dataset directory");
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

class MdsSource final : public FileListSource {
 public:
  MdsSource(std::vector<Shard> shards, std::vector<fs::path> files, SourceOptions options)
      : FileListSource(std::move(files)), shards_(std::move(shards)), options_(std::move(options)) {
    for (const Shard& shard : shards_) total_ += shard.samples;
    if (!options_.read_ahead) in_.read_ahead.Disable();
    // The schema: the first shard's columns beside the image, label and key, as kept.
    if (!shards_.empty()) {
      for (const Column& column : shards_.front().columns) {
        if (IsRecordColumn(shards_.front().columns, column.name)) continue;
        FieldSpec spec = FieldOfColumn(column.name, column.encoding);
        if (!options_.KeepsField(spec.name)) continue;
        fields_.push_back(std::move(spec));
        field_columns_.push_back(column);
      }
    }
  }

  std::vector<FieldSpec> fields() const override { return fields_; }

  Result<bool> Next(SourceRecord& record) override {
    for (;;) {
      if (!loaded_) {
        if (file_index_ == files_.size()) return false;
        record = SourceRecord{};
        record.origin = files_[file_index_].string();
        record.status = LoadShard();
        if (!record.status.ok()) {
          EndShard();  // the next shard may be fine
          return true;
        }
      }
      if (sample_ + 1 >= offsets_.size() || read_failed_) {
        EndShard();
        continue;
      }
      record = SourceRecord{};
      const std::uint32_t begin = offsets_[sample_];
      const std::uint32_t end = offsets_[sample_ + 1];
      record.origin = RecordOrigin(files_[file_index_], sample_, begin);
      if (in_.is_open()) in_.Prefetch();
      record.status = ParseSample(begin, end, record);
      ++sample_;
      in_.position = end;
      return true;
    }
  }

  std::vector<std::string> classes() const override { return {}; }
  SourceFormat format() const override { return SourceFormat::kMds; }
  std::uint64_t size_hint() const override { return total_; }

 private:
  std::uint64_t position_in_file() const override {
    if (!loaded_) return 0;
    return in_.is_open() ? in_.position : shard_file_bytes_;  // a zstd shard is read whole
  }

  void EndShard() {
    const std::uint64_t size = in_.is_open() ? in_.size : shard_file_bytes_;
    in_.Close();
    decompressed_ = {};
    offsets_.clear();
    loaded_ = false;
    read_failed_ = false;
    LeaveFile(size);
  }

  // Opens the shard, and reads and checks its sample table. A raw shard is then read in order
  // through a window, sample by sample, rather than mapped: memory stays bounded, and a shard cut
  // short under the import is an error naming it instead of SIGBUS. A zstd shard is decompressed
  // whole (it is small: 64 MiB by default).
  Status LoadShard() {
    const Shard& shard = shards_[file_index_];
    const fs::path& path = files_[file_index_];
    shard_file_bytes_ = 0;
    sample_ = 0;
    loaded_ = true;
    std::uint64_t shard_bytes = 0;
    if (shard.zstd) {
      PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> compressed, ReadWholeFile(path));
      shard_file_bytes_ = compressed.size();
      PACKREC_ASSIGN_OR_RETURN(decompressed_,
                               DecompressZstdFrames(compressed, kMaxShardBytes, path.string()));
      shard_bytes = decompressed_.size();
    } else {
      PACKREC_RETURN_IF_ERROR(in_.Open(path));
      in_.Prefetch();
      shard_bytes = in_.size;
    }
    if (shard_bytes < 4) {
      return Status::Truncated("shard of " + std::to_string(shard_bytes) +
                               " bytes has no sample count");
    }
    std::vector<std::byte> table;
    PACKREC_RETURN_IF_ERROR(ReadShard(0, 4, table));
    const std::uint64_t count = LoadLE<std::uint32_t>(table.data());
    if (count != shard.samples) {
      return Status::Corruption("holds " + std::to_string(count) + " samples, index.json says " +
                                std::to_string(shard.samples));
    }
    if ((shard_bytes - 4) / 4 < count + 1) {
      return Status::Truncated("sample table cut short (expected " +
                               std::to_string(4 + 4 * (count + 1)) + " bytes, got " +
                               std::to_string(shard_bytes) + ")");
    }
    table.clear();
    PACKREC_RETURN_IF_ERROR(ReadShard(4, static_cast<std::size_t>(4 * (count + 1)), table));
    const std::uint64_t table_end = 4 + 4 * (count + 1);
    std::uint64_t previous = table_end;
    offsets_.resize(static_cast<std::size_t>(count + 1));
    for (std::size_t i = 0; i < offsets_.size(); ++i) {
      const std::uint32_t offset = LoadLE<std::uint32_t>(table.data() + 4 * i);
      if (offset < previous || offset > shard_bytes) {
        return Status::Corruption("sample offset " + std::to_string(i) + " (" +
                                  std::to_string(offset) + ") is out of order or past the end (" +
                                  std::to_string(shard_bytes) + " bytes)");
      }
      offsets_[i] = offset;
      previous = offset;
    }
    in_.position = offsets_[0];
    return MapColumns();
  }

  // Appends the `length` bytes at `offset` of the loaded shard, which the sample table has
  // bounds-checked, to `out`. A failed read (the file shrank, an I/O error) ends the shard.
  Status ReadShard(std::uint64_t offset, std::size_t length, std::vector<std::byte>& out) {
    if (!in_.is_open()) {
      const auto from = decompressed_.begin() + static_cast<std::ptrdiff_t>(offset);
      out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(length));
      return Status::OK();
    }
    Status read = in_.AppendTo(offset, length, out);
    if (!read.ok()) read_failed_ = true;
    return read;
  }

  // Whether the column is the one a record's image, label or key comes from.
  bool IsRecordColumn(const std::vector<Column>& columns, const std::string& name) const {
    std::size_t index = 0;
    for (const Column* picked : {Pick(columns, options_.image_field, kImageColumns, &index),
                                 Pick(columns, options_.label_field, kLabelColumns, &index),
                                 Pick(columns, options_.key_field, kKeyColumns, &index)}) {
      if (picked != nullptr && picked->name == name) return true;
    }
    return false;
  }

  // Which field each column of the loaded shard fills (nullopt: none). InvalidInput for a column
  // the first shard, which made the schema, does not have.
  Status MapColumns() {
    const std::vector<Column>& columns = shards_[file_index_].columns;
    column_fields_.assign(columns.size(), std::nullopt);
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (IsRecordColumn(columns, columns[c].name)) continue;
      if (!options_.KeepsField(FieldOfColumn(columns[c].name, columns[c].encoding).name)) continue;
      for (std::size_t f = 0; f < field_columns_.size(); ++f) {
        if (field_columns_[f].name == columns[c].name &&
            field_columns_[f].encoding == columns[c].encoding) {
          column_fields_[c] = f;
        }
      }
      if (!column_fields_[c]) {
        return Status::InvalidInput("its column " + columns[c].name + " (" + columns[c].encoding +
                                    ") is not one the first shard has, which the dataset's "
                                    "fields come from");
      }
    }
    return Status::OK();
  }

  static constexpr std::initializer_list<const char*> kImageColumns = {"image", "img", "jpg",
                                                                       "jpeg",  "png", "x"};
  static constexpr std::initializer_list<const char*> kLabelColumns = {"label", "cls", "y",
                                                                       "target"};
  static constexpr std::initializer_list<const char*> kKeyColumns = {"key", "filename", "__key__",
                                                                     "path", "id"};

  const Column* Pick(const std::string& wanted, std::initializer_list<const char*> usual,
                     std::size_t* index) const {
    return Pick(shards_[file_index_].columns, wanted, usual, index);
  }

  static const Column* Pick(const std::vector<Column>& columns, const std::string& wanted,
                            std::initializer_list<const char*> usual, std::size_t* index) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (!wanted.empty() ? columns[c].name == wanted : false) {
        *index = c;
        return &columns[c];
      }
    }
    if (!wanted.empty()) return nullptr;
    for (const char* name : usual) {
      for (std::size_t c = 0; c < columns.size(); ++c) {
        if (columns[c].name == name) {
          *index = c;
          return &columns[c];
        }
      }
    }
    return nullptr;
  }

  // Reads only the columns a record is made from: the image into the record, the label and the
  // key into buffers of their own, in file order.
  Status ParseSample(std::uint32_t begin, std::uint32_t end, SourceRecord& record) {
    const std::vector<Column>& columns = shards_[file_index_].columns;
    const std::uint64_t sample_size = end - begin;
    std::size_t variable = 0;
    for (const Column& column : columns) variable += column.size ? 0 : 1;
    if (sample_size / 4 < variable) {
      return Status::Truncated("sample of " + std::to_string(sample_size) +
                               " bytes is shorter than its size header");
    }
    sizes_header_.clear();
    PACKREC_RETURN_IF_ERROR(ReadShard(begin, 4 * variable, sizes_header_));
    // Where each column's bytes lie in the sample: (offset in the sample, size).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> fields(columns.size());
    std::uint64_t position = 4 * variable;
    std::size_t next_size = 0;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::uint64_t size =
          columns[c].size ? *columns[c].size
                          : LoadLE<std::uint32_t>(sizes_header_.data() + 4 * next_size++);
      if (size > sample_size - position) {
        return Status::Corruption("column " + columns[c].name + " of " + std::to_string(size) +
                                  " bytes runs past the sample's end");
      }
      fields[c] = {position, size};
      position += size;
    }
    std::size_t image_column = 0, label_column = 0, key_column = 0;
    const Column* image = Pick(options_.image_field, kImageColumns, &image_column);
    if (image == nullptr) {
      return Status::InvalidInput("no image column (" +
                                  (options_.image_field.empty()
                                       ? std::string("image, img, jpg, jpeg, png, x")
                                       : options_.image_field) +
                                  "; pass --image-field)");
    }
    if (image->encoding != "bytes" && image->encoding != "jpeg" && image->encoding != "png") {
      return Status::NotSupported("image column " + image->name + " has encoding " +
                                  image->encoding + "; encoded images (bytes, jpeg, png) only");
    }
    const Column* label = Pick(options_.label_field, kLabelColumns, &label_column);
    if (label == nullptr && !options_.label_field.empty()) {
      return Status::InvalidInput("no column " + options_.label_field);
    }
    const Column* key = Pick(options_.key_field, kKeyColumns, &key_column);
    if (key != nullptr && key->encoding != "str" && key->encoding != "bytes") key = nullptr;
    label_bytes_.clear();
    key_bytes_.clear();
    for (std::size_t c = 0; c < columns.size(); ++c) {
      std::vector<std::byte>* into = c == image_column                       ? &record.bytes
                                     : label != nullptr && c == label_column ? &label_bytes_
                                     : key != nullptr && c == key_column     ? &key_bytes_
                                                                             : nullptr;
      if (into == nullptr && column_fields_[c]) into = &field_bytes_;
      if (into == nullptr) continue;  // a column left out (--drop-fields): not read
      into->clear();
      PACKREC_RETURN_IF_ERROR(
          ReadShard(begin + fields[c].first, static_cast<std::size_t>(fields[c].second), *into));
      if (into == &field_bytes_) PACKREC_RETURN_IF_ERROR(KeepColumn(*column_fields_[c], record));
    }
    if (label != nullptr) PACKREC_RETURN_IF_ERROR(ParseLabel(*label, label_bytes_, &record.label));
    if (!key_bytes_.empty()) {
      record.key.assign(reinterpret_cast<const char*>(key_bytes_.data()), key_bytes_.size());
    } else {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "/%09llu.", static_cast<unsigned long long>(sample_));
      record.key = files_[file_index_].filename().string() + suffix +
                   std::string(SniffImageExtension(record.bytes));
    }
    return Status::OK();
  }

  // The column just read (field_bytes_) as its field's value in `record`.
  Status KeepColumn(std::size_t field, SourceRecord& record) {
    const FieldSpec& spec = fields_[field];
    const std::string& encoding = field_columns_[field].encoding;
    std::vector<std::byte> value;
    Status converted = ColumnValue(encoding, spec, field_bytes_, value);
    if (converted.ok()) converted = ValidateFieldValue(spec, value);
    if (!converted.ok()) {
      return Status::InvalidInput("column " + field_columns_[field].name + " (" + encoding +
                                  "): " + converted.message());
    }
    if (record.fields.size() <= field) record.fields.resize(fields_.size());
    record.fields[field] = std::move(value);
    return Status::OK();
  }

  static Status ParseLabel(const Column& column, std::span<const std::byte> bytes,
                           std::uint32_t* label) {
    const auto bad = [&] {
      return Status::InvalidInput("label column " + column.name + " (" + column.encoding +
                                  ") does not hold a non-negative integer below 2^32");
    };
    std::int64_t value = 0;
    const std::string& e = column.encoding;
    if (e == "str" || e == "str_int") {
      std::uint32_t parsed = 0;
      if (!ParseLabelText(AsText(bytes), &parsed)) {
        return bad();
      }
      *label = parsed;
      return Status::OK();
    }
    if ((e == "int" || e == "int64" || e == "uint64") && bytes.size() == 8) {
      value = static_cast<std::int64_t>(LoadLE<std::uint64_t>(bytes.data()));
    } else if ((e == "int32" || e == "uint32") && bytes.size() == 4) {
      value = e == "int32" ? static_cast<std::int32_t>(LoadLE<std::uint32_t>(bytes.data()))
                           : LoadLE<std::uint32_t>(bytes.data());
    } else if ((e == "int16" || e == "uint16") && bytes.size() == 2) {
      value = e == "int16" ? static_cast<std::int16_t>(LoadLE<std::uint16_t>(bytes.data()))
                           : LoadLE<std::uint16_t>(bytes.data());
    } else if ((e == "int8" || e == "uint8") && bytes.size() == 1) {
      value =
          e == "int8" ? static_cast<std::int8_t>(bytes[0]) : static_cast<std::uint8_t>(bytes[0]);
    } else {
      return bad();
    }
    if (value < 0 || value > INT64_C(0xffffffff) || (e == "uint64" && value < 0)) return bad();
    *label = static_cast<std::uint32_t>(value);
    return Status::OK();
  }

  std::vector<Shard> shards_;
  SourceOptions options_;
  std::uint64_t total_ = 0;
  bool loaded_ = false;                  // the shard files_[file_index_] is open and its table read
  bool read_failed_ = false;             // reading it on would fail the same way: it ends
  SequentialFile in_;                    // a raw shard
  std::vector<std::byte> decompressed_;  // a zstd shard
  std::uint64_t shard_file_bytes_ = 0;   // a zstd shard's file
  std::vector<std::uint32_t> offsets_;   // the sample table: samples + 1 offsets
  std::uint64_t sample_ = 0;
  std::vector<std::byte> sizes_header_, label_bytes_, key_bytes_;  // reused sample to sample
  std::vector<std::byte> field_bytes_;
  std::vector<FieldSpec> fields_;      // the schema (the first shard's other columns, kept)
  std::vector<Column> field_columns_;  // the column each field comes from
  std::vector<std::optional<std::size_t>> column_fields_;  // the loaded shard's columns' fields
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenMdsSource(const fs::path& dir,
                                                    const SourceOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(std::vector<Shard> shards, ReadIndex(dir));
  std::vector<fs::path> files;
  for (const Shard& shard : shards) files.push_back(dir / shard.file);
  return std::unique_ptr<RecordSource>(new MdsSource(std::move(shards), std::move(files), options));
}

}  // namespace packrec::mds
