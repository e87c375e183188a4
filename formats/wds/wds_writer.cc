// WebDataset export: tar shards of samples KEY.jpg|png + KEY.cls + KEY.json, KEY the record's
// global index in 9 digits (WebDataset keys may not contain dots, which record keys do; the
// original key rides in the json member, with the label and class name).
#include <archive.h>
#include <archive_entry.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

#include "storage/export_writer.h"
#include "storage/field_block.h"
#include "storage/source_fields.h"
#include "wds/wds_format.h"

namespace packrec::wds {
namespace {

namespace fs = std::filesystem;

class WdsWriter final : public ExportWriter {
 public:
  WdsWriter(OutputDirectory out, WriterOptions options)
      : ExportWriter(std::move(out), std::move(options), "wds") {}
  ~WdsWriter() override { Abort(); }

 private:
  static la_ssize_t WriteCallback(archive*, void* self, const void* data, size_t size) {
    auto* writer = static_cast<WdsWriter*>(self);
    writer->write_status_ = writer->file_->Append(
        {static_cast<const std::byte*>(data), static_cast<std::size_t>(size)});
    return writer->write_status_.ok() ? static_cast<la_ssize_t>(size) : -1;
  }

  Status ArchiveError(const std::string& what) {
    if (!write_status_.ok()) return write_status_;  // the file's own error (ENOSPC) names it
    const char* message = archive_error_string(archive_);
    return Status::IOError(dir().string() + "/" + file_->name() + ": " + what + ": " +
                           (message != nullptr ? message : "libarchive error"));
  }

  Status StartFile(std::uint32_t file_number) override {
    const std::string name = ExportFileName(file_number, ".tar");
    PACKREC_ASSIGN_OR_RETURN(file_, ExportFile::Create(dir(), name));
    archive_ = archive_write_new();
    // pax where ustar cannot say it (long names), plain ustar otherwise: GNU tar reads both.
    archive_write_set_format_pax_restricted(archive_);
    archive_write_set_bytes_in_last_block(archive_, 1);
    if (archive_write_open(archive_, this, nullptr, &WdsWriter::WriteCallback, nullptr) !=
        ARCHIVE_OK) {
      return ArchiveError("cannot start the tar");
    }
    return Status::OK();
  }

  Status AddMember(const std::string& name, std::span<const std::byte> bytes) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_size(entry, static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, 0644);
    archive_entry_set_mtime(entry, 0, 0);  // the same bytes on every run
    Status status;
    if (archive_write_header(archive_, entry) != ARCHIVE_OK) {
      status = ArchiveError("cannot write the header of " + name);
    } else if (!bytes.empty() && archive_write_data(archive_, bytes.data(), bytes.size()) !=
                                     static_cast<la_ssize_t>(bytes.size())) {
      status = ArchiveError("cannot write " + name);
    }
    archive_entry_free(entry);
    return status;
  }

  Status WriteRecord(const RecordInput& record, std::uint64_t index) override {
    PACKREC_ASSIGN_OR_RETURN(const std::string_view extension, ExportImageExtension(record, index));
    char key[32];
    std::snprintf(key, sizeof key, "%09llu", static_cast<unsigned long long>(index));
    nlohmann::json json = {{"key", std::string(record.key)}, {"label", record.label}};
    if (!ClassName(record.label).empty()) json["class"] = std::string(ClassName(record.label));
    std::string json_text;
    try {
      json_text = json.dump();
    } catch (const nlohmann::json::exception&) {
      return Status::InvalidArgument("record " + std::to_string(index) +
                                     ": its key is not valid UTF-8, which WebDataset's json "
                                     "member cannot carry");
    }
    const std::string label = std::to_string(record.label);
    PACKREC_RETURN_IF_ERROR(
        AddMember(std::string(key) + "." + std::string(extension), record.bytes));
    PACKREC_RETURN_IF_ERROR(AddMember(std::string(key) + ".cls", AsBytes(label)));
    if (!SampleMetadata().empty()) {
      PACKREC_RETURN_IF_ERROR(AddMember(std::string(key) + ".json", AsBytes(json_text)));
    }
    const std::vector<FieldSpec>& schema = options().fields;
    for (std::size_t f = 0; f < schema.size() && f < record.fields.size(); ++f) {
      if (!record.fields[f].present) continue;
      if (MemberSuffix(schema[f]) == extension) {
        return Status::NotSupported("record " + std::to_string(index) + ": field '" +
                                    schema[f].name + "' would be member ." +
                                    std::string(extension) +
                                    ", which its image is; rename or drop it (--drop-fields)");
      }
      const std::string name = std::string(key) + "." + MemberSuffix(schema[f]);
      if (IsNumericField(schema[f].type)) {
        PACKREC_RETURN_IF_ERROR(AddMember(name, NpyOf(schema[f], record.fields[f].bytes)));
      } else {
        PACKREC_RETURN_IF_ERROR(AddMember(name, record.fields[f].bytes));
      }
    }
    return Status::OK();
  }

  // An array field's value as numpy.save writes it: N x the inner shape.
  static std::vector<std::byte> NpyOf(const FieldSpec& spec, std::span<const std::byte> value) {
    const std::size_t element = FieldElementBytes(spec);
    std::vector<std::uint64_t> shape = {value.size() / element};
    shape.insert(shape.end(), spec.inner_shape.begin(), spec.inner_shape.end());
    return EncodeNpy(spec.type, shape, value);
  }

  // Without a json field, each sample's json member keeps the record's key, label and class.
  std::string SampleMetadata() const override {
    for (const FieldSpec& spec : options().fields) {
      if (FieldFileSuffix(spec) == "json") return "";
    }
    return "json";
  }

  // Every field is a member; two fields that would have one suffix, or a field on the label's
  // suffix, cannot both be one. A json field met once samples were written with packrec's json
  // member cannot take its place.
  Status CheckSchema(const std::vector<FieldSpec>& schema) const override {
    const bool json_field = std::ranges::any_of(
        schema, [](const FieldSpec& spec) { return FieldFileSuffix(spec) == "json"; });
    if (json_field && !SampleMetadata().empty() && records_written() > 0) {
      return Status::NotSupported(
          "a json field appeared after " + std::to_string(records_written()) +
          " samples were written with packrec's own json member (key, label, class); export "
          "from a packrec dataset, whose schema is known up front");
    }
    std::set<std::string> taken = {"cls"};
    for (const FieldSpec& spec : schema) {
      if (!taken.insert(MemberSuffix(spec)).second) {
        return Status::NotSupported("field '" + spec.name + "' would be member ." +
                                    MemberSuffix(spec) +
                                    " of each WebDataset sample, which another member has; "
                                    "rename or drop one (--drop-fields)");
      }
    }
    return Status::OK();
  }

  std::uint64_t OpenFileSize() const override { return file_->size(); }

  Status SealFile(std::vector<std::string>& files, std::uint64_t& bytes) override {
    const int closed = archive_write_close(archive_);
    if (closed != ARCHIVE_OK) return ArchiveError("cannot finish the tar");
    archive_write_free(archive_);
    archive_ = nullptr;
    PACKREC_RETURN_IF_ERROR(file_->Seal());
    files.push_back(file_->name());
    bytes = file_->size();
    file_.reset();
    return Status::OK();
  }

  void DiscardFile() override {
    if (archive_ != nullptr) archive_write_free(archive_);
    archive_ = nullptr;
    if (file_) file_->Discard();
    file_.reset();
  }

  std::unique_ptr<ExportFile> file_;
  archive* archive_ = nullptr;
  Status write_status_;
};

}  // namespace

std::string MemberSuffix(const FieldSpec& spec) {
  std::string suffix = FieldFileSuffix(spec);
  if (IsNumericField(spec.type) && suffix != "npy" && !suffix.ends_with(".npy")) suffix += ".npy";
  return suffix;
}

Result<std::unique_ptr<DatasetWriter>> CreateWdsWriter(const fs::path& dir,
                                                       const WriterOptions& options) {
  return CreateExportWriter<WdsWriter>(dir, options);
}

}  // namespace packrec::wds
