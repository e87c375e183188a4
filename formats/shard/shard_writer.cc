// The shard writer: records appended in order into shard-NNNNNN.pkr.tmp files, each sealed
// (keys, index, footer, fsync, rename) when the next record would pass the size target; the
// manifest is written last. Resumable (WriterOptions::resumable): every seal is a resume point,
// and the journal lists the sealed shards, so a resumed run keeps them and redoes only the shard
// that was open.

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/output_dir.h"
#include "core/range_stream.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "shard/shard_layout.h"
#include "storage/field_block.h"
#include "storage/json_util.h"
#include "storage/payload.h"
#include "storage/resume_journal.h"

namespace packrec::shard {
namespace {

namespace fs = std::filesystem;

std::string ShardFileName(std::uint32_t shard_index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06u.pkr", shard_index);
  return name;
}

// The open shard's field blocks until it is sealed, in chunks kept from shard to shard. One
// vector grown by doubling copied its bytes at each doubling and touched fresh pages for twice
// what it ended with: page faults and copies that took 8% of the writing thread's time in a
// WebDataset import with captions and JSON (perf, docs/benchmarks.md).
class FieldBlockBuffer {
 public:
  std::uint64_t size() const { return size_; }
  void Append(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const std::size_t chunk = size_ / kChunkBytes;
      if (chunk == chunks_.size()) chunks_.push_back(std::make_unique<std::byte[]>(kChunkBytes));
      const std::size_t at = size_ % kChunkBytes;
      const std::size_t n = std::min(bytes.size(), kChunkBytes - at);
      std::memcpy(chunks_[chunk].get() + at, bytes.data(), n);
      bytes = bytes.subspan(n);
      size_ += n;
    }
  }
  Status WriteTo(WritableFile& file) const {
    for (std::uint64_t done = 0; done < size_; done += kChunkBytes) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(kChunkBytes, size_ - done));
      PACKREC_RETURN_IF_ERROR(file.Append(std::span(chunks_[done / kChunkBytes].get(), n)));
    }
    return Status::OK();
  }
  void Clear() { size_ = 0; }

 private:
  static constexpr std::size_t kChunkBytes = 1 << 20;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  std::uint64_t size_ = 0;
};

// What a resume point needs besides the sealed shards' list: totals over them.
struct SealedTotals {
  std::uint64_t records = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t file_bytes = 0;
  std::uint32_t label_count = 0;
  bool webp = false;  // a WebP record: the manifest's version is kShardVersionWithWebp
};

class ShardWriter final : public DatasetWriter {
 public:
  ShardWriter(OutputDirectory out, WriterOptions options)
      : out_(std::move(out)),
        dir_(out_.write_dir()),
        options_(std::move(options)),
        version_(options_.fields.empty() ? kShardVersionWithoutFields : kShardFormatVersion),
        entry_size_(IndexEntrySize(version_)) {}

  // Continues after `sealed` (the resume point's shards, checked against the files).
  void ResumeAfter(std::vector<ManifestShard> sealed, const SealedTotals& totals) {
    sealed_ = std::move(sealed);
    checkpointed_shards_ = sealed_.size();
    sealed_totals_ = totals;
    records_ = totals.records;
    payload_bytes_ = totals.payload_bytes;
    bytes_written_ = totals.file_bytes;
    label_count_ = totals.label_count;
    webp_ = totals.webp;
  }
  // The first journal, before any data file exists: the directory is then known to be ours.
  Status StartJournal() { return WriteJournal(""); }

  ~ShardWriter() override {
    if (!finished_) Abort();
  }

  Status Add(const RecordInput& record) override;
  Status Finish(const DatasetMetadata& metadata) override;
  Status AddFields(std::span<const FieldSpec> fields) override;
  void Abort() override;
  std::uint64_t records_written() const override { return records_; }
  std::uint64_t bytes_written() const override {
    return bytes_written_ + (current_ ? current_->file->size() : 0);
  }
  bool CheckpointDue() const override { return checkpoint_due_; }
  Status Checkpoint(const std::function<std::string(std::uint64_t)>& caller_state) override;
  std::uint64_t AbortKeepingCheckpoint() override;

 private:
  struct OpenShard {
    std::unique_ptr<WritableFile> file;  // keeps the whole-file checksum for the manifest
    std::string name;
    fs::path tmp_path;
    std::uint64_t first_record = 0;
    std::vector<IndexEntry> entries;
    std::string keys;
    std::uint64_t payload_bytes = 0;
    std::uint32_t label_count = 0;
    bool webp = false;
  };

  Status StartShard();
  Status SealShard();
  Status WriteFieldRegion(OpenShard& shard);
  Status AddFieldBlock(const RecordInput& record, IndexEntry& entry);
  // What the field region grows to with `record` (an upper bound; 0 without fields).
  std::uint64_t FieldBytesProjected(const RecordInput& record) const {
    if (version_ < 2) return 0;
    std::uint64_t bytes = field_blocks_.size() + kFieldValueAlignment +
                          (options_.fields.size() + 1) * kFieldTableEntrySize;
    for (const FieldView& value : record.fields) bytes += value.bytes.size() + kFieldValueAlignment;
    return bytes;
  }
  Status WriteJournal(const std::string& caller_state);
  void RemoveOpenShard();

  OutputDirectory out_;
  fs::path dir_;  // where files are written until out_.Commit()
  WriterOptions options_;
  std::uint32_t version_;   // 1 without fields, 2 with
  std::size_t entry_size_;  // IndexEntrySize(version_)
  bool finished_ = false;
  std::unique_ptr<OpenShard> current_;
  // Version 2: the open shard's field blocks, written as its field region when it is sealed
  // (entries' fields_offset are relative to it until then). Bounded by the shard size.
  FieldBlockBuffer field_blocks_;
  std::vector<std::byte> field_block_;  // the record's block as it is built
  std::vector<ManifestShard> sealed_;
  std::uint64_t records_ = 0;
  std::uint64_t payload_bytes_ = 0;
  std::uint64_t bytes_written_ = 0;
  std::uint32_t label_count_ = 0;
  bool webp_ = false;  // any record so far is WebP
  std::vector<std::byte> compressed_;
  // Resume points: the sealed shards the journal lists, and the totals over all sealed ones.
  std::size_t checkpointed_shards_ = 0;
  SealedTotals sealed_totals_;
  bool checkpoint_due_ = false;
};

Status ShardWriter::StartShard() {
  auto shard = std::make_unique<OpenShard>();
  shard->name = ShardFileName(static_cast<std::uint32_t>(sealed_.size()));
  shard->tmp_path = dir_ / (shard->name + ".tmp");
  shard->first_record = records_;
  std::error_code ignored;
  fs::remove(shard->tmp_path, ignored);
  PACKREC_ASSIGN_OR_RETURN(shard->file, WritableFile::Create(shard->tmp_path));
  shard->file->EnableChecksum();
  shard->file->EnableWriteBehind();
  current_ = std::move(shard);
  field_blocks_.Clear();
  Header header;
  header.format_version = version_;
  header.shard_index = static_cast<std::uint32_t>(sealed_.size());
  header.align_bytes = options_.shard.align_bytes;
  header.first_record = records_;
  std::array<std::byte, kHeaderSize> bytes{};
  EncodeHeader(header, bytes);
  return current_->file->Append(bytes);
}

// The field blocks after the last payload, at a multiple of 8 so that numeric values are aligned.
Status ShardWriter::WriteFieldRegion(OpenShard& shard) {
  PACKREC_RETURN_IF_ERROR(shard.file->AppendZeros(
      AlignUp(shard.file->size(), kFieldValueAlignment) - shard.file->size()));
  const std::uint64_t region = shard.file->size();
  for (IndexEntry& entry : shard.entries) entry.fields_offset += region;
  PACKREC_RETURN_IF_ERROR(field_blocks_.WriteTo(*shard.file));
  field_blocks_.Clear();
  return Status::OK();
}

Status ShardWriter::AddFieldBlock(const RecordInput& record, IndexEntry& entry) {
  field_block_.clear();
  const Status appended = AppendFieldBlock(options_.fields.size(), record.fields, field_block_);
  if (!appended.ok()) return appended.WithContext("record " + std::to_string(records_));
  entry.fields_offset = field_blocks_.size();
  entry.fields_size = static_cast<std::uint32_t>(field_block_.size());
  entry.fields_checksum = Xxh64(field_block_, /*seed=*/records_);
  field_blocks_.Append(field_block_);
  return Status::OK();
}

Status ShardWriter::SealShard() {
  OpenShard& shard = *current_;
  if (version_ >= 2) PACKREC_RETURN_IF_ERROR(WriteFieldRegion(shard));
  Footer footer;
  footer.keys_offset = shard.file->size();
  footer.keys_size = shard.keys.size();
  footer.record_count = shard.entries.size();
  footer.first_record = shard.first_record;
  footer.index_offset = AlignUp(footer.keys_offset + footer.keys_size, kIndexAlignment);

  // Keys, padding and index are hashed as one block, so they are laid out in one buffer.
  std::vector<std::byte> metadata(footer.index_offset - footer.keys_offset +
                                  shard.entries.size() * entry_size_);
  std::memcpy(metadata.data(), shard.keys.data(), shard.keys.size());
  std::byte* index = metadata.data() + (footer.index_offset - footer.keys_offset);
  for (std::size_t i = 0; i < shard.entries.size(); ++i) {
    EncodeIndexEntry(shard.entries[i], version_,
                     std::span<std::byte>(index + i * entry_size_, entry_size_));
  }
  footer.metadata_xxh64 = Xxh64(metadata);
  PACKREC_RETURN_IF_ERROR(shard.file->Append(metadata));
  std::array<std::byte, kFooterSize> footer_bytes{};
  EncodeFooter(footer, footer_bytes);
  PACKREC_RETURN_IF_ERROR(shard.file->Append(footer_bytes));
  PACKREC_RETURN_IF_ERROR(shard.file->Sync());
  PACKREC_RETURN_IF_ERROR(shard.file->Close());
  PACKREC_RETURN_IF_ERROR(RenamePath(shard.tmp_path, dir_ / shard.name));
  sealed_.push_back({shard.name, shard.first_record, shard.entries.size(), shard.file->size(),
                     shard.file->checksum()});
  bytes_written_ += shard.file->size();
  sealed_totals_.records += shard.entries.size();
  sealed_totals_.payload_bytes += shard.payload_bytes;
  sealed_totals_.file_bytes += shard.file->size();
  sealed_totals_.label_count = std::max(sealed_totals_.label_count, shard.label_count);
  sealed_totals_.webp = sealed_totals_.webp || shard.webp;
  current_.reset();
  checkpoint_due_ = options_.resumable;
  if (options_.shard.on_sealed)
    options_.shard.on_sealed(dir_ / sealed_.back().file, sealed_.back().xxh64);
  return Status::OK();
}

Status ShardWriter::WriteJournal(const std::string& caller_state) {
  ResumeJournal journal;
  journal.format = "shard";
  journal.records = sealed_totals_.records;
  nlohmann::json shards = nlohmann::json::array();
  for (const ManifestShard& shard : sealed_) {
    shards.push_back({{"file", shard.file},
                      {"first_record", shard.first_record},
                      {"record_count", shard.record_count},
                      {"size_bytes", shard.size_bytes},
                      {"xxh64", shard.xxh64}});
  }
  journal.writer = {{"shards", shards},
                    {"payload_bytes", sealed_totals_.payload_bytes},
                    {"label_count", sealed_totals_.label_count},
                    {"webp", sealed_totals_.webp}};
  journal.caller_state = caller_state;
  PACKREC_RETURN_IF_ERROR(WriteResumeJournal(dir_ / kResumeJournalName, journal));
  checkpointed_shards_ = sealed_.size();
  return Status::OK();
}

// The sealed shards are already fsynced; the journal's own directory sync makes their renames
// durable too.
Status ShardWriter::Checkpoint(const std::function<std::string(std::uint64_t)>& caller_state) {
  if (!options_.resumable) return Status::OK();
  checkpoint_due_ = false;
  return WriteJournal(caller_state(sealed_totals_.records));
}

std::uint64_t ShardWriter::AbortKeepingCheckpoint() {
  if (finished_) return 0;
  std::uint64_t kept = 0;
  for (std::size_t i = 0; i < checkpointed_shards_; ++i) kept += sealed_[i].record_count;
  if (!options_.resumable || kept == 0) {
    Abort();
    return 0;
  }
  RemoveOpenShard();
  // Shards sealed after the last resume point stay too: their fsync succeeded, and the journal on
  // disk may already list them (a failed journal write may have failed after its rename). The
  // resumed run keeps what its journal lists and removes the rest.
  out_.Keep();
  finished_ = true;
  return kept;
}

Status ShardWriter::Add(const RecordInput& record) {
  if (finished_) return Status::Internal("Add after Finish");
  PACKREC_RETURN_IF_ERROR(CheckKeySize(records_, record.key.size(), kMaxKeyBytes));
  PACKREC_RETURN_IF_ERROR(CheckRecordFields(options_, record, records_));
  PACKREC_ASSIGN_OR_RETURN(const StoredPayload payload,
                           PreparePayload(record, options_, compressed_));
  const std::span<const std::byte> stored = payload.bytes;
  const std::uint8_t compression = payload.zstd ? static_cast<std::uint8_t>(Compression::kZstd) : 0;

  if (current_ && !current_->entries.empty()) {
    const std::uint64_t projected = AlignUp(current_->file->size(), options_.shard.align_bytes) +
                                    stored.size() + current_->keys.size() + record.key.size() +
                                    kIndexAlignment + (current_->entries.size() + 1) * entry_size_ +
                                    kFooterSize + FieldBytesProjected(record);
    // Key table offsets are 32-bit: a shard's keys may not pass 4 GiB.
    const bool keys_full = current_->keys.size() + record.key.size() > UINT32_MAX;
    if (projected > options_.shard_size_bytes || keys_full) PACKREC_RETURN_IF_ERROR(SealShard());
  }
  if (!current_) PACKREC_RETURN_IF_ERROR(StartShard());
  OpenShard& shard = *current_;
  PACKREC_RETURN_IF_ERROR(shard.file->AppendZeros(
      AlignUp(shard.file->size(), options_.shard.align_bytes) - shard.file->size()));

  IndexEntry entry;
  entry.offset = shard.file->size();
  entry.stored_size = stored.size();
  entry.raw_size = record.bytes.size();
  entry.checksum = StoredChecksum(record, stored, records_);
  entry.label = record.label;
  entry.key_offset = static_cast<std::uint32_t>(shard.keys.size());
  entry.key_size = static_cast<std::uint16_t>(record.key.size());
  entry.width = record.image.width;
  entry.height = record.image.height;
  entry.channels = record.image.channels;
  entry.encoding = static_cast<std::uint8_t>(record.image.encoding);
  entry.compression = compression;
  entry.flags = record.image.progressive ? kFlagProgressive : 0;
  entry.subsampling = static_cast<std::uint8_t>(record.image.subsampling);
  if (version_ >= 2) PACKREC_RETURN_IF_ERROR(AddFieldBlock(record, entry));
  PACKREC_RETURN_IF_ERROR(shard.file->Append(stored));
  shard.keys.append(record.key);
  shard.entries.push_back(entry);
  shard.payload_bytes += stored.size();
  shard.label_count = std::max(shard.label_count, record.label + 1);
  ++records_;
  payload_bytes_ += stored.size();
  label_count_ = std::max(label_count_, record.label + 1);
  if (record.image.encoding == Encoding::kWebp) shard.webp = webp_ = true;
  return Status::OK();
}

// Records added so far keep shorter field tables (their new fields absent). A dataset that had no
// fields until now seals its open version-1 shard, so that its next shards are of version 2.
Status ShardWriter::AddFields(std::span<const FieldSpec> fields) {
  if (finished_) return Status::Internal("AddFields after Finish");
  std::vector<FieldSpec> schema = options_.fields;
  schema.insert(schema.end(), fields.begin(), fields.end());
  PACKREC_RETURN_IF_ERROR(ValidateSchema(schema));
  if (version_ < 2) {
    if (current_ && !current_->entries.empty()) {
      PACKREC_RETURN_IF_ERROR(SealShard());
    } else if (current_) {
      RemoveOpenShard();
    }
    version_ = kShardFormatVersion;
    entry_size_ = IndexEntrySize(version_);
  }
  options_.fields = std::move(schema);
  return Status::OK();
}

Status ShardWriter::Finish(const DatasetMetadata& metadata) {
  if (finished_) return Status::Internal("Finish called twice");
  if (current_) PACKREC_RETURN_IF_ERROR(SealShard());
  PACKREC_RETURN_IF_ERROR(SyncDirectory(dir_));
  Manifest manifest;
  manifest.common =
      ManifestFromMetadata(metadata, kManifestFormatName, webp_ ? kShardVersionWithWebp : version_,
                           records_, payload_bytes_, label_count_);
  manifest.common.fields = options_.fields;
  manifest.shards = sealed_;
  PACKREC_ASSIGN_OR_RETURN(const std::string text, SerializeManifest(manifest));
  PACKREC_RETURN_IF_ERROR(WriteRejectsFile(dir_ / "rejects.tsv", metadata.rejects));
  PACKREC_RETURN_IF_ERROR(WriteFileAtomically(dir_ / kManifestName, AsBytes(text)));
  PACKREC_RETURN_IF_ERROR(out_.Commit());
  finished_ = true;
  if (options_.resumable) {
    // The dataset is complete: a journal left by a kill just now would only say so again.
    std::error_code ignored;
    fs::remove(out_.final_dir() / kResumeJournalName, ignored);
  }
  return Status::OK();
}

void ShardWriter::RemoveOpenShard() {
  if (!current_) return;
  current_->file->Close().ok();  // the file is removed next; its close status is moot
  std::error_code ignored;
  fs::remove(current_->tmp_path, ignored);
  current_.reset();
}

void ShardWriter::Abort() {
  if (finished_) return;
  RemoveOpenShard();
  sealed_.clear();
  out_.Abort();
  finished_ = true;  // nothing left to abort
}

}  // namespace

Result<bool> LooksLikeShardDataset(const fs::path& path) {
  return IsRegularFile(path / kManifestName);
}

namespace {

Status CheckShardOptions(const WriterOptions& options) {
  if (options.shard.align_bytes == 0 ||
      (options.shard.align_bytes & (options.shard.align_bytes - 1)) != 0 ||
      options.shard.align_bytes > kMaxAlignBytes) {
    return Status::InvalidArgument("--align must be a power of two from 1 to 1048576, got " +
                                   std::to_string(options.shard.align_bytes));
  }
  if (options.shard_size_bytes < 4096) {
    return Status::InvalidArgument("--shard-size must be at least 4096 bytes, got " +
                                   std::to_string(options.shard_size_bytes));
  }
  return ValidateCommonWriterOptions(options);
}

// A resume point's shards, each checked against its file (present, of the recorded size).
Result<std::vector<ManifestShard>> JournalShards(const nlohmann::json& state, const fs::path& dir,
                                                 SealedTotals& totals) {
  const auto bad = [&](const std::string& why) {
    return Status::Corruption("cannot resume the conversion in " + dir.string() + ": " + why)
        .WithRemedy(Remedy::kOverwriteToRestart);
  };
  const auto shards = state.find("shards");
  if (shards == state.end() || !shards->is_array()) return bad("its journal lists no shards");
  std::vector<ManifestShard> sealed;
  for (const nlohmann::json& entry : *shards) {
    ManifestShard shard;
    try {
      shard.file = entry.at("file").get<std::string>();
      shard.first_record = GetUnsigned<std::uint64_t>(entry.at("first_record"));
      shard.record_count = GetUnsigned<std::uint64_t>(entry.at("record_count"));
      shard.size_bytes = GetUnsigned<std::uint64_t>(entry.at("size_bytes"));
      shard.xxh64 = GetUnsigned<std::uint64_t>(entry.at("xxh64"));
    } catch (const nlohmann::json::exception&) {
      return bad("its journal has a damaged shard entry");
    }
    if (shard.file != ShardFileName(static_cast<std::uint32_t>(sealed.size())) ||
        shard.first_record != totals.records) {
      return bad("its journal's shard " + std::to_string(sealed.size()) + " is out of order");
    }
    std::error_code error;
    const std::uint64_t size = fs::file_size(dir / shard.file, error);
    if (error) return bad(shard.file + " is missing (" + error.message() + ")");
    if (size != shard.size_bytes) {
      return bad(shard.file + " is " + std::to_string(size) + " bytes; the journal says " +
                 std::to_string(shard.size_bytes));
    }
    // Kept only whole: a shard damaged since it was sealed (a bad sector, a torn copy) would
    // otherwise end up in the finished dataset. One read of what is kept, once per resume.
    PACKREC_ASSIGN_OR_RETURN(const std::unique_ptr<RandomAccessFile> file,
                             RandomAccessFile::Open(dir / shard.file));
    PACKREC_ASSIGN_OR_RETURN(const std::uint64_t hash, HashFileXxh64(*file, size));
    if (hash != shard.xxh64) {
      return bad(shard.file + " changed since it was sealed (its xxh64 is " + Hex64(hash) +
                 ", the journal says " + Hex64(shard.xxh64) + ")");
    }
    totals.records += shard.record_count;
    totals.file_bytes += shard.size_bytes;
    sealed.push_back(std::move(shard));
  }
  try {
    totals.payload_bytes = GetUnsigned<std::uint64_t>(state.at("payload_bytes"));
    totals.label_count = GetUnsigned<std::uint32_t>(state.at("label_count"));
    // Journals written before WebP records have no "webp": none of their shards holds one.
    totals.webp = state.contains("webp") && state.at("webp").get<bool>();
  } catch (const nlohmann::json::exception&) {
    return bad("its journal has no totals");
  }
  return sealed;
}

}  // namespace

Result<std::unique_ptr<DatasetWriter>> CreateShardWriter(const fs::path& dir,
                                                         const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(CheckShardOptions(options));
  PACKREC_ASSIGN_OR_RETURN(OutputDirectory out,
                           OutputDirectory::Prepare(dir, kManifestName, options.overwrite));
  auto writer = std::make_unique<ShardWriter>(std::move(out), options);
  if (options.resumable) PACKREC_RETURN_IF_ERROR(writer->StartJournal());
  return std::unique_ptr<DatasetWriter>(std::move(writer));
}

Result<ResumedWriter> ResumeShardWriter(const fs::path& dir, const WriterOptions& options) {
  PACKREC_RETURN_IF_ERROR(CheckShardOptions(options));
  PACKREC_ASSIGN_OR_RETURN(InterruptedConversion interrupted, ReopenInterrupted(dir, "shard"));
  OutputDirectory& out = interrupted.out;
  const ResumeJournal& journal = interrupted.journal;
  const fs::path write_dir = out.write_dir();
  SealedTotals totals;
  PACKREC_ASSIGN_OR_RETURN(std::vector<ManifestShard> sealed,
                           JournalShards(journal.writer, write_dir, totals));
  if (totals.records != journal.records) {
    return Status::Corruption("cannot resume the conversion in " + dir.string() +
                              ": its journal's shards hold " + std::to_string(totals.records) +
                              " records, not " + std::to_string(journal.records));
  }
  // Everything the journal does not list was written after the resume point: the open shard,
  // shards sealed since, a manifest being written.
  std::error_code error;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& entry : fs::directory_iterator(write_dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool listed = std::any_of(sealed.begin(), sealed.end(),
                                    [&](const ManifestShard& shard) { return shard.file == name; });
    if (!listed && name != kResumeJournalName && name != ".packrec-staging") {
      stale.push_back(entry.path());
    }
  }
  if (error) return ErrnoStatus("list", write_dir, error.value());
  for (const fs::path& path : stale) {
    fs::remove_all(path, error);
    if (error) return ErrnoStatus("remove", path, error.value());
  }
  auto writer = std::make_unique<ShardWriter>(std::move(out), options);
  writer->ResumeAfter(std::move(sealed), totals);
  ResumedWriter resumed;
  resumed.records = journal.records;
  resumed.caller_state = journal.caller_state;
  resumed.writer = std::move(writer);
  return resumed;
}

}  // namespace packrec::shard
