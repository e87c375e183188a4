// The LMDB writer: records appended (MDB_APPEND) into a scratch environment in batched write
// transactions; the map doubles and the batch is replayed on MDB_MAP_FULL, so no conversion dies
// of a guessed map size; Finish writes the manifest key and a compacted copy (mdb_env_copy2 with
// MDB_CP_COMPACT) as the dataset's data.mdb, so the shipped file is only as large as its data.
#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>
#include <zstd.h>

#include <string>
#include <system_error>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/output_dir.h"
#include "dataset/manifest_json.h"
#include "lmdb/lmdb_format.h"
#include "lmdb/lmdb_layout.h"
#include "lmdb/lmdb_status.h"

namespace packrec::lmdb {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kDefaultMapSize = 1ull << 30;
constexpr std::uint64_t kMaxBatchBytes = 64ull << 20;
constexpr char kScratchDir[] = ".packrec-build";

MDB_val Val(std::span<const std::byte> bytes) {
  return {bytes.size(), const_cast<std::byte*>(bytes.data())};
}

class LmdbWriter final : public DatasetWriter {
 public:
  LmdbWriter(OutputDirectory out, WriterOptions options)
      : out_(std::move(out)),
        scratch_dir_(out_.write_dir() / kScratchDir),
        options_(std::move(options)),
        map_size_(options_.map_size_bytes > 0 ? options_.map_size_bytes : kDefaultMapSize) {}

  ~LmdbWriter() override {
    if (!finished_) Abort();
  }

  Status Start();
  Status Add(const RecordInput& record) override;
  Status Finish(const DatasetMetadata& metadata) override;
  void Abort() override;
  std::uint64_t records_written() const override { return records_; }
  std::uint64_t bytes_written() const override { return bytes_written_; }

 private:
  struct Pending {
    std::array<std::byte, 32> key{};  // record keys are 8 bytes; the manifest key is longer
    std::size_t key_size = 0;
    std::vector<std::byte> value;
  };

  Status BeginTransaction();
  // Puts every pending value, growing the map and replaying on MDB_MAP_FULL.
  Status PutPending();
  Status CommitBatch();
  Status GrowMap();
  void CloseEnvironment();

  OutputDirectory out_;
  fs::path scratch_dir_;
  WriterOptions options_;
  std::uint64_t map_size_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  std::vector<Pending> batch_;
  std::size_t batch_put_ = 0;  // how many of batch_ are in the open transaction
  std::uint64_t batch_bytes_ = 0;
  std::uint64_t records_ = 0;
  std::uint64_t payload_bytes_ = 0;
  std::uint64_t bytes_written_ = 0;
  std::uint32_t label_count_ = 0;
  std::vector<std::byte> compressed_;
  bool finished_ = false;
};

Status LmdbWriter::Start() {
  std::error_code error;
  fs::create_directory(scratch_dir_, error);
  if (error) return ErrnoStatus("create directory", scratch_dir_, error.value());
  int rc = mdb_env_create(&env_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "mdb_env_create", scratch_dir_);
  rc = mdb_env_set_mapsize(env_, map_size_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "set map size", scratch_dir_);
  // The scratch environment is thrown away on failure and copied (then fsynced) on success, so
  // syncing every commit would buy nothing.
  rc = mdb_env_open(env_, scratch_dir_.c_str(), MDB_NOSYNC | MDB_NOMETASYNC, 0644);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "open", scratch_dir_);
  return BeginTransaction();
}

Status LmdbWriter::BeginTransaction() {
  int rc = mdb_txn_begin(env_, nullptr, 0, &txn_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "begin write transaction", scratch_dir_);
  rc = mdb_dbi_open(txn_, nullptr, 0, &dbi_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "open database", scratch_dir_);
  batch_put_ = 0;
  return Status::OK();
}

Status LmdbWriter::GrowMap() {
  if (txn_ != nullptr) {
    mdb_txn_abort(txn_);
    txn_ = nullptr;
  }
  map_size_ *= 2;
  const int rc = mdb_env_set_mapsize(env_, map_size_);
  if (rc != MDB_SUCCESS)
    return LmdbError(rc, "grow map to " + std::to_string(map_size_), scratch_dir_);
  return BeginTransaction();
}

Status LmdbWriter::PutPending() {
  while (batch_put_ < batch_.size()) {
    Pending& pending = batch_[batch_put_];
    MDB_val key{pending.key_size, pending.key.data()};
    MDB_val value = Val(pending.value);
    const int rc = mdb_put(txn_, dbi_, &key, &value, MDB_APPEND);
    if (rc == MDB_MAP_FULL) {
      PACKREC_RETURN_IF_ERROR(GrowMap());  // the transaction is gone: replay the whole batch
      continue;
    }
    if (rc != MDB_SUCCESS) return LmdbError(rc, "put record", scratch_dir_);
    ++batch_put_;
  }
  return Status::OK();
}

Status LmdbWriter::CommitBatch() {
  for (;;) {
    PACKREC_RETURN_IF_ERROR(PutPending());
    const int rc = mdb_txn_commit(txn_);
    txn_ = nullptr;  // freed by commit, success or not
    if (rc == MDB_MAP_FULL) {
      PACKREC_RETURN_IF_ERROR(GrowMap());
      continue;
    }
    if (rc != MDB_SUCCESS) return LmdbError(rc, "commit", scratch_dir_);
    batch_.clear();
    batch_bytes_ = 0;
    return BeginTransaction();
  }
}

Status LmdbWriter::Add(const RecordInput& record) {
  if (finished_ || txn_ == nullptr) return Status::Internal("Add on a closed LMDB writer");
  if (record.key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("key of record " + std::to_string(records_) + " is " +
                                   std::to_string(record.key.size()) + " bytes (max " +
                                   std::to_string(kMaxKeyBytes) + ")");
  }
  std::span<const std::byte> stored = record.bytes;
  ValueHeader header;
  // JPEG entropy-coded data does not compress; trying would only burn convert time.
  if (options_.compression == Compression::kZstd && record.image.encoding != Encoding::kJpeg &&
      !record.bytes.empty()) {
    compressed_.resize(ZSTD_compressBound(record.bytes.size()));
    const std::size_t size =
        ZSTD_compress(compressed_.data(), compressed_.size(), record.bytes.data(),
                      record.bytes.size(), options_.compression_level);
    if (ZSTD_isError(size)) {
      return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(size));
    }
    if (size < record.bytes.size()) {
      stored = std::span<const std::byte>(compressed_.data(), size);
      header.flags |= kValueZstd;
    }
  }
  header.encoding = static_cast<std::uint8_t>(record.image.encoding);
  header.channels = record.image.channels;
  header.flags |= record.image.progressive ? kValueProgressive : 0;
  header.label = record.label;
  header.width = record.image.width;
  header.height = record.image.height;
  header.key_size = static_cast<std::uint16_t>(record.key.size());
  header.subsampling = static_cast<std::uint8_t>(record.image.subsampling);
  header.checksum = Xxh64(stored, /*seed=*/records_);
  header.raw_size = record.bytes.size();

  Pending pending;
  const auto key = RecordKey(records_);
  std::copy(key.begin(), key.end(), pending.key.begin());
  pending.key_size = key.size();
  pending.value.resize(kValueHeaderSize + record.key.size() + stored.size());
  EncodeValueHeader(header,
                    std::span<std::byte, kValueHeaderSize>(pending.value.data(), kValueHeaderSize));
  std::memcpy(pending.value.data() + kValueHeaderSize, record.key.data(), record.key.size());
  std::memcpy(pending.value.data() + kValueHeaderSize + record.key.size(), stored.data(),
              stored.size());
  batch_bytes_ += pending.value.size();
  batch_.push_back(std::move(pending));
  PACKREC_RETURN_IF_ERROR(PutPending());
  ++records_;
  payload_bytes_ += stored.size();
  label_count_ = std::max(label_count_, record.label + 1);
  if (batch_.size() >= options_.commit_records || batch_bytes_ >= kMaxBatchBytes) {
    PACKREC_RETURN_IF_ERROR(CommitBatch());
  }
  return Status::OK();
}

Status LmdbWriter::Finish(const DatasetMetadata& metadata) {
  if (finished_ || txn_ == nullptr) return Status::Internal("Finish on a closed LMDB writer");
  const DatasetManifest manifest = ManifestFromMetadata(
      metadata, kManifestFormatName, kLmdbFormatVersion, records_, payload_bytes_, label_count_);
  PACKREC_ASSIGN_OR_RETURN(const std::string text, SerializeManifestJson(manifest));
  Pending pending;
  std::memcpy(pending.key.data(), kManifestKey.data(), kManifestKey.size());
  pending.key_size = kManifestKey.size();
  pending.value.assign(reinterpret_cast<const std::byte*>(text.data()),
                       reinterpret_cast<const std::byte*>(text.data()) + text.size());
  batch_.push_back(std::move(pending));
  PACKREC_RETURN_IF_ERROR(CommitBatch());
  mdb_txn_abort(txn_);  // the empty transaction CommitBatch opened
  txn_ = nullptr;

  const fs::path data_file = out_.write_dir() / kDataFileName;
  const int rc = mdb_env_copy2(env_, out_.write_dir().c_str(), MDB_CP_COMPACT);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "compacting copy to", out_.write_dir());
  CloseEnvironment();
  std::error_code error;
  fs::remove_all(scratch_dir_, error);
  if (error) return ErrnoStatus("remove", scratch_dir_, error.value());
  {
    const int fd = ::open(data_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", data_file, errno);
    const int sync_rc = ::fsync(fd);
    const int sync_errno = errno;
    ::close(fd);
    if (sync_rc != 0) return ErrnoStatus("fsync", data_file, sync_errno);
  }
  bytes_written_ = fs::file_size(data_file, error);
  PACKREC_RETURN_IF_ERROR(WriteRejectsFile(out_.write_dir(), metadata.rejects));
  PACKREC_RETURN_IF_ERROR(SyncDirectory(out_.write_dir()));
  PACKREC_RETURN_IF_ERROR(out_.Commit());
  finished_ = true;
  return Status::OK();
}

void LmdbWriter::CloseEnvironment() {
  if (txn_ != nullptr) {
    mdb_txn_abort(txn_);
    txn_ = nullptr;
  }
  if (env_ != nullptr) {
    mdb_env_close(env_);
    env_ = nullptr;
  }
}

void LmdbWriter::Abort() {
  if (finished_) return;
  CloseEnvironment();
  out_.Abort();
  finished_ = true;
}

}  // namespace

bool LooksLikeLmdbDataset(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path / kDataFileName, ignored);
}

Result<std::unique_ptr<DatasetWriter>> CreateLmdbWriter(const fs::path& dir,
                                                        const WriterOptions& options) {
  if (options.compression == Compression::kZstd &&
      (options.compression_level < 1 || options.compression_level > ZSTD_maxCLevel())) {
    return Status::InvalidArgument("--compress zstd level must be 1 to " +
                                   std::to_string(ZSTD_maxCLevel()) + ", got " +
                                   std::to_string(options.compression_level));
  }
  if (options.commit_records == 0) {
    return Status::InvalidArgument("--commit-records must be at least 1");
  }
  if (options.map_size_bytes != 0 && options.map_size_bytes < (1u << 20)) {
    return Status::InvalidArgument("--map-size must be at least 1 MiB, got " +
                                   std::to_string(options.map_size_bytes));
  }
  PACKREC_ASSIGN_OR_RETURN(OutputDirectory out,
                           OutputDirectory::Prepare(dir, kDataFileName, options.overwrite));
  auto writer = std::make_unique<LmdbWriter>(std::move(out), options);
  Status started = writer->Start();
  if (!started.ok()) {
    writer->Abort();
    return started;
  }
  return std::unique_ptr<DatasetWriter>(std::move(writer));
}

}  // namespace packrec::lmdb
