// The HDF5 reader. Encoded layout: HDF5 is used only at open, under the library lock, to read the
// manifest and the per-record datasets into memory and to find /data's file offset. Reads then go
// straight to a read-only mapping of the file (zero-copy views) without HDF5, so they need no lock
// and scale with threads. Pixels layout: /images is chunked (maybe deflated), so every read goes
// through HDF5 under the lock into the caller's scratch.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/range_stream.h"
#include "hdf5/hdf5_format.h"
#include "hdf5/hdf5_util.h"
#include "storage/field_block.h"
#include "storage/manifest_json.h"
#include "storage/payload.h"

namespace packrec::hdf5 {
namespace {

namespace fs = std::filesystem;

// Whether `dataset` stores all the `values` values it declares, each at its type's size (a
// variable-length string: at least 1 byte). A few bytes of metadata can declare 2^40 values whose
// storage was never written (they read as fill values): sizing a buffer by the declaration alone
// would be a huge allocation. packrec writes every 1-D dataset whole and uncompressed.
bool StoresAll(hid_t dataset, std::uint64_t values) {
  Handle type(H5Dget_type(dataset), H5Tclose);
  const std::uint64_t value_bytes =
      H5Tis_variable_str(type.get()) > 0 ? 1 : std::max<std::size_t>(H5Tget_size(type.get()), 1);
  return values == 0 || H5Dget_storage_size(dataset) / value_bytes >= values;
}

// A 1-D dataset into `values`; with `expected`, it must hold exactly that many.
template <typename T>
Status ReadVector(hid_t file, const char* name, hid_t memory_type,
                  std::optional<std::uint64_t> expected, std::vector<T>* values,
                  const fs::path& path) {
  Handle dataset(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) {
    return Hdf5Error(StatusCode::kCorruption, std::string("open /") + name + " in", path);
  }
  Handle space(H5Dget_space(dataset.get()), H5Sclose);
  hsize_t size = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), &size, nullptr) != 1 ||
      (expected && size != *expected)) {
    return Status::Corruption(
        path.string() + ": /" + name + " holds " + std::to_string(size) + " values" +
        (expected ? ", expected " + std::to_string(*expected) : std::string()));
  }
  if (!StoresAll(dataset.get(), size)) {
    return Status::Corruption(path.string() + ": /" + name + " declares " + std::to_string(size) +
                              " values but stores only " +
                              std::to_string(H5Dget_storage_size(dataset.get())) + " bytes");
  }
  values->resize(size);
  if (size > 0 &&
      H5Dread(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values->data()) < 0) {
    return Hdf5Error(StatusCode::kCorruption, std::string("read /") + name + " in", path);
  }
  return Status::OK();
}

Result<std::string> ReadStringAttribute(hid_t file, const char* name, const fs::path& path) {
  Handle attribute(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) {
    return Status::Corruption(path.string() + ": no '" + name +
                              "' attribute (not written by packrec)");
  }
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) <= 0) {
    return Status::Corruption(path.string() + ": attribute '" + name + "' is not a string");
  }
  // H5Aread writes one pointer per element: an array of strings would overrun `text`.
  Handle space(H5Aget_space(attribute.get()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    return Status::Corruption(path.string() + ": attribute '" + name + "' is not a single string");
  }
  char* text = nullptr;
  if (H5Aread(attribute.get(), type.get(), &text) < 0 || text == nullptr) {
    return Hdf5Error(StatusCode::kCorruption, std::string("read attribute ") + name + " of", path);
  }
  std::string value(text);
  H5free_memory(text);
  return value;
}

struct Index {
  std::vector<std::uint64_t> offsets;  // N + 1, into /data
  std::vector<std::int64_t> labels;
  std::vector<std::string> keys;
  std::vector<std::uint32_t> widths, heights;
  std::vector<std::uint8_t> channels, encodings, flags;
  std::vector<std::uint64_t> checksums, raw_sizes;
  std::vector<std::uint64_t> meta_checksums;  // version 2; empty for version 1
  std::uint64_t data_offset = 0;              // of /data in the file
  std::uint64_t data_size = 0;
  bool pixels = false;  // the pixels layout: /images instead of /data and /offsets
  std::uint32_t pixel_height = 0, pixel_width = 0;
  // Version 3: each field's /fields/<name>/ datasets, read into memory at open.
  struct Field {
    std::vector<std::byte> values;
    std::vector<std::uint64_t> offsets;  // N + 1, into values
    std::vector<std::uint8_t> present;
    std::vector<std::uint64_t> checksums;
  };
  std::vector<Field> fields;
};

// REQUIRES: the caller holds LibraryMutex(). The fields' datasets, checked to describe their
// values exactly (increasing offsets ending at the values' size, absent values empty).
Status ReadFields(hid_t f, const fs::path& path, std::uint64_t count,
                  const std::vector<FieldSpec>& schema, Index* index) {
  for (const FieldSpec& spec : schema) {
    const std::string group = std::string(kFieldsGroup) + "/" + spec.name + "/";
    Index::Field& field = index->fields.emplace_back();
    PACKREC_RETURN_IF_ERROR(ReadVector(f, (group + "values").c_str(), H5T_NATIVE_UINT8,
                                       std::nullopt, &field.values, path));
    PACKREC_RETURN_IF_ERROR(ReadVector(f, (group + "offsets").c_str(), H5T_NATIVE_UINT64, count + 1,
                                       &field.offsets, path));
    PACKREC_RETURN_IF_ERROR(
        ReadVector(f, (group + "present").c_str(), H5T_NATIVE_UINT8, count, &field.present, path));
    PACKREC_RETURN_IF_ERROR(ReadVector(f, (group + "checksums").c_str(), H5T_NATIVE_UINT64, count,
                                       &field.checksums, path));
    bool ordered = field.offsets.front() == 0 && field.offsets.back() == field.values.size();
    for (std::uint64_t i = 0; ordered && i < count; ++i) {
      ordered = field.offsets[i] <= field.offsets[i + 1] &&
                (field.present[i] != 0 || field.offsets[i] == field.offsets[i + 1]);
    }
    if (!ordered) {
      return Status::Corruption(path.string() + ": /" + group +
                                "offsets do not describe its values");
    }
  }
  return Status::OK();
}

// Reads single images out of the pixels layout's /images. HDF5 identifiers are opened, used and
// closed under the library lock.
class PixelSource {
 public:
  PixelSource(Handle file, Handle images, fs::path path, std::uint32_t height, std::uint32_t width)
      : file_(std::move(file)),
        images_(std::move(images)),
        path_(std::move(path)),
        height_(height),
        width_(width) {}
  ~PixelSource() {
    std::lock_guard lock(LibraryMutex());
    images_.Reset();
    file_.Reset();
  }
  PixelSource(const PixelSource&) = delete;
  PixelSource& operator=(const PixelSource&) = delete;

  std::size_t image_bytes() const { return std::size_t{height_} * width_ * 3; }

  Status Read(std::uint64_t index, std::span<std::byte> out) const {
    const hsize_t start[4] = {index, 0, 0, 0};
    const hsize_t count[4] = {1, height_, width_, 3};
    std::lock_guard lock(LibraryMutex());
    Handle file_space(H5Dget_space(images_.get()), H5Sclose);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    Handle memory_space(H5Screate_simple(4, count, nullptr), H5Sclose);
    if (H5Dread(images_.get(), H5T_NATIVE_UINT8, memory_space.get(), file_space.get(), H5P_DEFAULT,
                out.data()) < 0) {
      return Hdf5Error(StatusCode::kCorruption, "read /images[" + std::to_string(index) + "] of",
                       path_);
    }
    return Status::OK();
  }

 private:
  Handle file_;
  Handle images_;
  fs::path path_;
  std::uint32_t height_, width_;
};

// REQUIRES: the caller holds LibraryMutex(). From the key blob when the file has one (written
// since it was added), else from the variable-length strings.
Status ReadKeys(hid_t f, const fs::path& path, std::uint64_t count,
                std::vector<std::string>* keys) {
  if (H5Lexists(f, kKeyBytes, H5P_DEFAULT) > 0) {
    std::vector<std::uint64_t> offsets;
    PACKREC_RETURN_IF_ERROR(
        ReadVector(f, kKeyOffsets, H5T_NATIVE_UINT64, count + 1, &offsets, path));
    std::vector<std::uint8_t> bytes;  // uint8, as stored: a signed char target would convert
    PACKREC_RETURN_IF_ERROR(ReadVector(f, kKeyBytes, H5T_NATIVE_UINT8, std::nullopt, &bytes, path));
    keys->reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      if (offsets[i] > offsets[i + 1] || offsets[i + 1] > bytes.size()) {
        return Status::Corruption(path.string() + ": /" + kKeyOffsets + " is out of order at " +
                                  std::to_string(i));
      }
      keys->emplace_back(reinterpret_cast<const char*>(bytes.data()) + offsets[i],
                         offsets[i + 1] - offsets[i]);
    }
    return Status::OK();
  }
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  std::vector<char*> pointers;
  PACKREC_RETURN_IF_ERROR(ReadVector(f, kKeys, type.get(), count, &pointers, path));
  for (char*& key : pointers) {
    keys->emplace_back(key != nullptr ? key : "");
    H5free_memory(key);
  }
  return Status::OK();
}

// REQUIRES: the caller holds LibraryMutex().
Status ReadImagesShape(hid_t f, const fs::path& path, std::uint64_t count, Index* index) {
  Handle images(H5Dopen2(f, kImages, H5P_DEFAULT), H5Dclose);
  if (!images.valid()) return Hdf5Error(StatusCode::kCorruption, "open /images in", path);
  Handle space(H5Dget_space(images.get()), H5Sclose);
  hsize_t dims[4] = {};
  if (H5Sget_simple_extent_ndims(space.get()) != 4 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) != 4 || dims[0] != count ||
      dims[3] != 3 || dims[1] == 0 || dims[2] == 0 || dims[1] > 65535 || dims[2] > 65535) {
    return Status::Corruption(path.string() + ": /images is not " + std::to_string(count) +
                              " x H x W x 3");
  }
  index->pixel_height = static_cast<std::uint32_t>(dims[1]);
  index->pixel_width = static_cast<std::uint32_t>(dims[2]);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (index->encodings[i] != static_cast<std::uint8_t>(Encoding::kRawRgb) ||
        index->flags[i] != 0) {
      return Status::Corruption(path.string() + ": record " + std::to_string(i) +
                                " of the pixels layout is not marked raw RGB");
    }
  }
  return Status::OK();
}

// REQUIRES: the caller holds LibraryMutex().
Status ReadIndex(hid_t f, const fs::path& path, std::uint64_t count, std::uint32_t version,
                 Index* index) {
  index->pixels = H5Lexists(f, kImages, H5P_DEFAULT) > 0;
  if (!index->pixels) {
    PACKREC_RETURN_IF_ERROR(
        ReadVector(f, kOffsets, H5T_NATIVE_UINT64, count + 1, &index->offsets, path));
  }
  PACKREC_RETURN_IF_ERROR(ReadVector(f, kLabels, H5T_NATIVE_INT64, count, &index->labels, path));
  PACKREC_RETURN_IF_ERROR(ReadVector(f, kWidth, H5T_NATIVE_UINT32, count, &index->widths, path));
  PACKREC_RETURN_IF_ERROR(ReadVector(f, kHeight, H5T_NATIVE_UINT32, count, &index->heights, path));
  PACKREC_RETURN_IF_ERROR(
      ReadVector(f, kChannels, H5T_NATIVE_UINT8, count, &index->channels, path));
  PACKREC_RETURN_IF_ERROR(
      ReadVector(f, kEncoding, H5T_NATIVE_UINT8, count, &index->encodings, path));
  PACKREC_RETURN_IF_ERROR(ReadVector(f, kFlags, H5T_NATIVE_UINT8, count, &index->flags, path));
  PACKREC_RETURN_IF_ERROR(
      ReadVector(f, kChecksums, H5T_NATIVE_UINT64, count, &index->checksums, path));
  PACKREC_RETURN_IF_ERROR(
      ReadVector(f, kRawSizes, H5T_NATIVE_UINT64, count, &index->raw_sizes, path));
  if (version >= 2) {
    PACKREC_RETURN_IF_ERROR(
        ReadVector(f, kMetaChecksums, H5T_NATIVE_UINT64, count, &index->meta_checksums, path));
  }
  PACKREC_RETURN_IF_ERROR(ReadKeys(f, path, count, &index->keys));
  if (index->pixels) return ReadImagesShape(f, path, count, index);
  Handle data(H5Dopen2(f, kData, H5P_DEFAULT), H5Dclose);
  if (!data.valid()) return Hdf5Error(StatusCode::kCorruption, "open /data in", path);
  Handle plist(H5Dget_create_plist(data.get()), H5Pclose);
  if (H5Pget_layout(plist.get()) != H5D_CONTIGUOUS) {
    return Status::Corruption(path.string() + ": /data is not contiguous, so it cannot be mapped");
  }
  Handle space(H5Dget_space(data.get()), H5Sclose);
  hsize_t size = 0;
  H5Sget_simple_extent_dims(space.get(), &size, nullptr);
  index->data_size = size;
  const haddr_t offset = H5Dget_offset(data.get());
  if (size > 0 && offset == HADDR_UNDEF) {
    return Status::Corruption(path.string() + ": /data has no storage");
  }
  index->data_offset = size > 0 ? offset : 0;
  return Status::OK();
}

class Hdf5Reader final : public Reader {
 public:
  Hdf5Reader(fs::path path, OpenOptions options, DatasetInfo info, Index index, MappedFile map,
             std::unique_ptr<PixelSource> pixels)
      : path_(std::move(path)),
        options_(options),
        info_(std::move(info)),
        index_(std::move(index)),
        map_(std::move(map)),
        pixels_(std::move(pixels)) {}

  const DatasetInfo& info() const override { return info_; }

  Result<RecordView> Read(std::uint64_t index, ReadScratch& scratch) const override {
    if (index >= info_.record_count) return IndexOutOfRange(index, info_.record_count);
    if (pixels_ != nullptr) {
      return AtRecord(ReadPixels(index, scratch, options_.verify_checksums), index, path_.string());
    }
    return AtRecord(View(index, scratch, options_.verify_checksums), index, path_.string());
  }

  // Streams /data through pread windows instead of faulting the mapping in (docs/benchmarks.md).
  Status ForEach(const Visitor& visit, std::uint64_t begin, std::uint64_t end) const override {
    end = std::min(end, info_.record_count);
    if (pixels_ != nullptr) return Reader::ForEach(visit, begin, end);
    PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(path_));
    ReadScratch scratch;
    return Stream(*file, begin, end, [&](std::uint64_t i, std::span<const std::byte> stored) {
      PACKREC_ASSIGN_OR_RETURN(const RecordView view,
                               View(i, stored, scratch, options_.verify_checksums));
      return visit(view);
    });
  }

  VerifyStats Verify(VerifyReporter& reporter) const override {
    VerifyStats stats;
    auto report = [&](std::optional<std::uint64_t> i, const Status& status) {
      reporter.Report({path_.filename().string(), i, i ? index_.keys[*i] : "",
                       i && pixels_ == nullptr
                           ? std::optional(index_.data_offset + index_.offsets[*i])
                           : std::nullopt,
                       status});
      ++stats.problems;
    };
    ReadScratch scratch;
    if (pixels_ != nullptr) {
      for (std::uint64_t i = 0; i < info_.record_count; ++i) {
        ++stats.records_checked;
        Result<RecordView> view = ReadPixels(i, scratch, /*verify=*/true);
        if (view.ok()) {
          stats.bytes_checked += view->bytes.size();
        } else {
          report(i, view.status());
        }
      }
      return stats;
    }
    Result<std::unique_ptr<RandomAccessFile>> file = RandomAccessFile::Open(path_);
    if (!file.ok()) {
      report(std::nullopt, file.status());
      return stats;
    }
    const Status scanned = Stream(
        **file, 0, info_.record_count, [&](std::uint64_t i, std::span<const std::byte> stored) {
          ++stats.records_checked;
          Result<RecordView> view = View(i, stored, scratch, /*verify=*/true);
          if (view.ok()) {
            stats.bytes_checked += stored.size();
          } else {
            report(i, view.status());
          }
          return Status::OK();  // report and go on
        });
    if (!scanned.ok()) report(std::nullopt, scanned);
    return stats;
  }

 private:
  Status Stream(const RandomAccessFile& file, std::uint64_t begin, std::uint64_t end,
                const OnRange& on_record) const {
    return StreamRanges(
        file, begin, end,
        [&](std::uint64_t i) {
          return std::pair{index_.data_offset + index_.offsets[i],
                           index_.offsets[i + 1] - index_.offsets[i]};
        },
        on_record);
  }

  Result<RecordView> View(std::uint64_t i, ReadScratch& scratch, bool verify) const {
    return View(i,
                map_.bytes().subspan(index_.data_offset + index_.offsets[i],
                                     index_.offsets[i + 1] - index_.offsets[i]),
                scratch, verify);
  }

  Result<RecordView> ReadPixels(std::uint64_t i, ReadScratch& scratch, bool verify) const {
    scratch.bytes.resize(pixels_->image_bytes());
    PACKREC_RETURN_IF_ERROR(pixels_->Read(i, scratch.bytes));
    // The checksum is of the stored pixels; the view is then built as for any payload.
    return View(i, scratch.bytes, scratch, verify);
  }

  Result<RecordView> View(std::uint64_t i, std::span<const std::byte> stored, ReadScratch& scratch,
                          bool verify) const {
    RecordView view;
    view.index = i;
    view.key = index_.keys[i];
    view.width = index_.widths[i];
    view.height = index_.heights[i];
    view.channels = index_.channels[i];
    view.encoding = static_cast<Encoding>(index_.encodings[i]);
    // Built only for an error: formatting it for every record cost more than the read.
    const auto where = [&] {
      return path_.string() + ": record " + std::to_string(i) + " (key '" + index_.keys[i] + "')" +
             (pixels_ != nullptr
                  ? std::string(" in /images")
                  : " at byte offset " + std::to_string(index_.data_offset + index_.offsets[i]));
    };
    // Every read, whatever `verify` says: a hash of some 30 bytes and the key, against a label or
    // size edited in place being delivered as true.
    PACKREC_RETURN_IF_ERROR(CheckMeta(i, where));
    view.label = static_cast<std::uint32_t>(index_.labels[i]);
    if (const Status label = CheckLabelAgainstManifest(info_, i, view.label); !label.ok()) {
      return Status::Corruption(where() + ": " + label.message()).WithRecordIndex(i);
    }
    if (verify) {
      const std::uint64_t computed = Xxh64(stored, /*seed=*/i);
      if (computed != index_.checksums[i]) {
        return Status::Corruption(where() + ": checksum mismatch (stored " +
                                  Hex64(index_.checksums[i]) + ", computed " + Hex64(computed) +
                                  ")");
      }
    }
    if ((index_.flags[i] & kFlagZstd) != 0) {
      PACKREC_RETURN_IF_ERROR(DecompressPayload(stored, index_.raw_sizes[i], scratch, where()));
      view.bytes = scratch.bytes;
    } else {
      view.bytes = stored;
    }
    if (!index_.fields.empty()) {
      scratch.fields.resize(index_.fields.size());
      for (std::size_t f = 0; f < index_.fields.size(); ++f) {
        PACKREC_ASSIGN_OR_RETURN(scratch.fields[f], FieldValue(i, f, verify));
      }
      view.fields = scratch.fields;
    }
    return view;
  }

  // Record i's value of field f, from the fields read at open; its checksum checked when
  // `verify`.
  Result<FieldView> FieldValue(std::uint64_t i, std::size_t f, bool verify) const {
    const Index::Field& field = index_.fields[f];
    if (field.present[i] == 0) return FieldView{};
    const FieldView value{true,
                          std::span<const std::byte>(field.values)
                              .subspan(field.offsets[i], field.offsets[i + 1] - field.offsets[i])};
    if (verify && Xxh64(value.bytes, /*seed=*/i) != field.checksums[i]) {
      return Status::Corruption(path_.string() + ": record " + std::to_string(i) + " (key '" +
                                index_.keys[i] + "'), field '" + info_.fields[f].name +
                                "': checksum mismatch")
          .WithRecordIndex(i);
    }
    const Status declared = CheckFieldValue(info_.fields[f], value);
    if (!declared.ok()) {
      return Status::Corruption(path_.string() + ": record " + std::to_string(i) + " (key '" +
                                index_.keys[i] + "'), " + declared.message())
          .WithRecordIndex(i)
          .WithPath(path_.string());
    }
    return value;
  }

 public:
  Result<FieldView> ReadField(std::uint64_t index, std::size_t field,
                              ReadScratch& scratch) const override {
    if (field >= index_.fields.size() || index >= info_.record_count) {
      return Reader::ReadField(index, field, scratch);
    }
    return FieldValue(index, field, options_.verify_checksums);
  }

  Result<std::vector<std::uint32_t>> ReadLabels() const override {
    std::vector<std::uint32_t> labels;
    labels.reserve(index_.labels.size());
    for (std::uint64_t i = 0; i < index_.labels.size(); ++i) {
      PACKREC_RETURN_IF_ERROR(
          CheckMeta(i, [&] { return path_.string() + ": record " + std::to_string(i); }));
      labels.push_back(static_cast<std::uint32_t>(index_.labels[i]));
    }
    return labels;
  }

 private:
  // Record i's metadata as the file holds it: a label a RecordView can carry (uint32: an edited
  // -1 was delivered as 4294967295), and, from version 2, its checksum.
  template <typename Where>
  Status CheckMeta(std::uint64_t i, const Where& where) const {
    const std::int64_t label = index_.labels[i];
    if (label < 0 || label > std::int64_t{0xffffffff}) {
      return Status::Corruption(where() + ": label " + std::to_string(label) +
                                " is not a class index (0 to 4294967295)");
    }
    if (index_.meta_checksums.empty()) return Status::OK();
    const std::uint64_t computed =
        RecordMetaChecksum(i,
                           {label, index_.widths[i], index_.heights[i], index_.channels[i],
                            index_.encodings[i], index_.flags[i], index_.raw_sizes[i]},
                           index_.keys[i]);
    if (computed != index_.meta_checksums[i]) {
      return Status::Corruption(where() + ": metadata checksum mismatch (its label, size, flags " +
                                "or key in the per-record datasets changed since it was " +
                                "written; stored " + Hex64(index_.meta_checksums[i]) +
                                ", computed " + Hex64(computed) + ")");
    }
    return Status::OK();
  }

  fs::path path_;
  OpenOptions options_;
  DatasetInfo info_;
  Index index_;
  MappedFile map_;                       // encoded layout
  std::unique_ptr<PixelSource> pixels_;  // pixels layout
};

}  // namespace

Result<std::unique_ptr<Reader>> OpenHdf5Dataset(const fs::path& path, const OpenOptions& options) {
  DatasetManifest manifest;
  Index index;
  std::unique_ptr<PixelSource> pixels;
  {
    std::lock_guard lock(LibraryMutex());
    PrepareLibrary();
    // No file locking: HDF5's flock fails on some network file systems (and read-only mounts
    // need none); the file is immutable once written.
    Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_file_locking(access.get(), false, true);
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose);
    if (!file.valid()) {
      return Hdf5Error(StatusCode::kCorruption, "open", path);
    }
    PACKREC_ASSIGN_OR_RETURN(const std::string manifest_text,
                             ReadStringAttribute(file.get(), kManifestAttribute, path));
    PACKREC_ASSIGN_OR_RETURN(manifest,
                             ParseManifestJson(manifest_text, path.string() + " (manifest)",
                                               kManifestFormatName, kHdf5VersionWithWebp));
    PACKREC_RETURN_IF_ERROR(
        ReadIndex(file.get(), path, manifest.record_count, manifest.format_version, &index));
    PACKREC_RETURN_IF_ERROR(
        ReadFields(file.get(), path, manifest.record_count, manifest.fields, &index));
    if (index.pixels) {
      Handle images(H5Dopen2(file.get(), kImages, H5P_DEFAULT), H5Dclose);
      if (!images.valid()) return Hdf5Error(StatusCode::kCorruption, "open /images in", path);
      pixels = std::make_unique<PixelSource>(std::move(file), std::move(images), path,
                                             index.pixel_height, index.pixel_width);
    }
  }
  if (pixels != nullptr) {
    std::error_code error;
    DatasetInfo info = InfoFromManifest(manifest, "hdf5");
    info.metadata_checksummed = manifest.format_version >= 2;
    info.files.push_back(
        {path.filename().string(), 0, manifest.record_count, fs::file_size(path, error)});
    return std::unique_ptr<Reader>(new Hdf5Reader(path, options, std::move(info), std::move(index),
                                                  MappedFile(), std::move(pixels)));
  }
  // The index must describe /data exactly: increasing offsets that end at its size.
  for (std::uint64_t i = 0; i < manifest.record_count; ++i) {
    if (index.offsets[i] > index.offsets[i + 1]) {
      return Status::Corruption(path.string() + ": /offsets decrease at record " +
                                std::to_string(i));
    }
  }
  if (index.offsets.front() != 0 || index.offsets.back() != index.data_size) {
    return Status::Corruption(path.string() + ": /offsets end at " +
                              std::to_string(index.offsets.back()) + ", /data holds " +
                              std::to_string(index.data_size) + " bytes");
  }
  PACKREC_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  if (index.data_offset + index.data_size > map.size()) {
    return Status::Truncated(path.string() + ": truncated (/data ends at byte " +
                             std::to_string(index.data_offset + index.data_size) +
                             ", the file at " + std::to_string(map.size()) + ")");
  }
  DatasetInfo info = InfoFromManifest(manifest, "hdf5");
  info.metadata_checksummed = manifest.format_version >= 2;
  info.files.push_back({path.filename().string(), 0, manifest.record_count, map.size()});
  return std::unique_ptr<Reader>(
      new Hdf5Reader(path, options, std::move(info), std::move(index), std::move(map), nullptr));
}

}  // namespace packrec::hdf5
