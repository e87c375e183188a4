// The HDF5 writer. Payloads are appended to a scratch file while records arrive (the size of the
// contiguous /data dataset must be known when it is created); Finish creates the HDF5 file as
// FILE.tmp with every dataset, copies the payloads into /data, closes, fsyncs and renames it.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "dataset/manifest_json.h"
#include "dataset/payload.h"
#include "hdf5/hdf5_format.h"
#include "hdf5/hdf5_util.h"

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
  if (!values.empty() &&
      H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    return Hdf5Error(StatusCode::kIOError, std::string("write /") + name + " in", path);
  }
  return Status::OK();
}

class Hdf5Writer final : public DatasetWriter {
 public:
  Hdf5Writer(fs::path file, WriterOptions options, std::unique_ptr<WritableFile> scratch)
      : file_(std::move(file)), options_(std::move(options)), scratch_(std::move(scratch)) {
    offsets_.push_back(0);
  }
  ~Hdf5Writer() override {
    if (!finished_) Abort();
  }

  Status Add(const RecordInput& record) override {
    if (finished_) return Status::Internal("Add on a finished HDF5 writer");
    const std::uint64_t index = labels_.size();
    PACKREC_RETURN_IF_ERROR(CheckKeySize(index, record.key.size(), kMaxKeyBytes));
    PACKREC_ASSIGN_OR_RETURN(const StoredPayload payload,
                             PreparePayload(record, options_, compressed_));
    PACKREC_RETURN_IF_ERROR(scratch_->Append(payload.bytes));
    offsets_.push_back(offsets_.back() + payload.bytes.size());
    labels_.push_back(record.label);
    keys_.emplace_back(record.key);
    widths_.push_back(record.image.width);
    heights_.push_back(record.image.height);
    channels_.push_back(record.image.channels);
    encodings_.push_back(static_cast<std::uint8_t>(record.image.encoding));
    flags_.push_back(static_cast<std::uint8_t>((record.image.progressive ? kFlagProgressive : 0) |
                                               (payload.zstd ? kFlagZstd : 0)));
    subsampling_.push_back(static_cast<std::uint8_t>(record.image.subsampling));
    checksums_.push_back(Xxh64(payload.bytes, /*seed=*/index));
    raw_sizes_.push_back(record.bytes.size());
    label_count_ = std::max(label_count_, record.label + 1);
    return Status::OK();
  }

  Status Finish(const DatasetMetadata& metadata) override;
  void Abort() override;
  std::uint64_t records_written() const override { return labels_.size(); }
  std::uint64_t bytes_written() const override { return bytes_written_; }

 private:
  Status WriteFile(const fs::path& tmp, const std::string& manifest,
                   const std::vector<std::string>& classes);

  fs::path file_;
  WriterOptions options_;
  std::unique_ptr<WritableFile> scratch_;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::int64_t> labels_;
  std::vector<std::string> keys_;
  std::vector<std::uint32_t> widths_, heights_;
  std::vector<std::uint8_t> channels_, encodings_, flags_, subsampling_;
  std::vector<std::uint64_t> checksums_, raw_sizes_;
  std::vector<std::byte> compressed_;
  std::uint32_t label_count_ = 0;
  std::uint64_t bytes_written_ = 0;
  bool finished_ = false;
};

Status Hdf5Writer::WriteFile(const fs::path& tmp, const std::string& manifest,
                             const std::vector<std::string>& classes) {
  std::lock_guard lock(LibraryMutex());
  SilenceLibrary();
  Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return Hdf5Error(StatusCode::kIOError, "create", tmp);

  // /data: one contiguous uint8 dataset, allocated at creation so its file offset is fixed and a
  // reader can map it.
  const hsize_t total = offsets_.back();
  {
    Handle space(H5Screate_simple(1, &total, nullptr), H5Sclose);
    Handle plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_layout(plist.get(), H5D_CONTIGUOUS);
    H5Pset_alloc_time(plist.get(), H5D_ALLOC_TIME_EARLY);
    Handle data(H5Dcreate2(file.get(), kData, H5T_STD_U8LE, space.get(), H5P_DEFAULT, plist.get(),
                           H5P_DEFAULT),
                H5Dclose);
    if (!data.valid()) return Hdf5Error(StatusCode::kIOError, "create /data in", tmp);
    PACKREC_ASSIGN_OR_RETURN(const auto payloads, RandomAccessFile::Open(scratch_->path()));
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
        return Hdf5Error(StatusCode::kIOError, "write /data in", tmp);
      }
    }
  }
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kOffsets, H5T_STD_U64LE, H5T_NATIVE_UINT64, offsets_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kLabels, H5T_STD_I64LE, H5T_NATIVE_INT64, labels_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kWidth, H5T_STD_U32LE, H5T_NATIVE_UINT32, widths_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kHeight, H5T_STD_U32LE, H5T_NATIVE_UINT32, heights_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kChannels, H5T_STD_U8LE, H5T_NATIVE_UINT8, channels_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kEncoding, H5T_STD_U8LE, H5T_NATIVE_UINT8, encodings_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kFlags, H5T_STD_U8LE, H5T_NATIVE_UINT8, flags_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kSubsampling, H5T_STD_U8LE, H5T_NATIVE_UINT8, subsampling_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kChecksums, H5T_STD_U64LE, H5T_NATIVE_UINT64, checksums_, tmp));
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), "raw_sizes", H5T_STD_U64LE, H5T_NATIVE_UINT64, raw_sizes_, tmp));
  // Strings: vectors of C pointers, the form HDF5 takes variable-length strings in.
  const Handle string_type = VariableString();
  std::vector<const char*> key_pointers;
  for (const std::string& key : keys_) key_pointers.push_back(key.c_str());
  PACKREC_RETURN_IF_ERROR(
      WriteVector(file.get(), kKeys, string_type.get(), string_type.get(), key_pointers, tmp));
  {
    const hsize_t count = classes.size();
    Handle space(H5Screate_simple(1, &count, nullptr), H5Sclose);
    Handle attribute(H5Acreate2(file.get(), kClassesAttribute, string_type.get(), space.get(),
                                H5P_DEFAULT, H5P_DEFAULT),
                     H5Aclose);
    std::vector<const char*> pointers;
    for (const std::string& name : classes) pointers.push_back(name.c_str());
    if (!attribute.valid() ||
        (count > 0 && H5Awrite(attribute.get(), string_type.get(), pointers.data()) < 0)) {
      return Hdf5Error(StatusCode::kIOError, "write classes attribute in", tmp);
    }
  }
  {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle attribute(H5Acreate2(file.get(), kManifestAttribute, string_type.get(), space.get(),
                                H5P_DEFAULT, H5P_DEFAULT),
                     H5Aclose);
    const char* text = manifest.c_str();
    if (!attribute.valid() || H5Awrite(attribute.get(), string_type.get(), &text) < 0) {
      return Hdf5Error(StatusCode::kIOError, "write manifest attribute in", tmp);
    }
  }
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0)
    return Hdf5Error(StatusCode::kIOError, "flush", tmp);
  file.Reset();
  return Status::OK();
}

Status Hdf5Writer::Finish(const DatasetMetadata& metadata) {
  if (finished_) return Status::Internal("Finish on a finished HDF5 writer");
  PACKREC_RETURN_IF_ERROR(scratch_->Sync());  // flushes its buffer; the copy reads it back
  const DatasetManifest manifest =
      ManifestFromMetadata(metadata, kManifestFormatName, kHdf5FormatVersion, labels_.size(),
                           offsets_.back(), label_count_);
  PACKREC_ASSIGN_OR_RETURN(const std::string text, SerializeManifestJson(manifest));
  const fs::path tmp = WithSuffix(file_, ".tmp");
  std::error_code error;
  fs::remove(tmp, error);  // a leftover of an interrupted run
  PACKREC_RETURN_IF_ERROR(WriteFile(tmp, text, metadata.classes));
  PACKREC_RETURN_IF_ERROR(SyncFile(tmp));
  if (!metadata.rejects.empty()) {
    std::string rejects = "# path\treason\n";
    for (const Reject& reject : metadata.rejects)
      rejects += reject.path + "\t" + reject.reason + "\n";
    PACKREC_RETURN_IF_ERROR(
        WriteFileAtomically(WithSuffix(file_, ".rejects.tsv"), AsBytes(rejects)));
  }
  PACKREC_RETURN_IF_ERROR(RenamePath(tmp, file_));
  PACKREC_RETURN_IF_ERROR(SyncDirectory(file_.has_parent_path() ? file_.parent_path() : "."));
  bytes_written_ = fs::file_size(file_, error);
  const fs::path scratch_path = scratch_->path();
  scratch_.reset();
  fs::remove(scratch_path, error);
  finished_ = true;
  return Status::OK();
}

void Hdf5Writer::Abort() {
  if (finished_) return;
  std::error_code ignored;
  if (scratch_) {
    const fs::path scratch_path = scratch_->path();
    scratch_.reset();
    fs::remove(scratch_path, ignored);
  }
  fs::remove(WithSuffix(file_, ".tmp"), ignored);
  finished_ = true;
}

}  // namespace

bool LooksLikeHdf5Dataset(const fs::path& path) {
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char head[8] = {};
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  return n == sizeof head && std::memcmp(head, kSignature, sizeof head) == 0;
}

Result<std::unique_ptr<DatasetWriter>> CreateHdf5Writer(const fs::path& file,
                                                        const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(ValidateCommonWriterOptions(options));
  std::error_code error;
  if (fs::exists(file, error)) {
    if (!LooksLikeHdf5Dataset(file)) {
      return Status::AlreadyExists(file.string() +
                                   " exists and is not an HDF5 file; refusing to replace it");
    }
    if (!options.overwrite) {
      return Status::AlreadyExists(file.string() +
                                   " already exists (pass --overwrite to replace it)");
    }
  }
  if (file.has_parent_path()) {
    fs::create_directories(file.parent_path(), error);
    if (error) return ErrnoStatus("create directory", file.parent_path(), error.value());
  }
  const fs::path scratch = WithSuffix(file, ".payloads.tmp");
  fs::remove(scratch, error);
  PACKREC_ASSIGN_OR_RETURN(auto scratch_file, WritableFile::Create(scratch));
  return std::unique_ptr<DatasetWriter>(new Hdf5Writer(file, options, std::move(scratch_file)));
}

}  // namespace packrec::hdf5
