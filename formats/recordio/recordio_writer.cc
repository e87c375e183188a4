// RecordIO export: shard-NNNNNN.rec (records as im2rec packs them: IRHeader with flag 0, the
// label as float32, id = the global record index), shard-NNNNNN.idx ("id<TAB>offset", what
// MXIndexedRecordIO and DALI's fn.readers.mxnet read) and shard-NNNNNN.lst ("id<TAB>label<TAB>
// key", im2rec's list, which keeps the keys RecordIO itself has no place for).
#include <array>
#include <cstdio>
#include <cstring>

#include "core/endian.h"
#include "recordio/recordio_format.h"
#include "storage/export_writer.h"

namespace packrec::recordio {
namespace {

namespace fs = std::filesystem;

class RecordIoWriter final : public ExportWriter {
 public:
  RecordIoWriter(OutputDirectory out, WriterOptions options)
      : ExportWriter(std::move(out), std::move(options), "recordio") {}
  ~RecordIoWriter() override { Abort(); }

 private:
  Status StartFile(std::uint32_t file_number) override {
    const std::string name = ExportFileName(file_number, "");
    PACKREC_ASSIGN_OR_RETURN(rec_, ExportFile::Create(dir(), name + ".rec"));
    PACKREC_ASSIGN_OR_RETURN(idx_, ExportFile::Create(dir(), name + ".idx"));
    PACKREC_ASSIGN_OR_RETURN(lst_, ExportFile::Create(dir(), name + ".lst"));
    return Status::OK();
  }

  Status WritePart(std::uint32_t flag, std::span<const std::byte> bytes) {
    std::array<std::byte, kPartHeaderSize> header{};
    StoreLE<std::uint32_t>(header.data(), kMagic);
    StoreLE<std::uint32_t>(header.data() + 4,
                           (flag << 29) | static_cast<std::uint32_t>(bytes.size()));
    PACKREC_RETURN_IF_ERROR(rec_->Append(header));
    return rec_->Append(bytes);
  }

  // RecordIO's header holds packed float32 labels (im2rec --pack-label) and nothing else: a
  // pack_label field, and no other.
  Status CheckSchema(const std::vector<FieldSpec>& schema) const override {
    for (const FieldSpec& spec : schema) {
      if (spec.name == kPackLabelField && spec.type == FieldType::kFloat32 &&
          spec.inner_shape.empty()) {
        continue;
      }
      return Status::NotSupported(
          "the recordio format does not store record fields beyond pack_label (the float32 "
          "labels im2rec --pack-label writes in its header), and field '" +
          spec.name + "' (" + std::string(FieldTypeName(spec.type)) +
          ") is another; the shard, lmdb, hdf5, wds and tfrecord formats keep it, or leave it "
          "out with --drop-fields");
    }
    return Status::OK();
  }

  // The record's pack_label value, whose first label a reader takes for the record's label; empty
  // without one.
  Result<std::span<const std::byte>> PackedLabels(const RecordInput& record,
                                                  std::uint64_t index) const {
    const std::vector<FieldSpec>& schema = options().fields;
    for (std::size_t f = 0; f < schema.size() && f < record.fields.size(); ++f) {
      if (!record.fields[f].present) continue;
      const std::span<const std::byte> packed = record.fields[f].bytes;
      float first = -1;
      if (packed.size() >= 4) {
        const std::uint32_t bits = LoadLE<std::uint32_t>(packed.data());
        std::memcpy(&first, &bits, sizeof first);
      }
      if (static_cast<double>(first) != static_cast<double>(record.label)) {
        return Status::InvalidArgument(
            "record " + std::to_string(index) + ": its label " + std::to_string(record.label) +
            " is not the first of its pack_label values, which RecordIO readers take as the "
            "label: RecordIO cannot hold both");
      }
      return packed;
    }
    return std::span<const std::byte>();
  }

  Status WriteRecord(const RecordInput& record, std::uint64_t index) override {
    PACKREC_RETURN_IF_ERROR(ExportImageExtension(record, index).status());
    if (record.key.find_first_of("\t\n\r") != std::string_view::npos) {
      return Status::InvalidArgument("record " + std::to_string(index) +
                                     ": its key holds a tab or newline, which the .lst list "
                                     "file cannot carry");
    }
    if (record.bytes.size() + kIrHeaderSize > kMaxPartLength) {
      return Status::InvalidArgument("record " + std::to_string(index) +
                                     " is over 512 MiB, more than a RecordIO part can frame");
    }
    PACKREC_ASSIGN_OR_RETURN(const std::span<const std::byte> packed, PackedLabels(record, index));
    data_.resize(kIrHeaderSize + packed.size() + record.bytes.size());
    const auto label = static_cast<float>(record.label);
    std::uint32_t label_bits = 0;
    std::memcpy(&label_bits, &label, 4);
    // As im2rec packs them: with packed labels, flag is their count and the header's label 0.
    StoreLE<std::uint32_t>(data_.data(), static_cast<std::uint32_t>(packed.size() / 4));
    StoreLE<std::uint32_t>(data_.data() + 4, packed.empty() ? label_bits : 0);
    StoreLE<std::uint64_t>(data_.data() + 8, index);
    StoreLE<std::uint64_t>(data_.data() + 16, 0);
    if (!packed.empty()) std::memcpy(data_.data() + kIrHeaderSize, packed.data(), packed.size());
    std::memcpy(data_.data() + kIrHeaderSize + packed.size(), record.bytes.data(),
                record.bytes.size());
    if (static_cast<float>(record.label) != static_cast<double>(record.label)) {
      return Status::InvalidArgument("record " + std::to_string(index) + ": label " +
                                     std::to_string(record.label) +
                                     " has no exact float32 value (RecordIO stores labels as "
                                     "float32: up to 2^24 exactly)");
    }
    const std::uint64_t offset = rec_->size();
    // dmlc's writer: split at each 4-aligned magic, dropping it; readers put it back.
    const std::span<const std::byte> data(data_);
    std::size_t start = 0;
    bool split = false;
    for (std::size_t i = 0; i + 4 <= data.size(); i += 4) {
      if (LoadLE<std::uint32_t>(data.data() + i) == kMagic) {
        PACKREC_RETURN_IF_ERROR(WritePart(split ? 2 : 1, data.subspan(start, i - start)));
        split = true;
        start = i + 4;
      }
    }
    PACKREC_RETURN_IF_ERROR(WritePart(split ? 3 : 0, data.subspan(start)));
    static constexpr std::array<std::byte, 3> kZeros{};
    const std::size_t padding = (4 - (data.size() - start) % 4) % 4;
    PACKREC_RETURN_IF_ERROR(rec_->Append(std::span(kZeros).first(padding)));
    const std::string id = std::to_string(index);
    PACKREC_RETURN_IF_ERROR(idx_->Append(AsBytes(id + "\t" + std::to_string(offset) + "\n")));
    return lst_->Append(
        AsBytes(id + "\t" + std::to_string(record.label) + "\t" + std::string(record.key) + "\n"));
  }

  std::uint64_t OpenFileSize() const override { return rec_->size(); }

  Status SealFile(std::vector<std::string>& files, std::uint64_t& bytes) override {
    for (auto* file : {&rec_, &idx_, &lst_}) {
      PACKREC_RETURN_IF_ERROR((*file)->Seal());
      files.push_back((*file)->name());
      bytes += (*file)->size();
    }
    rec_.reset();
    idx_.reset();
    lst_.reset();
    return Status::OK();
  }

  void DiscardFile() override {
    for (auto* file : {&rec_, &idx_, &lst_}) {
      if (*file) (*file)->Discard();
      file->reset();
    }
  }

  std::unique_ptr<ExportFile> rec_;
  std::unique_ptr<ExportFile> idx_;
  std::unique_ptr<ExportFile> lst_;
  std::vector<std::byte> data_;
};

}  // namespace

Result<std::unique_ptr<DatasetWriter>> CreateRecordIoWriter(const fs::path& dir,
                                                            const WriterOptions& options) {
  return CreateExportWriter<RecordIoWriter>(dir, options);
}

}  // namespace packrec::recordio
