#include "storage/export_writer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <system_error>

#include "storage/field_block.h"
#include "storage/manifest_json.h"
#include "storage/payload.h"

namespace packrec {

namespace fs = std::filesystem;

Result<std::string_view> ExportImageExtension(const RecordInput& record, std::uint64_t index) {
  switch (record.image.encoding) {
    case Encoding::kJpeg:
      return std::string_view("jpg");
    case Encoding::kPng:
      return std::string_view("png");
    case Encoding::kWebp:
      return std::string_view("webp");
    default:
      return Status::InvalidArgument(
          "record " + std::to_string(index) + " (" + std::string(record.key) + ") is " +
          std::string(EncodingName(record.image.encoding)) +
          ": the export formats carry encoded images (JPEG, PNG, WebP) only");
  }
}

std::string ExportFileName(std::uint32_t number, std::string_view suffix) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06u", number);
  return name + std::string(suffix);
}

Result<std::unique_ptr<ExportFile>> ExportFile::Create(const fs::path& dir, std::string name) {
  std::error_code ignored;
  fs::remove(dir / (name + ".tmp"), ignored);
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                           WritableFile::Create(dir / (name + ".tmp")));
  file->EnableWriteBehind();
  return std::unique_ptr<ExportFile>(new ExportFile(dir, std::move(name), std::move(file)));
}

Status ExportFile::Seal() {
  PACKREC_RETURN_IF_ERROR(file_->Sync());
  PACKREC_RETURN_IF_ERROR(file_->Close());
  return RenamePath(dir_ / (name_ + ".tmp"), dir_ / name_);
}

void ExportFile::Discard() {
  file_->Close().ok();  // removed next: its close status is moot
  std::error_code ignored;
  fs::remove(dir_ / (name_ + ".tmp"), ignored);
}

ExportWriter::ExportWriter(OutputDirectory out, WriterOptions options, std::string format)
    : out_(std::move(out)),
      dir_(out_.write_dir()),
      options_(std::move(options)),
      format_(std::move(format)) {}

ExportWriter::~ExportWriter() {
  // Subclasses discard their open files in their own destructors (their members are gone here).
  if (!finished_) out_.Abort();
}

std::string_view ExportWriter::ClassName(std::uint32_t label) const {
  return label < options_.classes.size() ? std::string_view(options_.classes[label])
                                         : std::string_view();
}

Status ExportWriter::Seal() {
  Sealed sealed;
  PACKREC_RETURN_IF_ERROR(SealFile(sealed.files, sealed.bytes));
  sealed.first_record = open_first_record_;
  sealed.records = records_ - open_first_record_;
  bytes_written_ += sealed.bytes;
  sealed_.push_back(std::move(sealed));
  open_ = false;
  return Status::OK();
}

Status ExportWriter::Add(const RecordInput& record) {
  if (finished_) return Status::Internal("Add after Finish");
  if (open_ && records_ > open_first_record_ && OpenFileSize() >= options_.shard_size_bytes) {
    PACKREC_RETURN_IF_ERROR(Seal());
  }
  if (!open_) {
    PACKREC_RETURN_IF_ERROR(StartFile(file_count_++));
    open_ = true;
    open_first_record_ = records_;
  }
  PACKREC_RETURN_IF_ERROR(WriteRecord(record, records_));
  ++records_;
  return Status::OK();
}

Status ExportWriter::AddFields(std::span<const FieldSpec> fields) {
  if (finished_) return Status::Internal("AddFields after Finish");
  std::vector<FieldSpec> schema = options_.fields;
  schema.insert(schema.end(), fields.begin(), fields.end());
  PACKREC_RETURN_IF_ERROR(ValidateSchema(schema));
  PACKREC_RETURN_IF_ERROR(CheckSchema(schema));
  options_.fields = std::move(schema);
  return Status::OK();
}

Status ExportWriter::Finish(const DatasetMetadata& metadata) {
  if (finished_) return Status::Internal("Finish called twice");
  if (open_) PACKREC_RETURN_IF_ERROR(Seal());
  PACKREC_RETURN_IF_ERROR(SyncDirectory(dir_));
  nlohmann::json files = nlohmann::json::array();
  for (const Sealed& sealed : sealed_) {
    files.push_back({{"files", sealed.files},
                     {"first_record", sealed.first_record},
                     {"records", sealed.records},
                     {"bytes", sealed.bytes}});
  }
  const nlohmann::json options = nlohmann::json::parse(metadata.options_json, nullptr, false);
  nlohmann::json manifest = {
      {"format", format_},
      {"records", records_},
      {"rejected", metadata.rejects.size()},
      {"classes", metadata.classes},
      {"listing_hash", metadata.listing_hash},
      {"source_kind", metadata.source_kind},
      {"options", options.is_discarded() ? nlohmann::json::object() : options},
      {"files", files},
  };
  // The fields the records carry (their members, features), so that an import of the export
  // knows which parts of a sample are fields and which are packrec's own (SampleMetadata).
  if (!options_.fields.empty()) manifest["fields"] = SchemaToJson(options_.fields);
  if (!SampleMetadata().empty()) manifest["sample_metadata"] = SampleMetadata();
  std::string text;
  try {
    text = manifest.dump(2) + "\n";
  } catch (const nlohmann::json::exception&) {
    return Status::InvalidArgument("a class name or key is not valid UTF-8: " + format_ +
                                   " exports record class names in JSON");
  }
  PACKREC_RETURN_IF_ERROR(WriteRejectsFile(dir_ / "rejects.tsv", metadata.rejects));
  PACKREC_RETURN_IF_ERROR(WriteFileAtomically(dir_ / kExportManifestName, AsBytes(text)));
  PACKREC_RETURN_IF_ERROR(out_.Commit());
  finished_ = true;
  return Status::OK();
}

void ExportWriter::Abort() {
  if (finished_) return;
  if (open_) DiscardFile();
  open_ = false;
  out_.Abort();
  finished_ = true;
}

}  // namespace packrec
