// TFRecord import: every frame's two CRCs checked, each record parsed as a tf.Example.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include "core/crc32c.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/keys.h"
#include "storage/source_util.h"
#include "tfrecord/example.pb.h"
#include "tfrecord/tfrecord_format.h"

namespace packrec::tfrecord {

bool LooksLikeFrameHeader(std::span<const std::byte> header) {
  return header.size() >= kFrameHeaderSize &&
         MaskCrc32c(Crc32c(header.first(8))) == LoadLE<std::uint32_t>(header.data() + 8);
}

namespace {

namespace fs = std::filesystem;

const tensorflow::Feature* FindFeature(const tensorflow::Example& example,
                                       const std::string& wanted,
                                       std::initializer_list<const char*> usual,
                                       std::string* found) {
  const auto& features = example.features().feature();
  if (!wanted.empty()) {
    const auto it = features.find(wanted);
    *found = wanted;
    return it == features.end() ? nullptr : &it->second;
  }
  for (const char* name : usual) {
    const auto it = features.find(name);
    if (it != features.end()) {
      *found = name;
      return &it->second;
    }
  }
  return nullptr;
}

class TfRecordSource final : public FileListSource {
 public:
  TfRecordSource(std::vector<fs::path> files, SourceOptions options)
      : FileListSource(std::move(files)), options_(std::move(options)) {
    if (!options_.read_ahead) in_.read_ahead.Disable();
  }

  Result<bool> Next(SourceRecord& record) override {
    for (;;) {
      if (!in_.is_open()) {
        if (file_index_ == files_.size()) return false;
        if (Status open = OpenCurrent(in_, options_); !open.ok()) {
          RejectUnopenedFile(record, open);
          return true;
        }
      }
      if (in_.position == in_.size) {
        EndFile();
        continue;
      }
      in_.Prefetch();
      ReadFrame(record);
      return true;
    }
  }

  std::vector<std::string> classes() const override {
    std::lock_guard lock(class_names_mutex_);
    return class_names_.Complete();
  }
  SourceFormat format() const override { return SourceFormat::kTfRecord; }

  bool DeferChecks() override {
    defer_checks_ = true;
    return true;
  }

  // A deferred record holds its frame's data and data CRC, and its key the fallback key.
  void FinishRecord(SourceRecord& record) const override {
    if (!record.status.ok()) return;
    const std::span<const std::byte> frame(record.bytes);
    const std::span<const std::byte> data = frame.first(frame.size() - kFrameFooterSize);
    if (MaskCrc32c(Crc32c(data)) != LoadLE<std::uint32_t>(data.data() + data.size())) {
      record.status = Status::Corruption("data CRC mismatch (the record's bytes are damaged)");
      return;
    }
    // One message a thread, reused: parsing into it keeps the allocations of the last record.
    thread_local tensorflow::Example example;
    record.status = ParseExample(data, std::move(record.key), example, record);
  }

 private:
  void EndFile() {
    in_.Close();
    LeaveFile(in_.size);
  }

  std::uint64_t position_in_file() const override { return in_.is_open() ? in_.position : 0; }

  // A frame that cannot be trusted ends the file: its length says where the next one starts.
  void FailFile(SourceRecord& record, Status status) {
    record.status = std::move(status);
    EndFile();
  }

  void ReadFrame(SourceRecord& record) {
    record = SourceRecord{};
    const fs::path& file = files_[file_index_];
    record.origin = RecordOrigin(file, in_.number, in_.position);
    const std::uint64_t left = in_.size - in_.position;
    std::array<std::byte, kFrameHeaderSize> header{};
    if (left < kFrameHeaderSize) {
      return FailFile(record, Status::Truncated("truncated frame header (expected " +
                                                std::to_string(kFrameHeaderSize) + " bytes, got " +
                                                std::to_string(left) + ")"));
    }
    if (Status read = in_.Read(in_.position, header); !read.ok()) {
      return FailFile(record, read);
    }
    if (!LooksLikeFrameHeader(header)) {
      return FailFile(record, Status::Corruption("frame length CRC mismatch (not a TFRecord frame, "
                                                 "or a damaged one); the rest of this file "
                                                 "cannot be framed and is not read"));
    }
    const std::uint64_t length = LoadLE<std::uint64_t>(header.data());
    if (length > left - kFrameHeaderSize || left - kFrameHeaderSize - length < kFrameFooterSize) {
      return FailFile(
          record, Status::Truncated("truncated record (expected " +
                                    std::to_string(kFrameHeaderSize + length + kFrameFooterSize) +
                                    " bytes, got " + std::to_string(left) + ")"));
    }
    // Deferred, the frame goes out as read: the checks and the parse run in FinishRecord.
    std::vector<std::byte>& frame = defer_checks_ ? record.bytes : buffer_;
    frame.clear();
    if (Status read = in_.AppendTo(in_.position + kFrameHeaderSize,
                                   static_cast<std::size_t>(length) + kFrameFooterSize, frame);
        !read.ok()) {
      record.bytes.clear();
      return FailFile(record, read);
    }
    in_.position += kFrameHeaderSize + length + kFrameFooterSize;
    char number[32];
    std::snprintf(number, sizeof number, "/%09llu.", static_cast<unsigned long long>(in_.number++));
    std::string fallback_key = file.filename().string() + number;
    if (defer_checks_) {
      record.key = std::move(fallback_key);
      return;
    }
    const std::span<const std::byte> data(buffer_.data(), static_cast<std::size_t>(length));
    if (MaskCrc32c(Crc32c(data)) != LoadLE<std::uint32_t>(buffer_.data() + length)) {
      record.status = Status::Corruption("data CRC mismatch (the record's bytes are damaged)");
      return;
    }
    record.status = ParseExample(data, std::move(fallback_key), example_, record);
  }

  // `fallback_key` ("FILE/NUMBER.", the extension sniffed from the image added) keys a record
  // without a filename feature.
  Status ParseExample(std::span<const std::byte> data, std::string fallback_key,
                      tensorflow::Example& example, SourceRecord& record) const {
    example.Clear();
    if (data.size() > INT32_MAX ||
        !example.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      return Status::InvalidInput("the record is not a tf.Example protobuf");
    }
    std::string name;
    std::set<std::string> consumed;  // the features a record's image, label, key come from
    const tensorflow::Feature* image =
        FindFeature(example, options_.image_field,
                    {"image/encoded", "image", "image_raw", "jpeg", "jpg", "png"}, &name);
    consumed.insert(name);
    if (image == nullptr || !image->has_bytes_list() || image->bytes_list().value_size() != 1) {
      return Status::InvalidInput("no image: feature " +
                                  (options_.image_field.empty()
                                       ? std::string("image/encoded (or image, image_raw, jpeg)")
                                       : options_.image_field) +
                                  " is missing or not one bytes value");
    }
    const std::string& bytes = image->bytes_list().value(0);
    const tensorflow::Feature* label = FindFeature(
        example, options_.label_field, {"image/class/label", "label", "class", "target"}, &name);
    if (label != nullptr) {
      if (!label->has_int64_list() || label->int64_list().value_size() < 1 ||
          label->int64_list().value(0) < 0 || label->int64_list().value(0) > INT64_C(0xffffffff)) {
        return Status::InvalidInput("feature " + name +
                                    " is not a non-negative int64 label below 2^32");
      }
      record.label = static_cast<std::uint32_t>(label->int64_list().value(0));
      consumed.insert(name);
    } else if (!options_.label_field.empty()) {
      return Status::InvalidInput("no feature " + options_.label_field);
    }
    const tensorflow::Feature* key = FindFeature(
        example, options_.key_field, {"image/filename", "filename", "image/key", "key"}, &name);
    if (key != nullptr && key->has_bytes_list() && key->bytes_list().value_size() == 1 &&
        !key->bytes_list().value(0).empty()) {
      record.key = key->bytes_list().value(0);
      consumed.insert(name);
    } else {
      record.key = std::move(fallback_key);
      record.key += SniffImageExtension(AsBytes(bytes));
    }
    std::string text_name;
    const tensorflow::Feature* text =
        FindFeature(example, "", {"image/class/text", "image/class/synset"}, &text_name);
    if (text != nullptr && text->has_bytes_list() && text->bytes_list().value_size() == 1) {
      std::lock_guard lock(class_names_mutex_);
      class_names_.Note(record.label, text->bytes_list().value(0));
      consumed.insert(text_name);
    }
    const auto view = AsBytes(bytes);
    record.bytes.assign(view.begin(), view.end());
    return KeepFeatures(example, consumed, record);
  }

  // The features packrec's TFRecord export writes beside each record's fields.
  static bool IsExportOwn(const std::string& name) {
    return name == "image/format" || name == "image/height" || name == "image/width" ||
           name == "image/channels";
  }

  // Every feature but those the record's image, label, key and class name came from, as a
  // self-typed field (SourceRecord::typed_fields), in name order: int64_list int64[],
  // float_list float32[], a bytes_list of one value text (UTF-8) or bytes, of several values
  // (and any under image/object/, which hold one value per object) a JSON list of strings.
  Status KeepFeatures(const tensorflow::Example& example, const std::set<std::string>& consumed,
                      SourceRecord& record) const {
    std::vector<const std::string*> names;
    for (const auto& [name, feature] : example.features().feature()) {
      if (consumed.contains(name)) continue;
      names.push_back(&name);
    }
    std::sort(names.begin(), names.end(),
              [](const std::string* a, const std::string* b) { return *a < *b; });
    for (const std::string* name : names) {
      const FieldSpec* known = Known(*name);
      if (known == nullptr && options_.packrec_export && IsExportOwn(*name)) continue;
      FieldSpec spec = known != nullptr ? *known : FieldOfFeature(*name);
      if (!options_.KeepsField(spec.name)) continue;
      std::vector<std::byte> value;
      PACKREC_ASSIGN_OR_RETURN(
          const bool present,
          FeatureValue(example.features().feature().at(*name), *name, known, spec, value));
      if (present) record.typed_fields.emplace_back(std::move(spec), std::move(value));
    }
    return Status::OK();
  }

  // The field of a packrec export's schema this feature is (SourceOptions::known_fields).
  const FieldSpec* Known(const std::string& feature) const {
    for (const FieldSpec& spec : options_.known_fields) {
      if ((spec.source_name.empty() ? spec.name : spec.source_name) == feature) return &spec;
    }
    return nullptr;
  }

  // The field a feature becomes: its name with '/' made '.' (a field name has no '/'), and
  // tf_ before image, label and key; the feature's own name is kept as source_name.
  static FieldSpec FieldOfFeature(const std::string& feature) {
    FieldSpec spec;
    spec.name = feature;
    std::replace(spec.name.begin(), spec.name.end(), '/', '.');
    if (spec.name == "image" || spec.name == "label" || spec.name == "key") {
      spec.name = "tf_" + spec.name;
    }
    spec.source_name = feature;
    return spec;
  }

  static bool IsText(std::string_view value) {
    return IsValidUtf8(value) && value.find('\0') == std::string_view::npos;
  }

  // The feature's value, with spec.type saying what it is; false when it has none (no kind set,
  // or an empty bytes_list of a one-value field). InvalidInput for a bytes_list packrec cannot
  // keep: several values that are not all text, or several where the field holds one.
  static Result<bool> FeatureValue(const tensorflow::Feature& feature, const std::string& name,
                                   const FieldSpec* known, FieldSpec& spec,
                                   std::vector<std::byte>& value) {
    const auto append = [&](const void* data, std::size_t size) {
      const auto* bytes = static_cast<const std::byte*>(data);
      value.insert(value.end(), bytes, bytes + size);
    };
    if (feature.has_int64_list()) {
      spec.type = FieldType::kInt64;
      for (const std::int64_t number : feature.int64_list().value()) {
        std::array<std::byte, 8> bytes{};
        StoreLE<std::int64_t>(bytes.data(), number);
        append(bytes.data(), bytes.size());
      }
      return true;
    }
    if (feature.has_float_list()) {
      spec.type = FieldType::kFloat32;
      for (const float number : feature.float_list().value()) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &number, sizeof bits);
        std::array<std::byte, 4> bytes{};
        StoreLE<std::uint32_t>(bytes.data(), bits);
        append(bytes.data(), bytes.size());
      }
      return true;
    }
    if (!feature.has_bytes_list()) return false;
    const auto& strings = feature.bytes_list().value();
    const bool list = known != nullptr
                          ? known->type == FieldType::kJson && !known->source_name.empty()
                          : name.starts_with("image/object/") || strings.size() >= 2;
    if (list) {
      nlohmann::json array = nlohmann::json::array();
      for (const std::string& text : strings) {
        if (!IsText(text)) {
          return Status::InvalidInput("its feature " + name + " holds " +
                                      std::to_string(strings.size()) +
                                      " byte strings, not all text: packrec keeps a bytes_list "
                                      "of several values as a JSON list of strings");
        }
        array.push_back(text);
      }
      spec.type = FieldType::kJson;
      const std::string dumped = array.dump();
      append(dumped.data(), dumped.size());
      return true;
    }
    if (strings.empty()) return false;
    if (strings.size() > 1) {
      return Status::InvalidInput("its feature " + name + " holds " +
                                  std::to_string(strings.size()) + " values, where field '" +
                                  spec.name + "' holds one (as the first record that had it)");
    }
    spec.type = known != nullptr ? known->type
                                 : (IsText(strings[0]) ? FieldType::kText : FieldType::kBytes);
    append(strings[0].data(), strings[0].size());
    return true;
  }

  SourceOptions options_;
  SequentialFile in_;
  std::vector<std::byte> buffer_;
  tensorflow::Example example_;
  bool defer_checks_ = false;
  // Noted by FinishRecord on any thread.
  mutable std::mutex class_names_mutex_;
  mutable ClassNameCollector class_names_;
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenTfRecordSource(std::vector<fs::path> files,
                                                         const SourceOptions& options) {
  return std::unique_ptr<RecordSource>(new TfRecordSource(std::move(files), options));
}

}  // namespace packrec::tfrecord
