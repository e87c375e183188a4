// What the export formats (wds, tfrecord, recordio) share: files sealed one after the other in a
// staging directory that becomes the output directory at Finish, and packrec-export.json, which
// lists them with their record counts and carries the class names those formats have no place for.
#ifndef PACKREC_LIB_STORAGE_EXPORT_WRITER_H_
#define PACKREC_LIB_STORAGE_EXPORT_WRITER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_io.h"
#include "core/output_dir.h"
#include "packrec/writer.h"

namespace packrec {

inline constexpr char kExportManifestName[] = "packrec-export.json";

// The file extension of an encoded image ("jpg", "png"); InvalidArgument for raw pixels, which
// no export format carries, naming the record.
Result<std::string_view> ExportImageExtension(const RecordInput& record, std::uint64_t index);

// "shard-NNNNNN" + suffix: the name of data file `number` (and of its companions).
std::string ExportFileName(std::uint32_t number, std::string_view suffix);

// One data file being written: NAME.tmp, renamed to NAME when sealed.
class ExportFile {
 public:
  static Result<std::unique_ptr<ExportFile>> Create(const std::filesystem::path& dir,
                                                    std::string name);
  Status Append(std::span<const std::byte> bytes) { return file_->Append(bytes); }
  std::uint64_t size() const { return file_->size(); }
  const std::string& name() const { return name_; }
  // fsync, close, rename into place.
  Status Seal();
  // Closes and removes the temporary file.
  void Discard();

 private:
  ExportFile(std::filesystem::path dir, std::string name, std::unique_ptr<WritableFile> file)
      : dir_(std::move(dir)), name_(std::move(name)), file_(std::move(file)) {}
  std::filesystem::path dir_;
  std::string name_;
  std::unique_ptr<WritableFile> file_;
};

class ExportWriter : public DatasetWriter {
 public:
  ~ExportWriter() override;
  Status Add(const RecordInput& record) final;
  Status Finish(const DatasetMetadata& metadata) final;
  Status AddFields(std::span<const FieldSpec> fields) final;
  void Abort() final;
  std::uint64_t records_written() const final { return records_; }
  std::uint64_t bytes_written() const final { return bytes_written_; }
  // NotSupported naming the first field of `schema` the format cannot express (checked when the
  // writer is created and when the schema grows).
  virtual Status CheckSchema(const std::vector<FieldSpec>& schema) const {
    (void)schema;
    return Status::OK();
  }

 protected:
  ExportWriter(OutputDirectory out, WriterOptions options, std::string format);
  const std::filesystem::path& dir() const { return dir_; }
  const WriterOptions& options() const { return options_; }
  // The class name of `label`, or empty.
  std::string_view ClassName(std::uint32_t label) const;
  // Starts data file number `file_number` (its companions too, for formats that have them).
  virtual Status StartFile(std::uint32_t file_number) = 0;
  // Writes record `index` into the open file; returns its bytes appended.
  virtual Status WriteRecord(const RecordInput& record, std::uint64_t index) = 0;
  // The open file's size so far, to decide when to start the next.
  virtual std::uint64_t OpenFileSize() const = 0;
  // Seals the open file(s); appends what was sealed to `files`.
  virtual Status SealFile(std::vector<std::string>& files, std::uint64_t& bytes) = 0;
  virtual void DiscardFile() = 0;
  // The part of each sample that holds packrec's own metadata rather than a field ("json" for
  // WebDataset tars without a json field), recorded in packrec-export.json; empty for none.
  virtual std::string SampleMetadata() const { return ""; }

 private:
  OutputDirectory out_;
  std::filesystem::path dir_;
  WriterOptions options_;
  std::string format_;
  bool open_ = false;
  bool finished_ = false;
  std::uint32_t file_count_ = 0;
  std::uint64_t records_ = 0;
  std::uint64_t open_first_record_ = 0;
  std::uint64_t bytes_written_ = 0;
  struct Sealed {
    std::vector<std::string> files;
    std::uint64_t first_record = 0;
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<Sealed> sealed_;
  Status Seal();
};

// The factory every export format registers: the output directory prepared (packrec-export.json
// marks it as ours for --overwrite; an export has no resume point, so a new OUT is staged and
// appears whole, and what a killed run left is removed by the next), then the writer.
template <typename Writer>
Result<std::unique_ptr<DatasetWriter>> CreateExportWriter(const std::filesystem::path& dir,
                                                          const WriterOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(OutputDirectory out,
                           OutputDirectory::Prepare(dir, kExportManifestName, options.overwrite,
                                                    OutputDirectory::OutputKind::kExport));
  auto writer = std::unique_ptr<Writer>(new Writer(std::move(out), options));
  PACKREC_RETURN_IF_ERROR(static_cast<ExportWriter&>(*writer).CheckSchema(options.fields));
  return std::unique_ptr<DatasetWriter>(std::move(writer));
}

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_EXPORT_WRITER_H_
