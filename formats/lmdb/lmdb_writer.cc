// The LMDB writer: records appended (MDB_APPEND) in batched write transactions; the map doubles
// and the batch is replayed on MDB_MAP_FULL, so no conversion dies of a guessed map size. The file
// only grows as pages are used (no MDB_WRITEMAP, so it is never map-sized or sparse). Finish
// writes the manifest key, then compacts (mdb_env_copy2 with MDB_CP_COMPACT) only when free pages
// are worth it: an append-only load frees only the few leaf and branch pages that commits copied,
// and the compacting copy costs two syscalls per overflow record (measured: 6x slower overall).
// Resumable: every checkpoint_bytes of values the environment is synced and a journal records the
// count; a resumed run deletes the records committed after it and appends from there.
#include <lmdb.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/output_dir.h"
#include "lmdb/lmdb_format.h"
#include "lmdb/lmdb_layout.h"
#include "lmdb/lmdb_status.h"
#include "lmdb/lmdb_value.h"
#include "storage/field_block.h"
#include "storage/json_util.h"
#include "storage/manifest_json.h"
#include "storage/payload.h"
#include "storage/resume_journal.h"

namespace packrec::lmdb {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kDefaultMapSize = 1ull << 30;
// A transaction's dirty pages are malloc'd by LMDB and freed at commit; batches larger than the
// allocator keeps around are paid again in page faults (measured on 278 MiB of JPEGs: 4 MiB
// batches 0.6 s, 16 MiB 0.85 s, 64 MiB 1.4 s).
constexpr std::uint64_t kMaxBatchBytes = 4ull << 20;
constexpr char kCompactDir[] = ".packrec-compact";
// Compact when free pages exceed this share of the file (and 1 MiB).
constexpr double kCompactWasteShare = 0.02;
constexpr std::uint64_t kDefaultCheckpointBytes = 64ull << 20;

// The map only reserves address space (the file grows as pages are written), so starting above
// the input's size costs nothing and spares the grow-and-replay on big conversions. A quarter on
// top covers the value headers and the last page of every overflow chain.
std::uint64_t InitialMapSize(const WriterOptions& options) {
  if (options.lmdb.map_size_bytes > 0) return options.lmdb.map_size_bytes;
  const std::uint64_t expected = options.expected_payload_bytes;
  return std::max<std::uint64_t>(kDefaultMapSize, expected + expected / 4 + (64ull << 20));
}

class LmdbWriter final : public DatasetWriter {
 public:
  LmdbWriter(OutputDirectory out, WriterOptions options)
      : out_(std::move(out)),
        env_dir_(out_.write_dir()),
        options_(std::move(options)),
        map_size_(InitialMapSize(options_)),
        version_(options_.fields.empty() ? kLmdbVersionWithoutFields : kLmdbFormatVersion) {}

  ~LmdbWriter() override {
    if (!finished_) Abort();
  }

  Status Start();
  Status Add(const RecordInput& record) override;
  Status Finish(const DatasetMetadata& metadata) override;
  Status AddFields(std::span<const FieldSpec> fields) override;
  void Abort() override;
  std::uint64_t records_written() const override { return records_; }
  std::uint64_t bytes_written() const override { return bytes_written_; }
  bool CheckpointDue() const override { return checkpoint_due_; }
  Status Checkpoint(const std::function<std::string(std::uint64_t)>& caller_state) override;
  std::uint64_t AbortKeepingCheckpoint() override;

  // The journal written before data.mdb exists, so the directory is known to be ours.
  Status StartJournal() { return WriteJournal(""); }
  // Continues from a resume point: drops the records committed after it (and a manifest key).
  Status ResumeAt(const ResumeJournal& journal);
  // Reads back and checks every record before the resume point (ResumeAt).
  Status CheckKeptRecords();
  // Closes without removing anything.
  void LeaveAsItIs() {
    CloseEnvironment();
    out_.Keep();
    finished_ = true;
  }

 private:
  // A put of the open transaction, kept until it commits so it can be replayed after the map
  // grows. Keys and values live back to back in arena_, which keeps its capacity across
  // batches: no allocation, zeroing or page fault per record.
  struct Pending {
    std::size_t offset = 0;
    std::size_t key_size = 0;
    std::size_t value_size = 0;
    unsigned put_flags = MDB_APPEND;  // 0 for a key that goes between keys already there
  };
  // Appends key and value to the arena and queues their put.
  void Queue(std::span<const std::byte> key, std::span<const std::span<const std::byte>> parts,
             unsigned put_flags = MDB_APPEND);

  Status BeginTransaction();
  // Puts every pending value, growing the map and replaying on MDB_MAP_FULL.
  Status PutPending();
  Status CommitBatch();
  Status WriteError(int rc, const std::string& operation) const;
  Status GrowMap();
  // Replaces data.mdb by a compacted copy when enough of it is free pages.
  Status CompactIfWorthIt();
  void CloseEnvironment();
  Status WriteJournal(const std::string& caller_state);

  OutputDirectory out_;
  fs::path env_dir_;  // the environment's directory: out_.write_dir()
  WriterOptions options_;
  std::uint64_t map_size_;
  std::uint32_t version_;               // 2 without fields, 3 with
  std::vector<std::byte> field_block_;  // the record being added, reused
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  std::vector<Pending> batch_;
  std::vector<std::byte> arena_;
  std::size_t batch_put_ = 0;  // how many of batch_ are in the open transaction
  std::uint64_t records_ = 0;
  std::uint64_t payload_bytes_ = 0;
  std::uint64_t bytes_written_ = 0;
  std::uint32_t label_count_ = 0;
  bool webp_ = false;  // a WebP record: the manifest's version is kLmdbVersionWithWebp
  std::vector<std::byte> compressed_;
  bool finished_ = false;
  // Resume points.
  std::uint64_t checkpointed_records_ = 0;
  std::uint64_t bytes_since_checkpoint_ = 0;
  bool checkpoint_due_ = false;
  bool sync_failed_ = false;
};

Status LmdbWriter::WriteJournal(const std::string& caller_state) {
  ResumeJournal journal;
  journal.format = "lmdb";
  journal.records = records_;
  journal.writer = {{"payload_bytes", payload_bytes_},
                    {"label_count", label_count_},
                    {"map_size", map_size_},
                    {"webp", webp_}};
  journal.caller_state = caller_state;
  PACKREC_RETURN_IF_ERROR(WriteResumeJournal(env_dir_ / kResumeJournalName, journal));
  checkpointed_records_ = records_;
  bytes_since_checkpoint_ = 0;
  checkpoint_due_ = false;
  return Status::OK();
}

Status LmdbWriter::Checkpoint(const std::function<std::string(std::uint64_t)>& caller_state) {
  if (!options_.resumable) return Status::OK();
  if (finished_ || txn_ == nullptr) return Status::Internal("Checkpoint on a closed LMDB writer");
  PACKREC_RETURN_IF_ERROR(CommitBatch());
  const int rc = mdb_env_sync(env_, 1);
  if (rc != MDB_SUCCESS) {
    // After a failed fsync the kernel may have dropped the unwritten pages: nothing in data.mdb
    // is trusted again (an fsync is never retried on a file whose fsync failed), so none of it
    // is kept for a resume.
    sync_failed_ = true;
    return WriteError(rc, "sync");
  }
  return WriteJournal(caller_state(records_));
}

std::uint64_t LmdbWriter::AbortKeepingCheckpoint() {
  if (finished_) return 0;
  if (!options_.resumable || checkpointed_records_ == 0 || sync_failed_) {
    Abort();
    return 0;
  }
  // Commits after the resume point stay in data.mdb; the resumed run deletes them.
  CloseEnvironment();
  std::error_code ignored;
  fs::remove(env_dir_ / "lock.mdb", ignored);
  out_.Keep();
  finished_ = true;
  return checkpointed_records_;
}

Status LmdbWriter::ResumeAt(const ResumeJournal& journal) {
  try {
    payload_bytes_ = GetUnsigned<std::uint64_t>(journal.writer.at("payload_bytes"));
    label_count_ = GetUnsigned<std::uint32_t>(journal.writer.at("label_count"));
    map_size_ = std::max(map_size_, GetUnsigned<std::uint64_t>(journal.writer.at("map_size")));
    // Journals written before WebP records have no "webp": none of their records is one.
    webp_ = journal.writer.contains("webp") && journal.writer.at("webp").get<bool>();
  } catch (const nlohmann::json::exception&) {
    return Status::Corruption("cannot resume the conversion in " + env_dir_.string() +
                              ": its journal has no LMDB state")
        .WithRemedy(Remedy::kOverwriteToRestart);
  }
  records_ = journal.records;
  checkpointed_records_ = records_;
  PACKREC_RETURN_IF_ERROR(Start());
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn_, dbi_, &cursor);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "open cursor", env_dir_);
  const auto first_stale = RecordKey(records_);
  MDB_val key{first_stale.size(), const_cast<std::byte*>(first_stale.data())};
  MDB_val value{};
  // After a delete the cursor already stands on the next entry, and MDB_NEXT returns it.
  for (rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE); rc == MDB_SUCCESS;
       rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
    rc = mdb_cursor_del(cursor, 0);
    if (rc != MDB_SUCCESS) break;
  }
  mdb_cursor_close(cursor);
  if (rc != MDB_NOTFOUND)
    return LmdbError(rc, "delete records after the resume point in", env_dir_);
  MDB_stat stat;
  mdb_stat(txn_, dbi_, &stat);
  const std::uint64_t per_record = version_ >= 3 ? 2 : 1;  // with fields: a second key each
  if (stat.ms_entries != records_ * per_record) {
    return Status::Corruption("cannot resume the conversion in " + env_dir_.string() +
                              ": data.mdb holds " + std::to_string(stat.ms_entries) +
                              " entries before the resume point, "
                              "its journal says " +
                              std::to_string(records_) + " records of " +
                              std::to_string(per_record))
        .WithRemedy(Remedy::kOverwriteToRestart);
  }
  PACKREC_RETURN_IF_ERROR(CheckKeptRecords());
  return CommitBatch();
}

// Every record before the resume point is read back and checked (both checksums) before anything
// is added: a value damaged since it was committed (a torn tail after a power loss, a bad sector)
// would otherwise be kept in the finished dataset, or fail only later, mid-conversion.
Status LmdbWriter::CheckKeptRecords() {
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn_, dbi_, &cursor);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "open cursor", env_dir_);
  const std::string data_file = (env_dir_ / kDataFileName).string();
  const bool datum = options_.lmdb.values == LmdbValues::kCaffeDatum;
  ReadScratch scratch;
  MDB_val key{}, value{};
  std::uint64_t expected = 0;
  Status status;
  for (rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST);
       rc == MDB_SUCCESS && expected < records_;
       rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT), ++expected) {
    std::uint64_t index = 0;
    const std::span<const std::byte> key_bytes{static_cast<const std::byte*>(key.mv_data),
                                               key.mv_size};
    if (ParseFieldsKey(key_bytes, &index) && expected > 0 && index == expected - 1) {
      --expected;  // not a record: the loop's ++expected is undone
      const auto block = DecodeFieldsValue(
          index, {static_cast<const std::byte*>(value.mv_data), value.mv_size}, true, data_file);
      if (!block.ok()) {
        status = block.status();
        break;
      }
      continue;
    }
    if (!ParseRecordKey(key_bytes, &index) || index != expected) {
      status =
          Status::Corruption(data_file + ": record " + std::to_string(expected) + " is missing");
      break;
    }
    const Result<RecordView> checked = DecodeRecordValue(
        index, {static_cast<const std::byte*>(value.mv_data), value.mv_size}, datum,
        /*verify=*/true, version_, data_file, scratch);
    if (!checked.ok()) {
      status = checked.status();
      break;
    }
  }
  mdb_cursor_close(cursor);
  if (status.ok() && expected < records_) {
    status =
        rc == MDB_SUCCESS || rc == MDB_NOTFOUND
            ? Status::Corruption(data_file + ": record " + std::to_string(expected) + " is missing")
            : LmdbError(rc, "read back the records before the resume point in", env_dir_);
  }
  if (status.ok()) return status;
  return Status::Corruption("cannot resume the conversion in " + env_dir_.string() +
                            ": what it kept is damaged: " + status.message())
      .WithRemedy(Remedy::kOverwriteToRestart);
}

Status LmdbWriter::Start() {
  std::error_code error;
  if (fs::exists(env_dir_ / kDataFileName, error)) {
    // A resumed conversion's file, which a power loss may have cut short: LMDB would fault on
    // the first page past its end.
    PACKREC_RETURN_IF_ERROR(CheckDataFileWhole(env_dir_ / kDataFileName));
  }
  int rc = mdb_env_create(&env_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "mdb_env_create", env_dir_);
  rc = mdb_env_set_mapsize(env_, map_size_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "set map size", env_dir_);
  // A failed conversion is thrown away whole and a finished one is synced once at the end, so
  // syncing every commit would buy nothing.
  rc = mdb_env_open(env_, env_dir_.c_str(), MDB_NOSYNC | MDB_NOMETASYNC, 0644);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "open", env_dir_);
  return BeginTransaction();
}

Status LmdbWriter::BeginTransaction() {
  int rc = mdb_txn_begin(env_, nullptr, 0, &txn_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "begin write transaction", env_dir_);
  rc = mdb_dbi_open(txn_, nullptr, 0, &dbi_);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "open database", env_dir_);
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
  if (rc != MDB_SUCCESS) return LmdbError(rc, "grow map to " + std::to_string(map_size_), env_dir_);
  return BeginTransaction();
}

void LmdbWriter::Queue(std::span<const std::byte> key,
                       std::span<const std::span<const std::byte>> parts, unsigned put_flags) {
  Pending pending;
  pending.put_flags = put_flags;
  pending.offset = arena_.size();
  pending.key_size = key.size();
  arena_.insert(arena_.end(), key.begin(), key.end());
  for (const auto& part : parts) {
    arena_.insert(arena_.end(), part.begin(), part.end());
    pending.value_size += part.size();
  }
  batch_.push_back(pending);
}

Status LmdbWriter::PutPending() {
  while (batch_put_ < batch_.size()) {
    const Pending& pending = batch_[batch_put_];
    MDB_val key{pending.key_size, arena_.data() + pending.offset};
    MDB_val value{pending.value_size, arena_.data() + pending.offset + pending.key_size};
    const int rc = mdb_put(txn_, dbi_, &key, &value, pending.put_flags);
    if (rc == MDB_MAP_FULL) {
      PACKREC_RETURN_IF_ERROR(GrowMap());  // the transaction is gone: replay the whole batch
      continue;
    }
    if (rc != MDB_SUCCESS) return LmdbError(rc, "put record", env_dir_);
    ++batch_put_;
  }
  return Status::OK();
}

// LMDB turns a short write into EIO, which is what a full disk produces: say so when the file
// system is (nearly) full, so the user is not sent looking for a broken disk.
Status LmdbWriter::WriteError(int rc, const std::string& operation) const {
  const fs::path data_file = env_dir_ / "data.mdb";
  struct statvfs space {};
  if ((rc == EIO || rc == ENOSPC) && ::statvfs(env_dir_.c_str(), &space) == 0) {
    const std::uint64_t free_bytes = std::uint64_t{space.f_bavail} * space.f_frsize;
    if (rc == ENOSPC || free_bytes < 2 * kMaxBatchBytes) {
      return Status::IOError("lmdb " + operation + " " + data_file.string() +
                             ": No space left on device (" + std::to_string(free_bytes >> 10) +
                             " KiB free; LMDB reports the short write as an I/O error)");
    }
  }
  return LmdbError(rc, operation, data_file);
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
    if (rc != MDB_SUCCESS) return WriteError(rc, "commit");
    batch_.clear();
    arena_.clear();
    return BeginTransaction();
  }
}

Status LmdbWriter::Add(const RecordInput& record) {
  if (finished_ || txn_ == nullptr) return Status::Internal("Add on a closed LMDB writer");
  PACKREC_RETURN_IF_ERROR(CheckKeySize(records_, record.key.size(), kMaxKeyBytes));
  PACKREC_RETURN_IF_ERROR(CheckRecordFields(options_, record, records_));
  PACKREC_ASSIGN_OR_RETURN(const StoredPayload payload,
                           PreparePayload(record, options_, compressed_));
  const std::span<const std::byte> stored = payload.bytes;
  ValueHeader header;
  header.flags = payload.zstd ? kValueZstd : 0;
  header.encoding = static_cast<std::uint8_t>(record.image.encoding);
  header.channels = record.image.channels;
  header.flags |= record.image.progressive ? kValueProgressive : 0;
  header.label = record.label;
  header.width = record.image.width;
  header.height = record.image.height;
  header.key_size = static_cast<std::uint16_t>(record.key.size());
  header.subsampling = static_cast<std::uint8_t>(record.image.subsampling);
  header.checksum = StoredChecksum(record, stored, records_);
  header.raw_size = record.bytes.size();

  std::array<std::byte, kValueHeaderSize> header_bytes{};
  EncodeValueHeader(header, AsBytes(record.key), records_, header_bytes);
  const auto key = RecordKey(records_);
  if (options_.lmdb.values == LmdbValues::kCaffeDatum) {
    if (record.label > 0x7fffffffu) {
      return Status::InvalidArgument(
          "record " + std::to_string(records_) + " ('" + std::string(record.key) + "'): label " +
          std::to_string(record.label) + " does not fit caffe.Datum's int32 label");
    }
    const std::vector<std::byte> prefix = DatumPrefix(header_bytes, record.key, stored.size());
    const std::vector<std::byte> suffix = DatumSuffix(record.label);
    const std::span<const std::byte> parts[] = {prefix, stored, suffix};
    Queue(key, parts);
  } else {
    const std::span<const std::byte> parts[] = {header_bytes, AsBytes(record.key), stored};
    Queue(key, parts);
  }
  if (version_ >= 3) {
    field_block_.clear();
    const Status appended = AppendFieldBlock(options_.fields.size(), record.fields, field_block_);
    if (!appended.ok()) return appended.WithContext("record " + std::to_string(records_));
    std::array<std::byte, kFieldsHeaderSize> fields_header{};
    EncodeFieldsHeader(field_block_, records_, fields_header);
    const std::span<const std::byte> parts[] = {fields_header, field_block_};
    Queue(FieldsKey(records_), parts);
  }
  PACKREC_RETURN_IF_ERROR(PutPending());
  ++records_;
  payload_bytes_ += stored.size();
  label_count_ = std::max(label_count_, record.label + 1);
  webp_ = webp_ || record.image.encoding == Encoding::kWebp;
  if (options_.resumable) {
    bytes_since_checkpoint_ += stored.size();
    const std::uint64_t every =
        options_.checkpoint_bytes > 0 ? options_.checkpoint_bytes : kDefaultCheckpointBytes;
    checkpoint_due_ = bytes_since_checkpoint_ >= every;
  }
  if (batch_.size() >= options_.lmdb.commit_records || arena_.size() >= kMaxBatchBytes) {
    PACKREC_RETURN_IF_ERROR(CommitBatch());
  }
  return Status::OK();
}

// Records added so far keep shorter field tables (their new fields absent). A dataset that had no
// fields until now becomes version 3, where every record has a fields key: the records before get
// an empty block (every field absent), put between the keys already there.
Status LmdbWriter::AddFields(std::span<const FieldSpec> fields) {
  if (finished_ || txn_ == nullptr) return Status::Internal("AddFields on a closed LMDB writer");
  if (options_.lmdb.values == LmdbValues::kCaffeDatum) {
    return Status::NotSupported("--lmdb-values caffe-datum cannot carry record fields");
  }
  std::vector<FieldSpec> schema = options_.fields;
  schema.insert(schema.end(), fields.begin(), fields.end());
  PACKREC_RETURN_IF_ERROR(ValidateSchema(schema));
  if (version_ < kLmdbFormatVersion) {
    PACKREC_RETURN_IF_ERROR(CommitBatch());
    for (std::uint64_t index = 0; index < records_; ++index) {
      std::array<std::byte, kFieldsHeaderSize> header{};
      EncodeFieldsHeader({}, index, header);
      const std::span<const std::byte> parts[] = {header};
      Queue(FieldsKey(index), parts, /*put_flags=*/0);
      if (batch_.size() >= options_.lmdb.commit_records) PACKREC_RETURN_IF_ERROR(CommitBatch());
    }
    PACKREC_RETURN_IF_ERROR(CommitBatch());
    version_ = kLmdbFormatVersion;
  }
  options_.fields = std::move(schema);
  return Status::OK();
}

Status LmdbWriter::Finish(const DatasetMetadata& metadata) {
  if (finished_ || txn_ == nullptr) return Status::Internal("Finish on a closed LMDB writer");
  DatasetManifest manifest =
      ManifestFromMetadata(metadata, kManifestFormatName, webp_ ? kLmdbVersionWithWebp : version_,
                           records_, payload_bytes_, label_count_);
  manifest.fields = options_.fields;
  PACKREC_ASSIGN_OR_RETURN(const std::string text, SerializeManifestJson(manifest));
  const bool datum = options_.lmdb.values == LmdbValues::kCaffeDatum;
  if (!datum) {
    const std::span<const std::byte> parts[] = {AsBytes(text)};
    Queue(AsBytes(kManifestKey), parts);
  }
  PACKREC_RETURN_IF_ERROR(CommitBatch());
  mdb_txn_abort(txn_);  // the empty transaction CommitBatch opened
  txn_ = nullptr;

  const fs::path data_file = out_.write_dir() / kDataFileName;
  PACKREC_RETURN_IF_ERROR(CompactIfWorthIt());
  std::error_code error;
  fs::remove(out_.write_dir() / "lock.mdb", error);  // readers make their own
  bytes_written_ = fs::file_size(data_file, error);
  PACKREC_RETURN_IF_ERROR(WriteRejectsFile(out_.write_dir() / "rejects.tsv", metadata.rejects));
  if (datum) {
    PACKREC_RETURN_IF_ERROR(
        WriteFileAtomically(out_.write_dir() / kDatumManifestName, AsBytes(text)));
  }
  PACKREC_RETURN_IF_ERROR(SyncDirectory(out_.write_dir()));
  PACKREC_RETURN_IF_ERROR(out_.Commit());
  finished_ = true;
  if (options_.resumable) {
    std::error_code ignored;
    fs::remove(out_.final_dir() / kResumeJournalName, ignored);
  }
  return Status::OK();
}

Status LmdbWriter::CompactIfWorthIt() {
  const fs::path data_file = out_.write_dir() / kDataFileName;
  MDB_envinfo info;
  MDB_stat stat;
  mdb_env_info(env_, &info);
  mdb_env_stat(env_, &stat);
  const std::uint64_t file_pages = static_cast<std::uint64_t>(info.me_last_pgno) + 1;
  const std::uint64_t live_pages =
      2 + stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages;
  const std::uint64_t waste_bytes =
      (file_pages > live_pages ? file_pages - live_pages : 0) * stat.ms_psize;
  const std::uint64_t file_bytes = file_pages * stat.ms_psize;
  if (waste_bytes < (1u << 20) ||
      static_cast<double>(waste_bytes) < kCompactWasteShare * static_cast<double>(file_bytes)) {
    const int rc = mdb_env_sync(env_, 1);
    if (rc != MDB_SUCCESS) {
      sync_failed_ = true;  // as in Checkpoint
      return WriteError(rc, "sync");
    }
    CloseEnvironment();
    return Status::OK();
  }
  const fs::path compact_dir = out_.write_dir() / kCompactDir;
  std::error_code error;
  fs::create_directory(compact_dir, error);
  if (error) return ErrnoStatus("create directory", compact_dir, error.value());
  const int rc = mdb_env_copy2(env_, compact_dir.c_str(), MDB_CP_COMPACT);
  if (rc != MDB_SUCCESS) return LmdbError(rc, "compacting copy to", compact_dir);
  CloseEnvironment();
  PACKREC_RETURN_IF_ERROR(SyncFile(compact_dir / kDataFileName));
  PACKREC_RETURN_IF_ERROR(RenamePath(compact_dir / kDataFileName, data_file));
  fs::remove_all(compact_dir, error);
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

Result<bool> LooksLikeLmdbDataset(const fs::path& path) {
  return IsRegularFile(path / kDataFileName);
}

namespace {

Status CheckLmdbOptions(const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(ValidateCommonWriterOptions(options, {.caffe_datum_values = true}));
  if (!options.fields.empty() && options.lmdb.values == LmdbValues::kCaffeDatum) {
    return Status::NotSupported(
        "--lmdb-values caffe-datum cannot carry record fields (a caffe.Datum holds an image and a "
        "label); use packrec's values");
  }
  if (options.lmdb.commit_records == 0) {
    return Status::InvalidArgument("--commit-records must be at least 1");
  }
  if (options.lmdb.map_size_bytes != 0 && options.lmdb.map_size_bytes < (1u << 20)) {
    return Status::InvalidArgument("--map-size must be at least 1 MiB, got " +
                                   std::to_string(options.lmdb.map_size_bytes));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<DatasetWriter>> CreateLmdbWriter(const fs::path& dir,
                                                        const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(CheckLmdbOptions(options));
  PACKREC_ASSIGN_OR_RETURN(OutputDirectory out,
                           OutputDirectory::Prepare(dir, kDataFileName, options.overwrite));
  auto writer = std::make_unique<LmdbWriter>(std::move(out), options);
  Status started = options.resumable ? writer->StartJournal() : Status::OK();
  if (started.ok()) started = writer->Start();
  if (!started.ok()) {
    writer->Abort();
    return started;
  }
  return std::unique_ptr<DatasetWriter>(std::move(writer));
}

}  // namespace packrec::lmdb

namespace packrec::lmdb {

Result<ResumedWriter> ResumeLmdbWriter(const fs::path& dir, const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(CheckLmdbOptions(options));
  PACKREC_ASSIGN_OR_RETURN(InterruptedConversion interrupted, ReopenInterrupted(dir, "lmdb"));
  OutputDirectory& out = interrupted.out;
  const ResumeJournal& journal = interrupted.journal;
  const fs::path write_dir = out.write_dir();
  // What Finish writes beside data.mdb, and a compaction cut short: the resumed Finish redoes it.
  std::error_code error;
  for (const char* stale : {"lock.mdb", "rejects.tsv", kDatumManifestName, kCompactDir}) {
    fs::remove_all(write_dir / stale, error);
  }
  auto writer = std::make_unique<LmdbWriter>(std::move(out), options);
  if (!fs::exists(write_dir / kDataFileName, error)) {
    // Killed before data.mdb was made: nothing to keep.
    if (journal.records != 0) {
      return Status::Corruption("cannot resume the conversion in " + dir.string() +
                                ": data.mdb is missing")
          .WithRemedy(Remedy::kOverwriteToRestart);
    }
    PACKREC_RETURN_IF_ERROR(writer->Start());
  } else {
    Status resumed = writer->ResumeAt(journal);
    if (!resumed.ok()) {
      writer->LeaveAsItIs();  // the interrupted conversion is not ours to throw away
      // LMDB's own errors (MDB_CORRUPTED from a torn B-tree) say nothing of what to do; running
      // --resume again cannot help them.
      if (resumed.remedy() != Remedy::kNone) return resumed;
      return resumed.WithContext("cannot resume the conversion in " + dir.string())
          .WithSuffix(" (what it kept cannot be used)")
          .WithRemedy(Remedy::kOverwriteToRestart);
    }
  }
  ResumedWriter result;
  result.records = journal.records;
  result.caller_state = journal.caller_state;
  result.writer = std::move(writer);
  return result;
}

}  // namespace packrec::lmdb
