// TFRecord export: shard-NNNNNN.tfrecord of tf.Example records with the keys TensorFlow's
// ImageNet scripts use, and shard-NNNNNN.idx ("offset size" per record, the index DALI's
// fn.readers.tfrecord takes, as its tfrecord2idx writes it).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/crc32c.h"
#include "core/endian.h"
#include "storage/export_writer.h"
#include "tfrecord/example.pb.h"
#include "tfrecord/tfrecord_format.h"

namespace packrec::tfrecord {
namespace {

namespace fs = std::filesystem;

void SetBytes(tensorflow::Example& example, const char* name, std::string_view value) {
  (*example.mutable_features()->mutable_feature())[name].mutable_bytes_list()->add_value(
      std::string(value));
}

void SetInt(tensorflow::Example& example, const char* name, std::int64_t value) {
  (*example.mutable_features()->mutable_feature())[name].mutable_int64_list()->add_value(value);
}

class TfRecordWriter final : public ExportWriter {
 public:
  TfRecordWriter(OutputDirectory out, WriterOptions options)
      : ExportWriter(std::move(out), std::move(options), "tfrecord") {}
  ~TfRecordWriter() override { Abort(); }

 private:
  Status StartFile(std::uint32_t file_number) override {
    const std::string name = ExportFileName(file_number, "");
    PACKREC_ASSIGN_OR_RETURN(data_, ExportFile::Create(dir(), name + ".tfrecord"));
    PACKREC_ASSIGN_OR_RETURN(index_, ExportFile::Create(dir(), name + ".idx"));
    return Status::OK();
  }

  Status WriteRecord(const RecordInput& record, std::uint64_t index) override {
    PACKREC_ASSIGN_OR_RETURN(const std::string_view extension, ExportImageExtension(record, index));
    example_.Clear();
    const std::string_view image(reinterpret_cast<const char*>(record.bytes.data()),
                                 record.bytes.size());
    SetBytes(example_, "image/encoded", image);
    SetBytes(example_, "image/format", extension == "jpg" ? "jpeg" : extension);
    SetBytes(example_, "image/filename", record.key);
    SetInt(example_, "image/class/label", record.label);
    SetInt(example_, "image/height", record.image.height);
    SetInt(example_, "image/width", record.image.width);
    SetInt(example_, "image/channels", record.image.channels);
    if (!ClassName(record.label).empty()) {
      SetBytes(example_, "image/class/text", ClassName(record.label));
    }
    PACKREC_RETURN_IF_ERROR(SetFields(record, index));
    // Deterministic: maps serialize in key order, so one dataset always exports the same bytes.
    serialized_.clear();
    {
      google::protobuf::io::StringOutputStream stream(&serialized_);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      if (!example_.SerializeToCodedStream(&coded)) {
        return Status::Internal("cannot serialize the tf.Example of record " +
                                std::to_string(index));
      }
    }
    const std::uint64_t offset = data_->size();
    std::array<std::byte, kFrameHeaderSize> header{};
    StoreLE<std::uint64_t>(header.data(), serialized_.size());
    StoreLE<std::uint32_t>(header.data() + 8,
                           MaskCrc32c(Crc32c(std::span<const std::byte>(header).first(8))));
    std::array<std::byte, kFrameFooterSize> footer{};
    StoreLE<std::uint32_t>(footer.data(), MaskCrc32c(Crc32c(AsBytes(serialized_))));
    PACKREC_RETURN_IF_ERROR(data_->Append(header));
    PACKREC_RETURN_IF_ERROR(data_->Append(AsBytes(serialized_)));
    PACKREC_RETURN_IF_ERROR(data_->Append(footer));
    const std::string line =
        std::to_string(offset) + " " + std::to_string(data_->size() - offset) + "\n";
    return index_->Append(AsBytes(line));
  }

  // The feature a field is written as: the name it had in a TFRecord it came from, else its own.
  static const std::string& FeatureName(const FieldSpec& spec) {
    return spec.source_name.empty() ? spec.name : spec.source_name;
  }

  // Each present field as a feature (replacing image/format, image/height, ... where a field has
  // that name: the source's own value is kept): int64[] an int64_list, float32[] a float_list, a
  // JSON list of strings from a TFRecord a bytes_list of them, anything else a bytes_list of its
  // one value.
  Status SetFields(const RecordInput& record, std::uint64_t index) {
    const std::vector<FieldSpec>& schema = options().fields;
    for (std::size_t f = 0; f < schema.size() && f < record.fields.size(); ++f) {
      if (!record.fields[f].present) continue;
      const FieldSpec& spec = schema[f];
      const std::span<const std::byte> value = record.fields[f].bytes;
      tensorflow::Feature& feature =
          (*example_.mutable_features()->mutable_feature())[FeatureName(spec)];
      feature.Clear();
      if (spec.type == FieldType::kInt64) {
        auto* list = feature.mutable_int64_list();
        for (std::size_t at = 0; at + 8 <= value.size(); at += 8) {
          list->add_value(LoadLE<std::int64_t>(&value[at]));
        }
      } else if (spec.type == FieldType::kFloat32) {
        auto* list = feature.mutable_float_list();
        for (std::size_t at = 0; at + 4 <= value.size(); at += 4) {
          const std::uint32_t bits = LoadLE<std::uint32_t>(&value[at]);
          float number = 0;
          std::memcpy(&number, &bits, sizeof number);
          list->add_value(number);
        }
      } else if (spec.type == FieldType::kJson && !spec.source_name.empty()) {
        const nlohmann::json strings = nlohmann::json::parse(AsText(value), nullptr, false);
        if (!strings.is_array()) {
          return Status::InvalidArgument("record " + std::to_string(index) + ": field '" +
                                         spec.name + "' is not the list of strings it was");
        }
        auto* list = feature.mutable_bytes_list();
        for (const nlohmann::json& text : strings) {
          if (!text.is_string()) {
            return Status::InvalidArgument("record " + std::to_string(index) + ": field '" +
                                           spec.name + "' is not the list of strings it was");
          }
          list->add_value(text.get<std::string>());
        }
      } else {
        feature.mutable_bytes_list()->add_value(std::string(AsText(value)));
      }
    }
    return Status::OK();
  }

  // A field may not take the place of the image, its file name, label or class name.
  Status CheckSchema(const std::vector<FieldSpec>& schema) const override {
    std::set<std::string> names;
    for (const FieldSpec& spec : schema) {
      const std::string& name = FeatureName(spec);
      if (name == "image/encoded" || name == "image/filename" || name == "image/class/label" ||
          name == "image/class/text" || !names.insert(name).second) {
        return Status::NotSupported("field '" + spec.name + "' would be feature " + name +
                                    ", which the export writes already; rename or drop it "
                                    "(--drop-fields)");
      }
    }
    return Status::OK();
  }

  std::uint64_t OpenFileSize() const override { return data_->size(); }

  Status SealFile(std::vector<std::string>& files, std::uint64_t& bytes) override {
    PACKREC_RETURN_IF_ERROR(data_->Seal());
    PACKREC_RETURN_IF_ERROR(index_->Seal());
    files = {data_->name(), index_->name()};
    bytes = data_->size() + index_->size();
    data_.reset();
    index_.reset();
    return Status::OK();
  }

  void DiscardFile() override {
    if (data_) data_->Discard();
    if (index_) index_->Discard();
    data_.reset();
    index_.reset();
  }

  std::unique_ptr<ExportFile> data_;
  std::unique_ptr<ExportFile> index_;
  tensorflow::Example example_;
  std::string serialized_;
};

}  // namespace

Result<std::unique_ptr<DatasetWriter>> CreateTfRecordWriter(const fs::path& dir,
                                                            const WriterOptions& options) {
  return CreateExportWriter<TfRecordWriter>(dir, options);
}

}  // namespace packrec::tfrecord
