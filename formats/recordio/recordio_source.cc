// RecordIO import: parts reassembled, IRHeader decoded, keys from the .lst beside the .rec when
// there is one (im2rec's PREFIX.lst: "id<TAB>label...<TAB>path").
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "core/endian.h"
#include "core/file_io.h"
#include "recordio/recordio_format.h"
#include "storage/source_util.h"

namespace packrec::recordio {
namespace {

namespace fs = std::filesystem;

// Reads PREFIX.lst: id -> path. Lines that do not parse are ignored: the keys are a courtesy,
// the .rec is the data. A .lst that is there and cannot be read is an error, not a file of
// fewer keys.
Result<std::unordered_map<std::uint64_t, std::string>> ReadKeys(const fs::path& rec) {
  std::unordered_map<std::uint64_t, std::string> keys;
  fs::path list = rec;
  list.replace_extension(".lst");
  // Only a .lst that is not there means no keys: one that is a FIFO, a directory or unreadable
  // is refused by ReadWholeFile (a FIFO was silently taken for no .lst).
  std::error_code error;
  if (fs::status(list, error).type() == fs::file_type::not_found) return keys;
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadWholeFile(list));
  const std::string_view text = AsText(bytes);
  for (const std::string_view text_line : SplitLines(text)) {
    const std::string line(text_line);
    const std::size_t first_tab = line.find('\t');
    const std::size_t last_tab = line.rfind('\t');
    if (first_tab == std::string::npos || last_tab == first_tab) continue;
    std::uint64_t id = 0;
    if (std::sscanf(line.c_str(), "%llu", reinterpret_cast<unsigned long long*>(&id)) != 1) {
      continue;
    }
    keys.emplace(id, line.substr(last_tab + 1));
  }
  return keys;
}

class RecordIoSource final : public FileListSource {
 public:
  RecordIoSource(std::vector<fs::path> files, SourceOptions options)
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
        resync_ = false;
        PACKREC_ASSIGN_OR_RETURN(keys_, ReadKeys(files_[file_index_]));
      }
      if (resync_) PACKREC_RETURN_IF_ERROR(Resync());
      if (in_.position >= in_.size) {
        in_.Close();
        LeaveFile(in_.size);
        continue;
      }
      in_.Prefetch();
      record = SourceRecord{};
      record.origin = RecordOrigin(files_[file_index_], in_.number++, in_.position);
      record.status = ReadRecord(record);
      return true;
    }
  }

  std::vector<std::string> classes() const override { return {}; }
  SourceFormat format() const override { return SourceFormat::kRecordIo; }

 private:
  std::uint64_t position_in_file() const override { return in_.is_open() ? in_.position : 0; }

  // After a bad magic: on to the next 4-aligned magic that starts a record (flag 0 or 1). The
  // window is no bigger than what is left of the file.
  Status Resync() {
    resync_ = false;
    std::uint64_t at = (in_.position + 4) & ~std::uint64_t{3};
    std::vector<std::byte> window(static_cast<std::size_t>(
        std::min<std::uint64_t>(1 << 20, in_.size - std::min(at, in_.size))));
    while (at + 8 <= in_.size) {
      const std::size_t length =
          static_cast<std::size_t>(std::min<std::uint64_t>(window.size(), in_.size - at));
      PACKREC_RETURN_IF_ERROR(in_.file->ReadExact(at, std::span(window).first(length)));
      for (std::size_t i = 0; i + 8 <= length; i += 4) {
        if (LoadLE<std::uint32_t>(window.data() + i) == kMagic &&
            (LoadLE<std::uint32_t>(window.data() + i + 4) >> 29) <= 1) {
          in_.position = at + i;
          return Status::OK();
        }
      }
      at += length > 8 ? (length - 4) & ~std::size_t{3} : length;
    }
    in_.position = in_.size;
    return Status::OK();
  }

  // Reads the header of the part at in_.position: its flag and length. Moves past nothing.
  Status ReadPartHeader(std::uint32_t* flag, std::size_t* length) {
    const std::uint64_t left = in_.size - in_.position;
    std::array<std::byte, kPartHeaderSize> header{};
    if (left < header.size()) {
      in_.position = in_.size;
      return Status::Truncated("truncated part header (expected 8 bytes, got " +
                               std::to_string(left) + ")");
    }
    PACKREC_RETURN_IF_ERROR(in_.Read(in_.position, header));
    if (LoadLE<std::uint32_t>(header.data()) != kMagic) {
      resync_ = true;
      return Status::Corruption("bad magic at byte " + std::to_string(in_.position) +
                                "; reading resumes at the next record magic");
    }
    const std::uint32_t lrecord = LoadLE<std::uint32_t>(header.data() + 4);
    *flag = lrecord >> 29;
    *length = lrecord & kMaxPartLength;
    if (PaddedPartSize(*length) > left) {
      in_.position = in_.size;
      return Status::Truncated("truncated record (expected " +
                               std::to_string(PaddedPartSize(*length)) + " bytes, got " +
                               std::to_string(left) + ")");
    }
    return Status::OK();
  }

  static std::uint64_t PaddedPartSize(std::size_t length) {
    return kPartHeaderSize + ((std::uint64_t{length} + 3) & ~std::uint64_t{3});
  }

  // Appends the part at in_.position (its header read by ReadPartHeader), less its first `skip`
  // bytes, to `out`, and moves past it.
  Status TakePart(std::size_t length, std::size_t skip, std::vector<std::byte>& out) {
    PACKREC_RETURN_IF_ERROR(
        in_.AppendTo(in_.position + kPartHeaderSize + skip, length - skip, out));
    in_.position += PaddedPartSize(length);
    return Status::OK();
  }

  // The image record header at the start of `head` (at least kIrHeaderSize bytes, and the first
  // label after it when there is one) of a record of `size` bytes: the label, the id and where
  // the image starts.
  static Status ParseImageHeader(std::span<const std::byte> head, std::size_t size,
                                 std::uint32_t* label_out, std::uint64_t* id,
                                 std::size_t* image_offset) {
    const std::uint32_t label_count = LoadLE<std::uint32_t>(head.data());
    float label = 0;
    const auto label_bits = LoadLE<std::uint32_t>(head.data() + 4);
    std::memcpy(&label, &label_bits, 4);
    *id = LoadLE<std::uint64_t>(head.data() + 8);
    *image_offset = kIrHeaderSize;
    if (label_count > 0) {
      if ((size - kIrHeaderSize) / 4 < label_count) {
        return Status::InvalidInput("its header declares " + std::to_string(label_count) +
                                    " labels, more than the record holds");
      }
      const auto first = LoadLE<std::uint32_t>(head.data() + kIrHeaderSize);
      std::memcpy(&label, &first, 4);
      *image_offset += 4 * static_cast<std::size_t>(label_count);
    }
    // 2^32 itself is a float (4294967295.0f rounds up to it), and does not fit a uint32.
    if (!(label >= 0) || !(label < 4294967296.0f) || std::floor(label) != label) {
      return Status::InvalidInput("label " + std::to_string(label) +
                                  " is not a non-negative integer");
    }
    *label_out = static_cast<std::uint32_t>(label);
    return Status::OK();
  }

  // im2rec --pack-label's labels (IRHeader.flag float32 values after the header) as the field
  // pack_label, met with the first record that has them.
  void KeepPackedLabels(std::vector<std::byte> labels, SourceRecord& record) {
    if (!pack_label_met_) {
      record.added_fields.push_back({std::string(kPackLabelField), FieldType::kFloat32, "", {}});
      pack_label_met_ = true;
    }
    record.fields.resize(1);
    record.fields[0] = std::move(labels);
  }

  static Status TooShort(std::size_t size) {
    return Status::InvalidInput("record of " + std::to_string(size) +
                                " bytes is shorter than an image record header (24)");
  }

  Status ReadRecord(SourceRecord& record) {
    std::uint32_t flag = 0;
    std::size_t length = 0;
    PACKREC_RETURN_IF_ERROR(ReadPartHeader(&flag, &length));
    if (flag == 2 || flag == 3) {
      return Status::Corruption("a record continues here without its first part (flag " +
                                std::to_string(flag) + ")");
    }
    std::uint64_t id = 0;
    if (flag == 0) {
      // One part, the common case: the header read where it lies, only the image copied out.
      if (length < kIrHeaderSize) {
        in_.position += PaddedPartSize(length);
        return TooShort(length);
      }
      std::array<std::byte, kIrHeaderSize + 4> head{};
      const std::size_t head_size = std::min(head.size(), length);
      PACKREC_RETURN_IF_ERROR(
          in_.Read(in_.position + kPartHeaderSize, std::span(head).first(head_size)));
      std::size_t image_offset = 0;
      if (Status parsed = ParseImageHeader(head, length, &record.label, &id, &image_offset);
          !parsed.ok()) {
        in_.position += PaddedPartSize(length);
        return parsed;
      }
      if (image_offset > kIrHeaderSize) {
        std::vector<std::byte> labels;
        PACKREC_RETURN_IF_ERROR(in_.AppendTo(in_.position + kPartHeaderSize + kIrHeaderSize,
                                             image_offset - kIrHeaderSize, labels));
        KeepPackedLabels(std::move(labels), record);
      }
      PACKREC_RETURN_IF_ERROR(TakePart(length, image_offset, record.bytes));
    } else {
      std::vector<std::byte> data;
      PACKREC_RETURN_IF_ERROR(TakePart(length, 0, data));
      while (flag == 1 || flag == 2) {
        std::array<std::byte, 4> magic{};
        StoreLE<std::uint32_t>(magic.data(), kMagic);
        data.insert(data.end(), magic.begin(), magic.end());  // the magic the writer split out
        PACKREC_RETURN_IF_ERROR(ReadPartHeader(&flag, &length));
        PACKREC_RETURN_IF_ERROR(TakePart(length, 0, data));
        if (flag == 0 || flag == 1) {
          return Status::Corruption("a multi-part record ends without its last part");
        }
      }
      if (data.size() < kIrHeaderSize) return TooShort(data.size());
      std::size_t image_offset = 0;
      PACKREC_RETURN_IF_ERROR(
          ParseImageHeader(data, data.size(), &record.label, &id, &image_offset));
      if (image_offset > kIrHeaderSize) {
        KeepPackedLabels({data.begin() + kIrHeaderSize,
                          data.begin() + static_cast<std::ptrdiff_t>(image_offset)},
                         record);
      }
      data.erase(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(image_offset));
      record.bytes = std::move(data);  // the image, without a second allocation
    }
    const auto key = keys_.find(id);
    if (key != keys_.end()) {
      record.key = key->second;
    } else {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "/%09llu.", static_cast<unsigned long long>(id));
      record.key = files_[file_index_].filename().string() + suffix +
                   std::string(SniffImageExtension(record.bytes));
    }
    return Status::OK();
  }

  SourceOptions options_;
  SequentialFile in_;
  bool resync_ = false;
  bool pack_label_met_ = false;
  std::unordered_map<std::uint64_t, std::string> keys_;
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenRecordIoSource(std::vector<fs::path> files,
                                                         const SourceOptions& options) {
  return std::unique_ptr<RecordSource>(new RecordIoSource(std::move(files), options));
}

}  // namespace packrec::recordio
