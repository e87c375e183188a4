// TFRecord import: every frame's two CRCs checked, each record parsed as a tf.Example.
#include <cstdio>
#include <mutex>
#include <optional>

#include "core/crc32c.h"
#include "core/endian.h"
#include "core/file_io.h"
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
        if (Status open = in_.Open(files_[file_index_]); !open.ok()) {
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
    const tensorflow::Feature* image =
        FindFeature(example, options_.image_field,
                    {"image/encoded", "image", "image_raw", "jpeg", "jpg", "png"}, &name);
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
    } else if (!options_.label_field.empty()) {
      return Status::InvalidInput("no feature " + options_.label_field);
    }
    const tensorflow::Feature* key = FindFeature(
        example, options_.key_field, {"image/filename", "filename", "image/key", "key"}, &name);
    if (key != nullptr && key->has_bytes_list() && key->bytes_list().value_size() == 1 &&
        !key->bytes_list().value(0).empty()) {
      record.key = key->bytes_list().value(0);
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
    }
    const auto view = AsBytes(bytes);
    record.bytes.assign(view.begin(), view.end());
    return Status::OK();
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
