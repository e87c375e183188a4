// Caffe LMDB import: every value a caffe.Datum (libprotobuf, from caffe_datum.proto). Encoded
// Datums pass their image through; raw ones (channels x height x width BGR bytes) become a PNG
// (lossless) or a raw RGB record, as the caller chooses.
#include <fcntl.h>
#include <lmdb.h>

#include <cstdio>
#include <cstring>

#include "core/endian.h"
#include "core/file_io.h"
#include "decode/codecs.h"
#include "lmdb/caffe_datum.pb.h"
#include "lmdb/lmdb_format.h"
#include "lmdb/lmdb_pages.h"
#include "lmdb/lmdb_status.h"
#include "storage/source_util.h"

namespace packrec::lmdb {
namespace {

namespace fs = std::filesystem;

// convert_imageset's keys are "%08d_" + the listed path; the path is the record's key.
std::string KeyFromCaffe(std::string_view key) {
  if (key.size() > 9 && key[8] == '_') {
    bool digits = true;
    for (std::size_t i = 0; i < 8; ++i) digits = digits && key[i] >= '0' && key[i] <= '9';
    if (digits) return std::string(key.substr(9));
  }
  return std::string(key);
}

class CaffeLmdbSource final : public RecordSource {
 public:
  CaffeLmdbSource(fs::path path, SourceOptions options)
      : path_(std::move(path)), options_(std::move(options)), files_{DataFile(path_)} {}

  ~CaffeLmdbSource() override {
    if (cursor_ != nullptr) mdb_cursor_close(cursor_);
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    if (env_ != nullptr) mdb_env_close(env_);
  }

  Status Open() {
    std::error_code error;
    const bool directory = fs::is_directory(path_, error);
    // Before LMDB maps the file: a cut one would raise SIGBUS on the first page past its end.
    PACKREC_RETURN_IF_ERROR(CheckDataFileWhole(files_.front()));
    // Before its cursor walks the pages: a damaged one would fail an assert() inside liblmdb.
    PACKREC_RETURN_IF_ERROR(CheckLmdbPages(files_.front()));
    int rc = mdb_env_create(&env_);
    if (rc == 0) mdb_env_set_mapsize(env_, 0);
    if (rc == 0) {
      rc = mdb_env_open(env_, path_.c_str(),
                        MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | (directory ? 0 : MDB_NOSUBDIR), 0644);
    }
    if (rc != 0) return LmdbError(rc, "open the Caffe LMDB", path_);
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn_);
    MDB_dbi dbi = 0;
    if (rc == 0) rc = mdb_dbi_open(txn_, nullptr, 0, &dbi);
    MDB_stat stat{};
    if (rc == 0) rc = mdb_stat(txn_, dbi, &stat);
    if (rc == 0) rc = mdb_cursor_open(txn_, dbi, &cursor_);
    if (rc != 0) return LmdbError(rc, "open the Caffe LMDB", path_);
    entries_ = stat.ms_entries;
    mdb_env_get_fd(env_, &fd_);
    file_size_ = fs::file_size(files_.front(), error);
    if (error) file_size_ = 0;
    return Status::OK();
  }

  // What ReadAhead calls: an LMDB loaded in key order (convert_imageset's) lies in the file
  // about in that order, so the entry count tells where the cursor reads next.
  void AdviseWillNeed(std::uint64_t offset, std::uint64_t length) const {
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                    POSIX_FADV_WILLNEED);
  }

  Result<bool> Next(SourceRecord& record) override {
    if (entries_ > 0 && file_size_ > 0 && number_ % 64 == 0) {
      const auto position =
          static_cast<std::uint64_t>(static_cast<double>(file_size_) *
                                     static_cast<double>(number_) / static_cast<double>(entries_));
      read_ahead_.At(*this, position, file_size_);
    }
    MDB_val key{}, value{};
    const int rc = mdb_cursor_get(cursor_, &key, &value, number_ == 0 ? MDB_FIRST : MDB_NEXT);
    if (rc == MDB_NOTFOUND) return false;
    if (rc != 0) return LmdbError(rc, "read the Caffe LMDB", path_);
    record = SourceRecord{};
    const std::string_view raw_key(static_cast<const char*>(key.mv_data), key.mv_size);
    record.origin = path_.string() + " entry " + std::to_string(number_) + " (key " +
                    std::string(raw_key.substr(0, 200)) + ")";
    ++number_;
    record.key = KeyFromCaffe(raw_key);
    record.status = Parse(value, record);
    return true;
  }

  std::vector<std::string> classes() const override { return {}; }
  SourceFormat format() const override { return SourceFormat::kCaffeLmdb; }
  const std::vector<fs::path>& files() const override { return files_; }
  std::uint64_t size_hint() const override { return entries_; }

 private:
  // LMDB maps the file and trusts it: pages past a cut-short file's end would raise SIGBUS.

  static fs::path DataFile(const fs::path& path) {
    std::error_code error;
    return fs::is_directory(path, error) ? path / "data.mdb" : path;
  }

  Status Parse(const MDB_val& value, SourceRecord& record) {
    datum_.Clear();
    if (value.mv_size > INT32_MAX ||
        !datum_.ParseFromArray(value.mv_data, static_cast<int>(value.mv_size))) {
      return Status::InvalidInput("the value is not a caffe.Datum protobuf");
    }
    if (datum_.label() < 0) {
      return Status::InvalidInput("label " + std::to_string(datum_.label()) + " is negative");
    }
    record.label = static_cast<std::uint32_t>(datum_.label());
    const std::string& data = datum_.data();
    if (datum_.float_data_size() > 0 && !data.empty()) KeepFloatData(record);
    if (datum_.encoded()) {
      const auto bytes = AsBytes(data);
      record.bytes.assign(bytes.begin(), bytes.end());
      return Status::OK();
    }
    if (datum_.float_data_size() > 0 && data.empty()) {
      return Status::NotSupported(
          "float_data Datums without an image (features alone) are not imported: packrec "
          "records are images; a Datum with an image keeps its float_data as a field");
    }
    const std::int64_t channels = datum_.channels(), height = datum_.height(),
                       width = datum_.width();
    if ((channels != 1 && channels != 3) || height <= 0 || width <= 0 ||
        static_cast<std::uint64_t>(height) * static_cast<std::uint64_t>(width) > MaxImagePixels() ||
        static_cast<std::uint64_t>(channels * height * width) != data.size()) {
      return Status::InvalidInput("raw Datum of " + std::to_string(channels) + "x" +
                                  std::to_string(height) + "x" + std::to_string(width) +
                                  " does not match its " + std::to_string(data.size()) +
                                  " data bytes (or is not 1 or 3 channels)");
    }
    // Caffe stores planes (C x H x W), color as BGR; images are interleaved RGB.
    const auto plane = static_cast<std::size_t>(height * width);
    const bool raw_rgb = options_.raw_pixels == RawPixels::kRaw;
    Pixels pixels;
    pixels.width = static_cast<std::uint32_t>(width);
    pixels.height = static_cast<std::uint32_t>(height);
    pixels.channels = raw_rgb ? 3 : static_cast<std::uint8_t>(channels);
    pixels.data.resize(plane * pixels.channels);
    const auto* in = reinterpret_cast<const std::uint8_t*>(data.data());
    for (std::size_t p = 0; p < plane; ++p) {
      for (std::size_t c = 0; c < pixels.channels; ++c) {
        const std::size_t from = channels == 1 ? 0 : 2 - c;
        pixels.data[p * pixels.channels + c] = in[from * plane + p];
      }
    }
    if (raw_rgb) {
      record.bytes.resize(pixels.data.size());
      std::memcpy(record.bytes.data(), pixels.data.data(), pixels.data.size());
      record.image =
          ImageInfo{Encoding::kRawRgb, pixels.width, pixels.height, 3, Subsampling::kNone, false};
      return Status::OK();
    }
    PACKREC_ASSIGN_OR_RETURN(record.bytes, EncodePng(pixels));
    if (!record.key.ends_with(".png")) record.key += ".png";
    return Status::OK();
  }

  // A Datum's float_data beside its image, as the field float_data (float32[]), met with the
  // first Datum that has it.
  void KeepFloatData(SourceRecord& record) {
    if (!float_data_met_) {
      record.added_fields.push_back({"float_data", FieldType::kFloat32, "", {}});
      float_data_met_ = true;
    }
    std::vector<std::byte> values(4 * static_cast<std::size_t>(datum_.float_data_size()));
    for (int i = 0; i < datum_.float_data_size(); ++i) {
      const float number = datum_.float_data(i);
      std::uint32_t bits = 0;
      std::memcpy(&bits, &number, sizeof bits);
      StoreLE<std::uint32_t>(values.data() + 4 * static_cast<std::size_t>(i), bits);
    }
    record.fields.resize(1);
    record.fields[0] = std::move(values);
  }

  fs::path path_;
  SourceOptions options_;
  bool float_data_met_ = false;
  std::vector<fs::path> files_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  std::uint64_t entries_ = 0;
  std::uint64_t number_ = 0;
  int fd_ = -1;  // the environment's, owned by it
  std::uint64_t file_size_ = 0;
  ReadAhead read_ahead_;
  caffe::Datum datum_;
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenCaffeLmdbSource(const fs::path& path,
                                                          const SourceOptions& options) {
  auto source = std::make_unique<CaffeLmdbSource>(path, options);
  PACKREC_RETURN_IF_ERROR(source->Open());
  return std::unique_ptr<RecordSource>(std::move(source));
}

}  // namespace packrec::lmdb
