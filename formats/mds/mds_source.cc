// MDS import: one shard in memory at a time (MDS shards are small: 64 MiB by default), samples
// bounds-checked against the shard before a byte is read.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <optional>

#include "core/endian.h"
#include "core/file_io.h"
#include "dataset/payload.h"
#include "ingest/source_util.h"
#include "mds/mds_format.h"

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
  const nlohmann::json index = nlohmann::json::parse(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), nullptr, false);
  const auto bad = [&](const std::string& why) {
    return Status::InvalidInput(index_path.string() + ": " + why);
  };
  if (index.is_discarded() || !index.is_object()) return bad("not a JSON object");
  if (!index.contains("shards") || !index["shards"].is_array()) return bad("no \"shards\" array");
  std::vector<Shard> shards;
  for (const nlohmann::json& entry : index["shards"]) {
    const std::string where = "shard " + std::to_string(shards.size());
    if (!entry.is_object() || entry.value("format", "") != "mds") {
      return bad(where + " is not an MDS shard (format \"mds\"); only MDS is read");
    }
    Shard shard;
    if (!entry.contains("samples") || !entry["samples"].is_number_unsigned()) {
      return bad(where + ": no sample count");
    }
    shard.samples = entry["samples"].get<std::uint64_t>();
    const nlohmann::json& names = entry["column_names"];
    const nlohmann::json& encodings = entry["column_encodings"];
    const nlohmann::json& sizes = entry["column_sizes"];
    if (!names.is_array() || !encodings.is_array() || !sizes.is_array() ||
        names.size() != encodings.size() || names.size() != sizes.size()) {
      return bad(where + ": column_names, column_encodings and column_sizes do not match");
    }
    for (std::size_t c = 0; c < names.size(); ++c) {
      if (!names[c].is_string() || !encodings[c].is_string() ||
          !(sizes[c].is_null() || sizes[c].is_number_unsigned())) {
        return bad(where + ": column " + std::to_string(c) + " is not described properly");
      }
      Column column{names[c].get<std::string>(), encodings[c].get<std::string>(), std::nullopt};
      if (sizes[c].is_number_unsigned()) column.size = sizes[c].get<std::uint32_t>();
      shard.columns.push_back(std::move(column));
    }
    const nlohmann::json compression = entry.value("compression", nlohmann::json());
    const nlohmann::json& raw = entry["raw_data"];
    const nlohmann::json zip = entry.value("zip_data", nlohmann::json());
    const std::string raw_name =
        raw.is_object() && raw.contains("basename") && raw["basename"].is_string()
            ? raw["basename"].get<std::string>()
            : "";
    std::error_code error;
    if (!raw_name.empty() && fs::is_regular_file(dir / raw_name, error)) {
      shard.file = raw_name;  // already decompressed (Streaming keeps both when it can)
    } else if (zip.is_object() && zip.contains("basename") && zip["basename"].is_string()) {
      const std::string codec = compression.is_string() ? compression.get<std::string>() : "";
      if (codec != "zstd" && !codec.starts_with("zstd:")) {
        return bad(where + ": compression \"" + codec + "\" is not supported (zstd only)");
      }
      shard.file = zip["basename"].get<std::string>();
      shard.zstd = true;
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

class MdsSource final : public RecordSource {
 public:
  MdsSource(fs::path dir, std::vector<Shard> shards, SourceOptions options)
      : dir_(std::move(dir)), shards_(std::move(shards)), options_(std::move(options)) {
    for (const Shard& shard : shards_) {
      files_.push_back(dir_ / shard.file);
      total_ += shard.samples;
    }
  }

  Result<bool> Next(SourceRecord& record) override {
    for (;;) {
      if (!loaded_) {
        if (shard_index_ == shards_.size()) return false;
        record = SourceRecord{};
        record.origin = files_[shard_index_].string();
        record.status = LoadShard();
        if (!record.status.ok()) {
          ++shard_index_;  // the next shard may be fine
          return true;
        }
      }
      if (sample_ == samples_) {
        loaded_ = false;
        data_ = {};
        mapped_ = MappedFile();
        decompressed_ = {};
        ++shard_index_;
        continue;
      }
      record = SourceRecord{};
      const std::uint32_t begin = LoadLE<std::uint32_t>(data_.data() + 4 + 4 * sample_);
      const std::uint32_t end = LoadLE<std::uint32_t>(data_.data() + 8 + 4 * sample_);
      record.origin = RecordOrigin(files_[shard_index_], sample_, begin);
      record.status = ParseSample(begin, end, record);
      ++sample_;
      return true;
    }
  }

  std::vector<std::string> classes() const override { return {}; }
  SourceFormat format() const override { return SourceFormat::kMds; }
  const std::vector<fs::path>& files() const override { return files_; }
  std::uint64_t size_hint() const override { return total_; }

 private:
  // Reads, decompresses and checks one shard's sample table.
  Status LoadShard() {
    const Shard& shard = shards_[shard_index_];
    // Raw shards are mapped, not copied: a 64 MiB copy costs more than the import's own work.
    PACKREC_ASSIGN_OR_RETURN(mapped_, MappedFile::Open(files_[shard_index_]));
    mapped_.AdviseWillNeed();  // MDS shards are small (64 MiB by default): ask for all of it
    std::span<const std::byte> bytes = mapped_.bytes();
    if (shard.zstd) {
      PACKREC_ASSIGN_OR_RETURN(decompressed_, DecompressZstdFrames(bytes, kMaxShardBytes,
                                                                   files_[shard_index_].string()));
      mapped_ = MappedFile();
      bytes = decompressed_;
    }
    if (bytes.size() < 4) {
      return Status::Truncated("shard of " + std::to_string(bytes.size()) +
                               " bytes has no sample count");
    }
    const std::uint64_t count = LoadLE<std::uint32_t>(bytes.data());
    if (count != shard.samples) {
      return Status::Corruption("holds " + std::to_string(count) + " samples, index.json says " +
                                std::to_string(shard.samples));
    }
    if ((bytes.size() - 4) / 4 < count + 1) {
      return Status::Truncated("sample table cut short (expected " +
                               std::to_string(4 + 4 * (count + 1)) + " bytes, got " +
                               std::to_string(bytes.size()) + ")");
    }
    const std::uint64_t table_end = 4 + 4 * (count + 1);
    std::uint64_t previous = table_end;
    for (std::uint64_t i = 0; i <= count; ++i) {
      const std::uint64_t offset = LoadLE<std::uint32_t>(bytes.data() + 4 + 4 * i);
      if (offset < previous || offset > bytes.size()) {
        return Status::Corruption("sample offset " + std::to_string(i) + " (" +
                                  std::to_string(offset) + ") is out of order or past the end (" +
                                  std::to_string(bytes.size()) + " bytes)");
      }
      previous = offset;
    }
    data_ = bytes;
    samples_ = count;
    sample_ = 0;
    loaded_ = true;
    return Status::OK();
  }

  const Column* Pick(const std::string& wanted, std::initializer_list<const char*> usual,
                     std::size_t* index) const {
    const std::vector<Column>& columns = shards_[shard_index_].columns;
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

  Status ParseSample(std::uint32_t begin, std::uint32_t end, SourceRecord& record) {
    const std::vector<Column>& columns = shards_[shard_index_].columns;
    const std::span<const std::byte> sample(data_.data() + begin, end - begin);
    // Where each column's bytes lie in the sample.
    std::vector<std::span<const std::byte>> fields(columns.size());
    std::size_t variable = 0;
    for (const Column& column : columns) variable += column.size ? 0 : 1;
    if (sample.size() / 4 < variable) {
      return Status::Truncated("sample of " + std::to_string(sample.size()) +
                               " bytes is shorter than its size header");
    }
    std::size_t position = 4 * variable, next_size = 0;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::uint64_t size = columns[c].size
                                     ? *columns[c].size
                                     : LoadLE<std::uint32_t>(sample.data() + 4 * next_size++);
      if (size > sample.size() - position) {
        return Status::Corruption("column " + columns[c].name + " of " + std::to_string(size) +
                                  " bytes runs past the sample's end");
      }
      fields[c] = sample.subspan(position, static_cast<std::size_t>(size));
      position += static_cast<std::size_t>(size);
    }
    std::size_t image_column = 0, label_column = 0, key_column = 0;
    const Column* image =
        Pick(options_.image_field, {"image", "img", "jpg", "jpeg", "png", "x"}, &image_column);
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
    if (const Column* label =
            Pick(options_.label_field, {"label", "cls", "y", "target"}, &label_column)) {
      PACKREC_RETURN_IF_ERROR(ParseLabel(*label, fields[label_column], &record.label));
    } else if (!options_.label_field.empty()) {
      return Status::InvalidInput("no column " + options_.label_field);
    }
    const Column* key =
        Pick(options_.key_field, {"key", "filename", "__key__", "path", "id"}, &key_column);
    if (key != nullptr && (key->encoding == "str" || key->encoding == "bytes") &&
        !fields[key_column].empty()) {
      record.key.assign(reinterpret_cast<const char*>(fields[key_column].data()),
                        fields[key_column].size());
    } else {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "/%09llu.", static_cast<unsigned long long>(sample_));
      record.key = files_[shard_index_].filename().string() + suffix +
                   std::string(SniffImageExtension(fields[image_column]));
    }
    record.bytes.assign(fields[image_column].begin(), fields[image_column].end());
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
      if (!ParseLabelText({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, &parsed)) {
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

  fs::path dir_;
  std::vector<Shard> shards_;
  SourceOptions options_;
  std::vector<fs::path> files_;
  std::uint64_t total_ = 0;
  std::size_t shard_index_ = 0;
  bool loaded_ = false;
  MappedFile mapped_;
  std::vector<std::byte> decompressed_;
  std::span<const std::byte> data_;  // the loaded shard: in mapped_ or decompressed_
  std::uint64_t samples_ = 0;
  std::uint64_t sample_ = 0;
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenMdsSource(const fs::path& dir,
                                                    const SourceOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(std::vector<Shard> shards, ReadIndex(dir));
  return std::unique_ptr<RecordSource>(new MdsSource(dir, std::move(shards), options));
}

}  // namespace packrec::mds
