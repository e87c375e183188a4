// The LMDB reader. Opened MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, so read transactions are not tied to
// threads and any thread may call Read; one short read transaction per Read, one per ForEach.
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/output_dir.h"
#include "core/range_stream.h"
#include "lmdb/lmdb_format.h"
#include "lmdb/lmdb_layout.h"
#include "lmdb/lmdb_pages.h"
#include "lmdb/lmdb_status.h"
#include "lmdb/lmdb_value.h"
#include "storage/field_block.h"
#include "storage/manifest_json.h"
#include "storage/payload.h"

namespace packrec::lmdb {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kMaxReaders = 1024;
// ForEach collects this many values' places before reading them.
constexpr std::uint64_t kForEachChunk = 4096;

std::span<const std::byte> Bytes(const MDB_val& value) {
  return {static_cast<const std::byte*>(value.mv_data), value.mv_size};
}

// An environment opened read-only; reopened in a child process after fork(), as LMDB requires.
class Environment {
 public:
  ~Environment() {
    // A handle inherited across fork() belongs to the parent: leave it alone in the child.
    if (env_ != nullptr && pid_ == ::getpid()) mdb_env_close(env_);
  }

  Status Open(const fs::path& dir) {
    int rc = mdb_env_create(&env_);
    if (rc != MDB_SUCCESS) return LmdbError(rc, "mdb_env_create", dir);
    mdb_env_set_maxreaders(env_, kMaxReaders);
    // Growing datasets are not a use case: map exactly what is there (size 0 = the file's).
    // MDB_NOLOCK: a reader never creates lock.mdb next to the data, so datasets on shared or
    // read-only storage are read by many machines without anyone writing there. Datasets are
    // immutable once written, so no writer can race a lock-free reader.
    rc = mdb_env_open(env_, dir.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0644);
    if (rc != MDB_SUCCESS) {
      mdb_env_close(env_);
      env_ = nullptr;
      return LmdbError(rc, "open", dir / kDataFileName);
    }
    pid_ = ::getpid();
    // The main database's handle (and its key comparator) is set up per environment: a child's
    // fresh environment must open it too. Committing makes it usable by later transactions.
    MDB_txn* txn = nullptr;
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS) return LmdbError(rc, "begin read transaction", dir);
    rc = mdb_dbi_open(txn, nullptr, 0, &dbi_);
    if (rc != MDB_SUCCESS) {
      mdb_txn_abort(txn);
      return LmdbError(rc, "open database", dir);
    }
    rc = mdb_txn_commit(txn);
    if (rc != MDB_SUCCESS) return LmdbError(rc, "open database", dir);
    FindMapBase();
    return Status::OK();
  }

  MDB_env* get() const { return env_; }
  MDB_dbi dbi() const { return dbi_; }
  // Where page 0 of data.mdb is mapped; null when it could not be established.
  const std::byte* map_base() const { return map_base_; }
  bool ForkedAway() const { return pid_ != ::getpid(); }

 private:
  // LMDB's API hands out pointers into its map but not the map's address (mdb_env_info's
  // me_mapaddr is only set for MDB_FIXEDMAP). It is derived from the first record's leaf page:
  // pages are aligned in the map and every page starts with its own page number (the MDB_page
  // header, unchanged in the file format since LMDB 0.9). A wrong base cannot go unnoticed: every
  // value read through it must still start with packrec's header magic.
  void FindMapBase() {
    MDB_stat stat;
    MDB_envinfo info;
    MDB_txn* txn = nullptr;
    if (mdb_env_stat(env_, &stat) != MDB_SUCCESS || mdb_env_info(env_, &info) != MDB_SUCCESS ||
        mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn) != MDB_SUCCESS) {
      return;
    }
    MDB_cursor* cursor = nullptr;
    MDB_val key, value;
    if (mdb_cursor_open(txn, dbi_, &cursor) == MDB_SUCCESS &&
        mdb_cursor_get(cursor, &key, &value, MDB_FIRST) == MDB_SUCCESS) {
      const std::uintptr_t page_size = stat.ms_psize;
      const auto key_address = reinterpret_cast<std::uintptr_t>(key.mv_data);
      const std::uintptr_t page = key_address - key_address % page_size;
      std::uint64_t page_number = 0;
      std::memcpy(&page_number, reinterpret_cast<const void*>(page), sizeof page_number);
      std::uint16_t flags = 0;
      std::memcpy(&flags, reinterpret_cast<const void*>(page + 10), sizeof flags);
      constexpr std::uint16_t kLeafPage = 0x02;
      if ((flags & kLeafPage) != 0 && page_number <= info.me_last_pgno &&
          page_number * page_size <= page) {
        map_base_ = reinterpret_cast<const std::byte*>(page - page_number * page_size);
      }
    }
    if (cursor != nullptr) mdb_cursor_close(cursor);
    mdb_txn_abort(txn);
  }

  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  pid_t pid_ = 0;
  const std::byte* map_base_ = nullptr;
};

// A read-only transaction, aborted on scope exit.
class ReadTransaction {
 public:
  ~ReadTransaction() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  Status Begin(MDB_env* env, const fs::path& dir) {
    const int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn_);
    if (rc != MDB_SUCCESS) {
      txn_ = nullptr;
      return LmdbError(rc, "begin read transaction", dir);
    }
    return Status::OK();
  }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_ = nullptr;
};

class LmdbReader final : public Reader {
 public:
  LmdbReader(fs::path dir, OpenOptions options)
      : dir_(std::move(dir)), data_file_((dir_ / kDataFileName).string()), options_(options) {}

  Status Open() {
    // A conversion that was interrupted is not a dataset yet, whatever data.mdb holds.
    std::error_code exists_error;
    if (fs::exists(dir_ / kResumeJournalName, exists_error)) {
      return Status::NotFound(dir_.string() +
                              " holds an interrupted conversion (resume.json), not a finished "
                              "dataset")
          .WithRemedy(Remedy::kResumeOrOverwrite);
    }
    // Before LMDB maps the file: opening already follows the first record's pages.
    PACKREC_RETURN_IF_ERROR(CheckDataFileWhole(dir_ / kDataFileName));
    env_ = std::make_unique<Environment>();
    PACKREC_RETURN_IF_ERROR(env_->Open(dir_));
    ReadTransaction txn;
    PACKREC_RETURN_IF_ERROR(txn.Begin(env_->get(), dir_));
    const MDB_dbi dbi = env_->dbi();
    PACKREC_ASSIGN_OR_RETURN(const DatasetManifest manifest, ReadManifest(txn.get()));
    MDB_stat stat;
    const int rc = mdb_stat(txn.get(), dbi, &stat);
    if (rc != MDB_SUCCESS) return LmdbError(rc, "stat", dir_);
    std::error_code error;
    // With fields (version 3), every record has a second key: its field block.
    const std::uint64_t per_record = manifest.fields.empty() ? 1 : 2;
    const std::uint64_t entries = manifest.record_count * per_record + (datum_ ? 0 : 1);
    if (stat.ms_entries != entries) {
      return Status::Corruption(data_file_ + ": holds " + std::to_string(stat.ms_entries) +
                                " entries, the manifest says " + std::to_string(entries));
    }
    info_ = InfoFromManifest(manifest, "lmdb");
    info_.metadata_checksummed = manifest.format_version >= 2;
    info_.files.push_back({kDataFileName, 0, manifest.record_count,
                           static_cast<std::uint64_t>(fs::file_size(dir_ / kDataFileName, error))});
    return Status::OK();
  }

  const DatasetInfo& info() const override { return info_; }

  Result<RecordView> Read(std::uint64_t index, ReadScratch& scratch) const override {
    return AtRecord(ReadRecord(index, scratch), index, data_file_);
  }

  Result<RecordView> ReadRecord(std::uint64_t index, ReadScratch& scratch) const {
    if (index >= info_.record_count) {
      return IndexOutOfRange(index, info_.record_count);
    }
    PACKREC_ASSIGN_OR_RETURN(const Environment* const env, Env());
    ReadTransaction txn;
    PACKREC_RETURN_IF_ERROR(txn.Begin(env->get(), dir_));
    auto key_bytes = RecordKey(index);
    MDB_val key{key_bytes.size(), key_bytes.data()};
    MDB_val value;
    const int rc = mdb_get(txn.get(), env->dbi(), &key, &value);
    if (rc == MDB_NOTFOUND) {
      return Status::Corruption(data_file_ + ": record " + std::to_string(index) + " is missing");
    }
    if (rc != MDB_SUCCESS) return LmdbError(rc, "get record " + std::to_string(index), dir_);
    // The value lives in the map only while the transaction is open: copy it out.
    PACKREC_ASSIGN_OR_RETURN(RecordView view,
                             Decode(index, Bytes(value), scratch, options_.verify_checksums));
    view = Own(view, scratch);
    if (!info_.fields.empty()) {
      PACKREC_ASSIGN_OR_RETURN(const MDB_val fields, GetFields(txn, *env, index));
      PACKREC_RETURN_IF_ERROR(
          AttachFields(index, Bytes(fields), view, scratch, options_.verify_checksums));
    }
    return view;
  }

  Result<FieldView> ReadField(std::uint64_t index, std::size_t field,
                              ReadScratch& scratch) const override {
    if (field >= info_.fields.size() || index >= info_.record_count) {
      return Reader::ReadField(index, field, scratch);
    }
    PACKREC_ASSIGN_OR_RETURN(const Environment* const env, Env());
    ReadTransaction txn;
    PACKREC_RETURN_IF_ERROR(txn.Begin(env->get(), dir_));
    PACKREC_ASSIGN_OR_RETURN(const MDB_val fields, GetFields(txn, *env, index));
    PACKREC_ASSIGN_OR_RETURN(const std::span<const std::byte> block,
                             DecodeFieldsValue(index, Bytes(fields), false, data_file_));
    scratch.field_bytes.assign(block.begin(), block.end());  // the map is gone with txn
    Result<FieldView> value = DecodeFieldValue(scratch.field_bytes, info_.fields.size(), field,
                                               options_.verify_checksums);
    if (value.ok()) {
      const Status declared = CheckFieldValue(info_.fields[field], *value);
      if (!declared.ok()) {
        return Status::Corruption(data_file_ + ": record " + std::to_string(index) + ", " +
                                  declared.message())
            .WithRecordIndex(index)
            .WithPath(data_file_);
      }
    }
    if (!value.ok()) {
      return Status::Corruption(FieldWhere(index, field) + ": " + value.status().message())
          .WithRecordIndex(index)
          .WithPath(data_file_);
    }
    return value;
  }

  // The cursor walks the leaf pages for each value's place in the map; the values themselves are
  // then read with pread windows (core/range_stream) instead of through the map. Mapping a page
  // costs more than copying it on the machines measured (docs/benchmarks.md), and LMDB only
  // touches leaf pages to find a value, not the overflow pages that hold it.
  Status ForEach(const Visitor& visit, std::uint64_t begin, std::uint64_t end) const override {
    end = std::min(end, info_.record_count);
    if (begin >= end) return Status::OK();
    PACKREC_ASSIGN_OR_RETURN(const Environment* const env, Env());
    PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(dir_ / kDataFileName));
    ReadTransaction txn;
    PACKREC_RETURN_IF_ERROR(txn.Begin(env->get(), dir_));
    ReadScratch scratch;
    const std::byte* const map = env->map_base();
    if (map == nullptr) {
      // The map's address is unknown: zero-copy views into it, valid while the transaction is
      // open, i.e. during visit.
      return WalkValues(*env, txn, begin, end,
                        [&](std::uint64_t index, const MDB_val& value, const MDB_val& fields) {
                          PACKREC_ASSIGN_OR_RETURN(
                              RecordView view,
                              Decode(index, Bytes(value), scratch, options_.verify_checksums));
                          PACKREC_RETURN_IF_ERROR(AttachFieldsIfAny(index, fields, view, scratch));
                          return visit(view);
                        });
    }
    std::uint64_t first = begin;                                  // of the ranges collected so far
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // (file offset, size)
    std::vector<MDB_val> fields;  // each record's fields value, in the map (version 3)
    const auto stream = [&]() -> Status {
      const Status status = StreamRanges(
          *file, 0, ranges.size(), [&](std::uint64_t i) { return ranges[i]; },
          [&](std::uint64_t i, std::span<const std::byte> stored) {
            PACKREC_ASSIGN_OR_RETURN(RecordView view,
                                     Decode(first + i, stored, scratch, options_.verify_checksums));
            PACKREC_RETURN_IF_ERROR(AttachFieldsIfAny(first + i, fields[i], view, scratch));
            return visit(view);
          });
      first += ranges.size();
      ranges.clear();
      fields.clear();
      return status;
    };
    const Status walked = WalkValues(
        *env, txn, begin, end, [&](std::uint64_t, const MDB_val& value, const MDB_val& field) {
          ranges.emplace_back(static_cast<const std::byte*>(value.mv_data) - map, value.mv_size);
          fields.push_back(field);
          return ranges.size() < kForEachChunk ? Status::OK() : stream();
        });
    // The records found before a failure of the walk are still delivered, in order.
    PACKREC_RETURN_IF_ERROR(stream());
    return walked;
  }

  VerifyStats Verify(VerifyReporter& reporter) const override {
    VerifyStats stats;
    auto report = [&](std::optional<std::uint64_t> index, std::string key, const Status& status) {
      reporter.Report({kDataFileName, index, std::move(key), std::nullopt, status});
      ++stats.problems;
    };
    Result<const Environment*> env = Env();
    if (!env.ok()) {
      report(std::nullopt, "", env.status());
      return stats;
    }
    // A damaged page is reported, and the walk that would trip liblmdb's assert() not begun.
    if (const Status pages = PagesChecked(); !pages.ok()) {
      report(std::nullopt, "", pages);
      return stats;
    }
    ReadTransaction txn;
    Status begun = txn.Begin((*env)->get(), dir_);
    MDB_cursor* cursor = nullptr;
    int rc = begun.ok() ? mdb_cursor_open(txn.get(), (*env)->dbi(), &cursor) : MDB_SUCCESS;
    if (!begun.ok() || rc != MDB_SUCCESS) {
      report(std::nullopt, "", begun.ok() ? LmdbError(rc, "open cursor", dir_) : begun);
      return stats;
    }
    MDB_val key;
    MDB_val value;
    ReadScratch scratch;
    std::uint64_t expected = 0;
    std::uint64_t fields_found = 0;
    for (rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
      std::uint64_t index = 0;
      if (ParseFieldsKey(Bytes(key), &index)) {
        ++fields_found;
        const Status fields = VerifyFields(index, Bytes(value));
        if (!fields.ok()) report(index, "", fields);
        continue;
      }
      if (!ParseRecordKey(Bytes(key), &index)) continue;  // the manifest key
      if (index != expected) {
        report(expected, "",
               Status::Corruption(data_file_ + ": record " + std::to_string(expected) +
                                  " is missing (next key is " + std::to_string(index) + ")"));
      }
      expected = index + 1;
      ++stats.records_checked;
      Result<RecordView> view = Decode(index, Bytes(value), scratch, /*verify=*/true);
      if (view.ok()) {
        stats.bytes_checked += value.mv_size;
      } else {
        report(index, RecordValueKey(Bytes(value), datum_), view.status());
      }
    }
    if (rc != MDB_NOTFOUND) report(std::nullopt, "", LmdbError(rc, "iterate", dir_));
    if (expected != info_.record_count) {
      report(std::nullopt, "",
             Status::Corruption(data_file_ + ": " + std::to_string(expected) +
                                " records found, the manifest says " +
                                std::to_string(info_.record_count)));
    }
    if (!info_.fields.empty() && fields_found != info_.record_count) {
      report(std::nullopt, "",
             Status::Corruption(data_file_ + ": " + std::to_string(fields_found) +
                                " records' fields found, the manifest says " +
                                std::to_string(info_.record_count) + " records"));
    }
    mdb_cursor_close(cursor);
    return stats;
  }

 private:
  // Calls on_value for records [begin, end) in key order, with each record's fields value
  // (version 3; an empty MDB_val without fields), checking that each key is the next record
  // index; stops at the first error (of LMDB, a missing record or on_value).
  Status WalkValues(
      const Environment& env, const ReadTransaction& txn, std::uint64_t begin, std::uint64_t end,
      const std::function<Status(std::uint64_t, const MDB_val&, const MDB_val&)>& on_value) const {
    PACKREC_RETURN_IF_ERROR(PagesChecked());
    MDB_cursor* cursor = nullptr;
    int rc = mdb_cursor_open(txn.get(), env.dbi(), &cursor);
    if (rc != MDB_SUCCESS) return LmdbError(rc, "open cursor", dir_);
    auto start = RecordKey(begin);
    MDB_val key{start.size(), start.data()};
    MDB_val value;
    MDB_val fields{0, nullptr};
    Status status;
    rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_KEY);
    for (std::uint64_t expected = begin; expected < end && status.ok(); ++expected) {
      std::uint64_t index = 0;
      if (rc != MDB_SUCCESS || !ParseRecordKey(Bytes(key), &index) || index != expected) {
        status = MissingOrError(rc, expected);
        break;
      }
      const MDB_val record = value;
      if (!info_.fields.empty()) {
        rc = mdb_cursor_get(cursor, &key, &fields, MDB_NEXT);
        std::uint64_t owner = 0;
        if (rc != MDB_SUCCESS || !ParseFieldsKey(Bytes(key), &owner) || owner != expected) {
          status = rc != MDB_SUCCESS && rc != MDB_NOTFOUND
                       ? LmdbError(rc, "iterate", dir_)
                       : Status::Corruption(data_file_ + ": record " + std::to_string(expected) +
                                            "'s fields are missing");
          break;
        }
      }
      status = on_value(index, record, fields);
      rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT);
    }
    mdb_cursor_close(cursor);
    return status;
  }

  // Record `index`'s fields value (version 3), valid while `txn` is open.
  Result<MDB_val> GetFields(const ReadTransaction& txn, const Environment& env,
                            std::uint64_t index) const {
    auto key_bytes = FieldsKey(index);
    MDB_val key{key_bytes.size(), key_bytes.data()};
    MDB_val value;
    const int rc = mdb_get(txn.get(), env.dbi(), &key, &value);
    if (rc == MDB_NOTFOUND) {
      return Status::Corruption(data_file_ + ": record " + std::to_string(index) +
                                "'s fields are missing");
    }
    if (rc != MDB_SUCCESS) return LmdbError(rc, "get record " + std::to_string(index), dir_);
    return value;
  }

  // Copies record `index`'s field block out of the map into `scratch` (checked when `verify`)
  // and points view.fields at its values.
  Status AttachFields(std::uint64_t index, std::span<const std::byte> value, RecordView& view,
                      ReadScratch& scratch, bool verify) const {
    Result<std::span<const std::byte>> block = DecodeFieldsValue(index, value, verify, data_file_);
    if (!block.ok()) {
      if (!verify) return block.status();
      return FieldsDamage(index, value, block.status());
    }
    scratch.field_bytes.assign(block->begin(), block->end());
    Status decoded = DecodeFieldBlock(scratch.field_bytes, info_.fields.size(), scratch.fields);
    if (decoded.ok()) decoded = CheckFieldValues(info_.fields, scratch.fields);
    if (!decoded.ok()) {
      return Status::Corruption(data_file_ + ": record " + std::to_string(index) +
                                "'s fields: " + decoded.message());
    }
    view.fields = scratch.fields;
    return Status::OK();
  }

  Status AttachFieldsIfAny(std::uint64_t index, const MDB_val& fields, RecordView& view,
                           ReadScratch& scratch) const {
    if (info_.fields.empty()) return Status::OK();
    return AttachFields(index, Bytes(fields), view, scratch, options_.verify_checksums);
  }

  // A fields value that failed its checksum: the damaged field named when a value's own
  // checksum shows which.
  Status FieldsDamage(std::uint64_t index, std::span<const std::byte> value,
                      const Status& status) const {
    if (value.size() < kFieldsHeaderSize) return status;
    const std::optional<std::size_t> field =
        FirstDamagedField(value.subspan(kFieldsHeaderSize), info_.fields.size());
    if (!field) return status.WithRecordIndex(index);
    return Status::Corruption(FieldWhere(index, *field) + ": checksum mismatch (" +
                              status.message() + ")")
        .WithRecordIndex(index);
  }

  Status VerifyFields(std::uint64_t index, std::span<const std::byte> value) const {
    if (info_.fields.empty()) {
      return Status::Corruption(data_file_ + ": a fields key for record " + std::to_string(index) +
                                " in a dataset without fields");
    }
    RecordView ignored;
    ReadScratch scratch;
    return AttachFields(index, value, ignored, scratch, /*verify=*/true);
  }

  std::string FieldWhere(std::uint64_t index, std::size_t field) const {
    return data_file_ + ": record " + std::to_string(index) + ", field '" +
           info_.fields[field].name + "'";
  }

  Status MissingOrError(int rc, std::uint64_t expected) const {
    return rc != MDB_SUCCESS && rc != MDB_NOTFOUND
               ? LmdbError(rc, "iterate", dir_)
               : Status::Corruption(data_file_ + ": record " + std::to_string(expected) +
                                    " is missing");
  }

  // The manifest key, or for Caffe Datum values the manifest file beside data.mdb.
  Result<DatasetManifest> ReadManifest(MDB_txn* txn) {
    MDB_val key{kManifestKey.size(), const_cast<char*>(kManifestKey.data())};
    MDB_val value;
    const int rc = mdb_get(txn, env_->dbi(), &key, &value);
    if (rc == MDB_SUCCESS) {
      return ParseManifestJson(
          std::string_view(static_cast<const char*>(value.mv_data), value.mv_size),
          data_file_ + " (manifest key)", kManifestFormatName, kLmdbVersionWithWebp);
    }
    if (rc != MDB_NOTFOUND) return LmdbError(rc, "read manifest from", dir_);
    const fs::path sidecar = dir_ / kDatumManifestName;
    std::error_code error;
    if (!fs::exists(sidecar, error)) {
      return Status::Corruption(data_file_ + ": no packrec manifest key and no " +
                                kDatumManifestName +
                                " beside it (not written by packrec, or "
                                "damaged)");
    }
    PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(sidecar));
    datum_ = true;
    return ParseManifestJson(
        std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), sidecar.string(),
        kManifestFormatName, kLmdbVersionWithWebp);
  }

  // The environment of this process: a child of fork() opens its own.
  Result<const Environment*> Env() const {
    std::lock_guard lock(env_mutex_);
    if (env_->ForkedAway()) {
      auto fresh = std::make_unique<Environment>();
      PACKREC_RETURN_IF_ERROR(fresh->Open(dir_));
      // The parent's handle is never closed here (see ~Environment); keep it alive.
      retired_.push_back(std::move(env_));
      env_ = std::move(fresh);
    }
    return env_.get();
  }

  // CheckLmdbPages, once per reader: before the first cursor walk over the whole environment.
  Status PagesChecked() const {
    std::lock_guard lock(pages_mutex_);
    if (!pages_checked_) pages_checked_ = CheckLmdbPages(dir_ / kDataFileName);
    return *pages_checked_;
  }

  Result<RecordView> Decode(std::uint64_t index, std::span<const std::byte> value,
                            ReadScratch& scratch, bool verify) const {
    Result<RecordView> view =
        DecodeRecordValue(index, value, datum_, verify, info_.format_version, data_file_, scratch);
    if (!view.ok()) return view;
    if (const Status label = CheckLabelAgainstManifest(info_, index, view->label); !label.ok()) {
      return Status::Corruption(data_file_ + ": " + label.message())
          .WithRecordIndex(index)
          .WithPath(data_file_);
    }
    return view;
  }

  // Moves a view's key and bytes into `scratch`, for views that must outlive the transaction.
  static RecordView Own(RecordView view, ReadScratch& scratch) {
    scratch.key.assign(view.key);
    if (view.bytes.data() != scratch.bytes.data()) {
      scratch.bytes.assign(view.bytes.begin(), view.bytes.end());
    }
    view.key = scratch.key;
    view.bytes = scratch.bytes;
    return view;
  }

  fs::path dir_;
  std::string data_file_;
  OpenOptions options_;
  DatasetInfo info_;
  bool datum_ = false;  // values are caffe.Datum (the manifest is the file beside data.mdb)
  mutable std::unique_ptr<Environment> env_;
  mutable std::vector<std::unique_ptr<Environment>> retired_;
  mutable std::mutex env_mutex_;
  mutable std::optional<Status> pages_checked_;
  mutable std::mutex pages_mutex_;
};

}  // namespace

Result<std::unique_ptr<Reader>> OpenLmdbDataset(const fs::path& dir, const OpenOptions& options) {
  auto reader = std::make_unique<LmdbReader>(dir, options);
  PACKREC_RETURN_IF_ERROR(reader->Open());
  return std::unique_ptr<Reader>(std::move(reader));
}

}  // namespace packrec::lmdb
