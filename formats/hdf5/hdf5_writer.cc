// The HDF5 writers. Both create FILE.tmp when they are created and keep it open; Finish writes
// the per-record datasets and the attributes, closes, fsyncs and renames it to FILE.
//
// Encoded layout: /data is contiguous, so its size must be known when it is created. When the
// caller knows the total up front (WriterOptions::expected_payload_bytes, set by Convert for a
// pass-through conversion), /data is created at once and payloads are written straight to its file
// offset with plain writes, bypassing HDF5: every byte is written once. Otherwise, or when the
// total turns out different (an input rejected or changed), payloads go to FILE.payloads.tmp and
// are copied into a /data of the right size at Finish.
//
// Pixels layout: /images, N x H x W x 3 uint8, chunked one image per chunk (optionally deflated),
// grown as records arrive and trimmed to N at Finish.
//
// Resumable: the journal (FILE.resume.json) is written before FILE.tmp and holds no records, so a
// resumed HDF5 conversion starts FILE.tmp again. HDF5 has no crash-consistent append: after a kill
// its metadata in FILE.tmp may be half written (docs/reliability.md).

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "hdf5/hdf5_format.h"
#include "hdf5/hdf5_util.h"
#include "storage/field_block.h"
#include "storage/manifest_json.h"
#include "storage/payload.h"
#include "storage/resume_journal.h"

namespace packrec::hdf5 {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kCopyChunkBytes = 4 << 20;
constexpr std::size_t kMaxKeyBytes = 0xffff;

fs::path WithSuffix(const fs::path& path, const char* suffix) {
  fs::path result = path;
  result += suffix;
  return result;
}

Handle VariableString() {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  return type;
}

// REQUIRES: the caller holds LibraryMutex().
template <typename T>
Status WriteVector(hid_t file, const char* name, hid_t file_type, hid_t memory_type,
                   const std::vector<T>& values, const fs::path& path) {
  const hsize_t size = values.size();
  Handle space(H5Screate_simple(1, &size, nullptr), H5Sclose);
  Handle dataset(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!dataset.valid())
    return Hdf5Error(StatusCode::kIOError, std::string("create /") + name + " in", path);
  if ((!values.empty() &&
       H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) ||
      dataset.Close() < 0) {
    return Hdf5Error(StatusCode::kIOError, std::string("write /") + name + " in", path);
  }
  return Status::OK();
}

// REQUIRES: the caller holds LibraryMutex().
Result<Handle> CreateFile(const fs::path& tmp) {
  std::error_code error;
  fs::remove(tmp, error);  // a leftover of an interrupted run
  errno = 0;
  Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) {
    // HDF5's message for EACCES or ENOSPC is generic; errno says what happened.
    const int saved = errno;
    if (saved != 0) return ErrnoStatus("create", tmp, saved);
    return Hdf5Error(StatusCode::kIOError, "create", tmp);
  }
  return file;
}

// REQUIRES: the caller holds LibraryMutex(). A contiguous /data of `size` bytes, allocated now
// (so it has a file offset) and never filled by HDF5 (the payloads are written over it).
Result<Handle> CreateDataDataset(hid_t file, hsize_t size, const fs::path& tmp) {
  Handle space(H5Screate_simple(1, &size, nullptr), H5Sclose);
  Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_layout(plist.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(plist.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(plist.get(), H5D_FILL_TIME_NEVER);
  Handle data(
      H5Dcreate2(file, kData, H5T_STD_U8LE, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
      H5Dclose);
  if (!data.valid()) return Hdf5Error(StatusCode::kIOError, "create /data in", tmp);
  return data;
}

// One field's values over all records, written at Finish as /fields/<name>/{values, offsets,
// present, checksums}.
struct FieldColumn {
  std::vector<std::uint8_t> values;
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint8_t> present;
  std::vector<std::uint64_t> checksums;  // XXH64 of the value, seed = record index; 0 absent

  void Add(const FieldView& value, std::uint64_t index) {
    if (value.present) {
      const auto* begin = reinterpret_cast<const std::uint8_t*>(value.bytes.data());
      values.insert(values.end(), begin, begin + value.bytes.size());
    }
    offsets.push_back(values.size());
    present.push_back(value.present ? 1 : 0);
    checksums.push_back(value.present ? Xxh64(value.bytes, /*seed=*/index) : 0);
  }

  // REQUIRES: the caller holds LibraryMutex().
  Status Write(hid_t file, const std::string& name, const fs::path& path) const {
    const std::string group_name = std::string(kFieldsGroup) + "/" + name;
    Handle group(H5Gcreate2(file, group_name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Gclose);
    if (!group.valid())
      return Hdf5Error(StatusCode::kIOError, "create /" + group_name + " in", path);
    PACKREC_RETURN_IF_ERROR(
        WriteVector(group.get(), "values", H5T_STD_U8LE, H5T_NATIVE_UINT8, values, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(group.get(), "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, offsets, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(group.get(), "present", H5T_STD_U8LE, H5T_NATIVE_UINT8, present, path));
    return WriteVector(group.get(), "checksums", H5T_STD_U64LE, H5T_NATIVE_UINT64, checksums, path);
  }
};

// What both layouts keep per record and write at Finish.
struct RecordTables {
  std::vector<std::int64_t> labels;
  std::vector<std::string> keys;
  std::vector<std::uint32_t> widths, heights;
  std::vector<std::uint8_t> channels, encodings, flags, subsampling;
  std::vector<std::uint64_t> checksums, raw_sizes, meta_checksums;
  std::uint32_t label_count = 0;
  std::vector<FieldSpec> schema;
  std::vector<FieldColumn> fields;  // one per schema field

  // Fields the schema gains after labels.size() records, which lack them.
  void AddColumns(std::span<const FieldSpec> added) {
    fields.resize(schema.size());
    for (const FieldSpec& spec : added) {
      schema.push_back(spec);
      FieldColumn& column = fields.emplace_back();
      column.offsets.assign(labels.size() + 1, 0);
      column.present.assign(labels.size(), 0);
      column.checksums.assign(labels.size(), 0);
    }
  }

  void Add(const RecordInput& record, std::span<const std::byte> stored, bool zstd) {
    const std::uint64_t index = labels.size();
    fields.resize(schema.size());
    for (std::size_t f = 0; f < fields.size(); ++f) {
      fields[f].Add(f < record.fields.size() ? record.fields[f] : FieldView{}, index);
    }
    labels.push_back(record.label);
    keys.emplace_back(record.key);
    widths.push_back(record.image.width);
    heights.push_back(record.image.height);
    channels.push_back(record.image.channels);
    encodings.push_back(static_cast<std::uint8_t>(record.image.encoding));
    flags.push_back(static_cast<std::uint8_t>((record.image.progressive ? kFlagProgressive : 0) |
                                              (zstd ? kFlagZstd : 0)));
    subsampling.push_back(static_cast<std::uint8_t>(record.image.subsampling));
    checksums.push_back(StoredChecksum(record, stored, index));
    raw_sizes.push_back(record.bytes.size());
    meta_checksums.push_back(
        RecordMetaChecksum(index,
                           {labels.back(), widths.back(), heights.back(), channels.back(),
                            encodings.back(), flags.back(), raw_sizes.back()},
                           record.key));
    label_count = std::max(label_count, record.label + 1);
  }

  // REQUIRES: the caller holds LibraryMutex().
  Status Write(hid_t file, const fs::path& path) const {
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kLabels, H5T_STD_I64LE, H5T_NATIVE_INT64, labels, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kWidth, H5T_STD_U32LE, H5T_NATIVE_UINT32, widths, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kHeight, H5T_STD_U32LE, H5T_NATIVE_UINT32, heights, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kChannels, H5T_STD_U8LE, H5T_NATIVE_UINT8, channels, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kEncoding, H5T_STD_U8LE, H5T_NATIVE_UINT8, encodings, path));
    PACKREC_RETURN_IF_ERROR(WriteVector(file, kFlags, H5T_STD_U8LE, H5T_NATIVE_UINT8, flags, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kSubsampling, H5T_STD_U8LE, H5T_NATIVE_UINT8, subsampling, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kChecksums, H5T_STD_U64LE, H5T_NATIVE_UINT64, checksums, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kRawSizes, H5T_STD_U64LE, H5T_NATIVE_UINT64, raw_sizes, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kMetaChecksums, H5T_STD_U64LE, H5T_NATIVE_UINT64, meta_checksums, path));
    // Strings: vectors of C pointers, the form HDF5 takes variable-length strings in.
    const Handle string_type = VariableString();
    std::vector<const char*> key_pointers;
    key_pointers.reserve(keys.size());
    for (const std::string& key : keys) key_pointers.push_back(key.c_str());
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kKeys, string_type.get(), string_type.get(), key_pointers, path));
    std::vector<std::uint8_t> key_bytes;
    std::vector<std::uint64_t> key_offsets{0};
    for (const std::string& key : keys) {
      key_bytes.insert(key_bytes.end(), key.begin(), key.end());
      key_offsets.push_back(key_bytes.size());
    }
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kKeyBytes, H5T_STD_U8LE, H5T_NATIVE_UINT8, key_bytes, path));
    PACKREC_RETURN_IF_ERROR(
        WriteVector(file, kKeyOffsets, H5T_STD_U64LE, H5T_NATIVE_UINT64, key_offsets, path));
    return WriteFields(file, path);
  }

  // REQUIRES: the caller holds LibraryMutex().
  Status WriteFields(hid_t file, const fs::path& path) const {
    if (schema.empty()) return Status::OK();
    Handle group(H5Gcreate2(file, kFieldsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!group.valid()) return Hdf5Error(StatusCode::kIOError, "create /fields in", path);
    for (std::size_t f = 0; f < schema.size(); ++f) {
      const FieldColumn empty;
      PACKREC_RETURN_IF_ERROR(
          (f < fields.size() ? fields[f] : empty).Write(file, schema[f].name, path));
    }
    return Status::OK();
  }
};

// REQUIRES: the caller holds LibraryMutex().
Status WriteAttributes(hid_t file, const std::string& manifest,
                       const std::vector<std::string>& classes, const fs::path& path) {
  const Handle string_type = VariableString();
  {
    const hsize_t count = classes.size();
    Handle space(H5Screate_simple(1, &count, nullptr), H5Sclose);
    Handle attribute(H5Acreate2(file, kClassesAttribute, string_type.get(), space.get(),
                                H5P_DEFAULT, H5P_DEFAULT),
                     H5Aclose);
    std::vector<const char*> pointers;
    for (const std::string& name : classes) pointers.push_back(name.c_str());
    if (!attribute.valid() ||
        (count > 0 && H5Awrite(attribute.get(), string_type.get(), pointers.data()) < 0) ||
        attribute.Close() < 0) {
      return Hdf5Error(StatusCode::kIOError, "write classes attribute in", path);
    }
  }
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(H5Acreate2(file, kManifestAttribute, string_type.get(), space.get(), H5P_DEFAULT,
                              H5P_DEFAULT),
                   H5Aclose);
  const char* text = manifest.c_str();
  if (!attribute.valid() || H5Awrite(attribute.get(), string_type.get(), &text) < 0 ||
      attribute.Close() < 0) {
    return Hdf5Error(StatusCode::kIOError, "write manifest attribute in", path);
  }
  return Status::OK();
}

// The file, the per-record tables and the Finish/Abort protocol both layouts share. Layouts
// implement AddPayload (store the record's bytes) and FinishData (complete the datasets that hold
// them, under the lock, before the tables are written).
class Hdf5WriterBase : public DatasetWriter {
 public:
  Hdf5WriterBase(fs::path target, WriterOptions options, Handle file)
      : target_(std::move(target)),
        tmp_(WithSuffix(target_, kTempSuffix)),
        options_(std::move(options)),
        file_(std::move(file)) {
    tables_.schema = options_.fields;
  }
  ~Hdf5WriterBase() override = default;

  Status Add(const RecordInput& record) final {
    if (finished_) return Status::Internal("Add on a finished HDF5 writer");
    PACKREC_RETURN_IF_ERROR(CheckKeySize(tables_.labels.size(), record.key.size(), kMaxKeyBytes));
    PACKREC_RETURN_IF_ERROR(CheckRecordFields(options_, record, tables_.labels.size()));
    return AddPayload(record);
  }

  Status AddFields(std::span<const FieldSpec> fields) final {
    if (finished_) return Status::Internal("AddFields on a finished HDF5 writer");
    std::vector<FieldSpec> schema = options_.fields;
    schema.insert(schema.end(), fields.begin(), fields.end());
    PACKREC_RETURN_IF_ERROR(ValidateSchema(schema));
    options_.fields = std::move(schema);
    tables_.AddColumns(fields);
    return Status::OK();
  }

  Status Finish(const DatasetMetadata& metadata) final {
    if (finished_) return Status::Internal("Finish on a finished HDF5 writer");
    const bool webp =
        std::find(tables_.encodings.begin(), tables_.encodings.end(),
                  static_cast<std::uint8_t>(Encoding::kWebp)) != tables_.encodings.end();
    const std::uint32_t version = webp                      ? kHdf5VersionWithWebp
                                  : options_.fields.empty() ? kHdf5VersionWithoutFields
                                                            : kHdf5FormatVersion;
    DatasetManifest manifest =
        ManifestFromMetadata(metadata, kManifestFormatName, version, tables_.labels.size(),
                             StoredBytes(), tables_.label_count);
    manifest.fields = options_.fields;
    PACKREC_ASSIGN_OR_RETURN(const std::string text, SerializeManifestJson(manifest));
    PACKREC_RETURN_IF_ERROR(PrepareFinish());
    {
      std::lock_guard lock(LibraryMutex());
      PACKREC_RETURN_IF_ERROR(FinishData());
      PACKREC_RETURN_IF_ERROR(tables_.Write(file_.get(), tmp_));
      PACKREC_RETURN_IF_ERROR(WriteAttributes(file_.get(), text, metadata.classes, tmp_));
      if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0)
        return Hdf5Error(StatusCode::kIOError, "flush", tmp_);
      const herr_t closed = H5Fclose(file_.get());
      file_.Release();
      if (closed < 0) return Hdf5Error(StatusCode::kIOError, "close", tmp_);
    }
    PACKREC_RETURN_IF_ERROR(SyncFile(tmp_));
    // Escaped as the other formats' rejects are (a newline in a file name splits no row).
    PACKREC_RETURN_IF_ERROR(
        WriteRejectsFile(WithSuffix(target_, ".rejects.tsv"), metadata.rejects));
    PACKREC_RETURN_IF_ERROR(RenamePath(tmp_, target_));
    PACKREC_RETURN_IF_ERROR(SyncDirectory(target_.has_parent_path() ? target_.parent_path() : "."));
    std::error_code error;
    bytes_written_ = fs::file_size(target_, error);
    RemoveScratch();
    if (options_.resumable) fs::remove(WithSuffix(target_, kResumeJournalSuffix), error);
    finished_ = true;
    return Status::OK();
  }

  void Abort() final {
    if (finished_) return;
    {
      std::lock_guard lock(LibraryMutex());
      CloseDatasets();
      file_.Reset();
    }
    RemoveScratch();
    std::error_code ignored;
    fs::remove(tmp_, ignored);
    if (options_.resumable) fs::remove(WithSuffix(target_, kResumeJournalSuffix), ignored);
    finished_ = true;
  }

  std::uint64_t records_written() const final { return tables_.labels.size(); }
  std::uint64_t bytes_written() const final { return bytes_written_; }

 protected:
  virtual Status AddPayload(const RecordInput& record) = 0;
  // Before the lock is taken: flush and settle where the payloads are.
  virtual Status PrepareFinish() { return Status::OK(); }
  // REQUIRES: the caller holds LibraryMutex().
  virtual Status FinishData() = 0;
  // REQUIRES: the caller holds LibraryMutex(). Closes the layout's open HDF5 objects.
  virtual void CloseDatasets() {}
  virtual void RemoveScratch() {}
  virtual std::uint64_t StoredBytes() const = 0;

  // Must run in every derived destructor: Abort calls virtual functions.
  void AbortUnlessFinished() {
    if (!finished_) Abort();
  }

  const fs::path target_;
  const fs::path tmp_;
  WriterOptions options_;  // fields grow with AddFields
  Handle file_;
  RecordTables tables_;

 private:
  std::uint64_t bytes_written_ = 0;
  bool finished_ = false;
};

class EncodedWriter final : public Hdf5WriterBase {
 public:
  EncodedWriter(fs::path target, WriterOptions options, Handle file)
      : Hdf5WriterBase(std::move(target), std::move(options), std::move(file)) {
    offsets_.push_back(0);
  }
  ~EncodedWriter() override { AbortUnlessFinished(); }

  // REQUIRES: the caller holds LibraryMutex().
  Status Start() {
    const std::uint64_t expected = options_.expected_payload_bytes;
    if (expected > 0 && options_.compression == Compression::kNone) {
      PACKREC_ASSIGN_OR_RETURN(Handle data, CreateDataDataset(file_.get(), expected, tmp_));
      const haddr_t offset = H5Dget_offset(data.get());
      if (offset != HADDR_UNDEF) {
        PACKREC_ASSIGN_OR_RETURN(payloads_, WritableFile::OpenAt(tmp_, offset));
        payloads_->EnableWriteBehind();
        in_place_offset_ = offset;
        in_place_size_ = expected;
        return Status::OK();
      }
      // No storage after all (HDF5 declined early allocation): fall through to the scratch file.
      H5Ldelete(file_.get(), kData, H5P_DEFAULT);
    }
    return OpenScratch();
  }

 protected:
  Status AddPayload(const RecordInput& record) override {
    PACKREC_ASSIGN_OR_RETURN(const StoredPayload payload,
                             PreparePayload(record, options_, compressed_));
    if (in_place() && offsets_.back() + payload.bytes.size() > in_place_size_) {
      PACKREC_RETURN_IF_ERROR(LeaveInPlace());
    }
    PACKREC_RETURN_IF_ERROR(payloads_->Append(payload.bytes));
    tables_.Add(record, payload.bytes, payload.zstd);
    offsets_.push_back(offsets_.back() + payload.bytes.size());
    return Status::OK();
  }

  Status PrepareFinish() override {
    if (in_place() && offsets_.back() != in_place_size_) PACKREC_RETURN_IF_ERROR(LeaveInPlace());
    return in_place() ? payloads_->Close() : payloads_->Sync();  // the copy reads the scratch back
  }

  Status FinishData() override {
    if (!in_place()) PACKREC_RETURN_IF_ERROR(CopyScratchIntoData());
    return WriteVector(file_.get(), kOffsets, H5T_STD_U64LE, H5T_NATIVE_UINT64, offsets_, tmp_);
  }

  void RemoveScratch() override {
    payloads_.reset();
    std::error_code ignored;
    fs::remove(ScratchPath(), ignored);
  }

  std::uint64_t StoredBytes() const override { return offsets_.back(); }

 private:
  bool in_place() const { return in_place_size_ > 0; }
  fs::path ScratchPath() const { return WithSuffix(target_, kPayloadScratchSuffix); }

  Status OpenScratch() {
    std::error_code ignored;
    fs::remove(ScratchPath(), ignored);
    PACKREC_ASSIGN_OR_RETURN(payloads_, WritableFile::Create(ScratchPath()));
    payloads_->EnableWriteBehind();
    return Status::OK();
  }

  // The payloads do not add up to the size /data was created with: move what was written to the
  // scratch file and start FILE.tmp again without /data.
  Status LeaveInPlace() {
    PACKREC_RETURN_IF_ERROR(payloads_->Close());
    PACKREC_RETURN_IF_ERROR(OpenScratch());
    PACKREC_ASSIGN_OR_RETURN(const auto written, RandomAccessFile::Open(tmp_));
    std::vector<std::byte> chunk;
    for (std::uint64_t done = 0; done < offsets_.back(); done += chunk.size()) {
      chunk.resize(static_cast<std::size_t>(
          std::min<std::uint64_t>(kCopyChunkBytes, offsets_.back() - done)));
      PACKREC_RETURN_IF_ERROR(written->ReadExact(in_place_offset_ + done, chunk));
      PACKREC_RETURN_IF_ERROR(payloads_->Append(chunk));
    }
    in_place_size_ = 0;
    std::lock_guard lock(LibraryMutex());
    file_.Reset();
    PACKREC_ASSIGN_OR_RETURN(file_, CreateFile(tmp_));
    return Status::OK();
  }

  // REQUIRES: the caller holds LibraryMutex().
  Status CopyScratchIntoData() {
    const hsize_t total = offsets_.back();
    PACKREC_ASSIGN_OR_RETURN(Handle data, CreateDataDataset(file_.get(), total, tmp_));
    PACKREC_ASSIGN_OR_RETURN(const auto payloads, RandomAccessFile::Open(ScratchPath()));
    std::vector<std::byte> chunk;
    for (hsize_t offset = 0; offset < total; offset += chunk.size()) {
      chunk.resize(static_cast<std::size_t>(std::min<hsize_t>(kCopyChunkBytes, total - offset)));
      PACKREC_RETURN_IF_ERROR(payloads->ReadExact(offset, chunk));
      const hsize_t count = chunk.size();
      Handle file_space(H5Dget_space(data.get()), H5Sclose);
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &offset, nullptr, &count, nullptr);
      Handle memory_space(H5Screate_simple(1, &count, nullptr), H5Sclose);
      if (H5Dwrite(data.get(), H5T_NATIVE_UINT8, memory_space.get(), file_space.get(), H5P_DEFAULT,
                   chunk.data()) < 0) {
        return Hdf5Error(StatusCode::kIOError, "write /data in", tmp_);
      }
    }
    if (data.Close() < 0) return Hdf5Error(StatusCode::kIOError, "write /data in", tmp_);
    return Status::OK();
  }

  std::unique_ptr<WritableFile> payloads_;  // into /data in FILE.tmp, or the scratch file
  std::uint64_t in_place_offset_ = 0;       // of /data in FILE.tmp
  std::uint64_t in_place_size_ = 0;         // 0: payloads go to the scratch file
  std::vector<std::uint64_t> offsets_;
  std::vector<std::byte> compressed_;
};

class PixelsWriter final : public Hdf5WriterBase {
 public:
  PixelsWriter(fs::path target, WriterOptions options, Handle file)
      : Hdf5WriterBase(std::move(target), std::move(options), std::move(file)),
        image_bytes_(std::size_t{options_.hdf5.pixel_height} * options_.hdf5.pixel_width * 3) {}
  ~PixelsWriter() override { AbortUnlessFinished(); }

  // REQUIRES: the caller holds LibraryMutex().
  Status Start() {
    const hsize_t dims[4] = {0, options_.hdf5.pixel_height, options_.hdf5.pixel_width, 3};
    const hsize_t max_dims[4] = {H5S_UNLIMITED, dims[1], dims[2], 3};
    const hsize_t chunk[4] = {1, dims[1], dims[2], 3};
    Handle space(H5Screate_simple(4, dims, max_dims), H5Sclose);
    Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(plist.get(), 4, chunk);
    if (options_.compression == Compression::kDeflate) {
      H5Pset_deflate(plist.get(), static_cast<unsigned>(options_.compression_level));
    }
    images_ = Handle(H5Dcreate2(file_.get(), kImages, H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                                plist.get(), H5P_DEFAULT),
                     H5Dclose);
    if (!images_.valid()) return Hdf5Error(StatusCode::kIOError, "create /images in", tmp_);
    return Status::OK();
  }

 protected:
  Status AddPayload(const RecordInput& record) override {
    const std::uint64_t index = tables_.labels.size();
    if (record.image.encoding != Encoding::kRawRgb || record.bytes.size() != image_bytes_ ||
        record.image.width != options_.hdf5.pixel_width ||
        record.image.height != options_.hdf5.pixel_height) {
      return Status::InvalidArgument("record " + std::to_string(index) + " ('" +
                                     std::string(record.key) +
                                     "'): the pixels layout takes raw RGB images of exactly " +
                                     std::to_string(options_.hdf5.pixel_height) + "x" +
                                     std::to_string(options_.hdf5.pixel_width));
    }
    {
      std::lock_guard lock(LibraryMutex());
      if (index == capacity_) {
        capacity_ = std::max<hsize_t>(64, capacity_ * 2);
        PACKREC_RETURN_IF_ERROR(SetExtent(capacity_));
      }
      const hsize_t start[4] = {index, 0, 0, 0};
      const hsize_t count[4] = {1, options_.hdf5.pixel_height, options_.hdf5.pixel_width, 3};
      Handle file_space(H5Dget_space(images_.get()), H5Sclose);
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
      Handle memory_space(H5Screate_simple(4, count, nullptr), H5Sclose);
      if (H5Dwrite(images_.get(), H5T_NATIVE_UINT8, memory_space.get(), file_space.get(),
                   H5P_DEFAULT, record.bytes.data()) < 0) {
        return Hdf5Error(StatusCode::kIOError, "write /images[" + std::to_string(index) + "] in",
                         tmp_);
      }
    }
    tables_.Add(record, record.bytes, /*zstd=*/false);
    return Status::OK();
  }

  Status FinishData() override {
    PACKREC_RETURN_IF_ERROR(SetExtent(tables_.labels.size()));
    if (images_.Close() < 0) return Hdf5Error(StatusCode::kIOError, "write /images in", tmp_);
    return Status::OK();
  }

  void CloseDatasets() override { images_.Reset(); }

  std::uint64_t StoredBytes() const override { return tables_.labels.size() * image_bytes_; }

 private:
  // REQUIRES: the caller holds LibraryMutex().
  Status SetExtent(hsize_t count) {
    const hsize_t dims[4] = {count, options_.hdf5.pixel_height, options_.hdf5.pixel_width, 3};
    if (H5Dset_extent(images_.get(), dims) < 0)
      return Hdf5Error(StatusCode::kIOError, "resize /images in", tmp_);
    return Status::OK();
  }

  const std::size_t image_bytes_;
  Handle images_;
  hsize_t capacity_ = 0;
};

}  // namespace

Result<bool> LooksLikeHdf5Dataset(const fs::path& path) {
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  PACKREC_ASSIGN_OR_RETURN(const bool regular, IsRegularFile(path));
  if (!regular) return false;
  PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(path));
  std::array<std::byte, sizeof kSignature> head{};
  const Status read = file->ReadExact(0, head);
  if (read.code() == StatusCode::kTruncated) return false;  // shorter than a signature
  PACKREC_RETURN_IF_ERROR(read);
  return std::memcmp(head.data(), kSignature, sizeof kSignature) == 0;
}

namespace {

Result<std::unique_ptr<DatasetWriter>> StartHdf5Writer(const fs::path& file,
                                                       const WriterOptions& options) {
  // A writer that failed to start is destroyed (and aborts, taking the lock) after the lock is
  // released.
  std::unique_ptr<DatasetWriter> writer;
  Status started;
  {
    std::lock_guard lock(LibraryMutex());
    PrepareLibrary();
    PACKREC_ASSIGN_OR_RETURN(Handle handle, CreateFile(WithSuffix(file, kTempSuffix)));
    if (options.hdf5.layout == Hdf5Layout::kPixels) {
      auto pixels = std::make_unique<PixelsWriter>(file, options, std::move(handle));
      started = pixels->Start();
      writer = std::move(pixels);
    } else {
      auto encoded = std::make_unique<EncodedWriter>(file, options, std::move(handle));
      started = encoded->Start();
      writer = std::move(encoded);
    }
  }
  if (!started.ok()) return started;
  return writer;
}

}  // namespace

Result<std::unique_ptr<DatasetWriter>> CreateHdf5Writer(const fs::path& file,
                                                        const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(ValidateCommonWriterOptions(options, {.pixel_layout = true}));
  std::error_code error;
  const fs::path journal = WithSuffix(file, kResumeJournalSuffix);
  if (fs::exists(journal, error)) {
    if (!options.overwrite) {
      return Status::AlreadyExists(file.string() + ": an interrupted conversion was writing it (" +
                                   journal.filename().string() + ")")
          .WithRemedy(Remedy::kResumeOrOverwrite);
    }
    fs::remove(journal, error);
  }
  if (fs::exists(file, error)) {
    PACKREC_ASSIGN_OR_RETURN(const bool hdf5, LooksLikeHdf5Dataset(file));
    if (!hdf5) {
      return Status::AlreadyExists(file.string() +
                                   " exists and is not an HDF5 file; refusing to replace it");
    }
    if (!options.overwrite) {
      return Status::AlreadyExists(file.string() + " already exists")
          .WithRemedy(Remedy::kOverwriteToReplace);
    }
  }
  if (file.has_parent_path()) {
    fs::create_directories(file.parent_path(), error);
    if (error) return ErrnoStatus("create directory", file.parent_path(), error.value());
  }
  if (options.resumable) {
    ResumeJournal start;
    start.format = "hdf5";
    PACKREC_RETURN_IF_ERROR(WriteResumeJournal(journal, start));
  }
  Result<std::unique_ptr<DatasetWriter>> writer = StartHdf5Writer(file, options);
  if (!writer.ok() && options.resumable) fs::remove(journal, error);
  return writer;
}

Result<ResumedWriter> ResumeHdf5Writer(const fs::path& file, const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(ValidateCommonWriterOptions(options, {.pixel_layout = true}));
  const fs::path journal_path = WithSuffix(file, kResumeJournalSuffix);
  PACKREC_ASSIGN_OR_RETURN(const ResumeJournal journal, ReadResumeJournal(journal_path));
  if (journal.format != "hdf5") {
    return Status::InvalidArgument(file.string() + " was being written by an interrupted " +
                                   journal.format + " conversion, not an hdf5 one");
  }
  // Its resume point is the start (see the top of this file): FILE.tmp is made again.
  ResumedWriter resumed;
  PACKREC_ASSIGN_OR_RETURN(resumed.writer, StartHdf5Writer(file, options));
  resumed.caller_state = journal.caller_state;
  return resumed;
}

}  // namespace packrec::hdf5
