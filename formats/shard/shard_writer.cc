// The shard writer: records appended in order into shard-NNNNNN.pkr.tmp files, each sealed
// (keys, index, footer, fsync, rename) when the next record would pass the size target; the
// manifest is written last.

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/output_dir.h"
#include "dataset/payload.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "shard/shard_layout.h"

namespace packrec::shard {
namespace {

namespace fs = std::filesystem;

std::string ShardFileName(std::uint32_t shard_index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06u.pkr", shard_index);
  return name;
}

class ShardWriter final : public DatasetWriter {
 public:
  ShardWriter(OutputDirectory out, WriterOptions options)
      : out_(std::move(out)), dir_(out_.write_dir()), options_(std::move(options)) {}

  ~ShardWriter() override {
    if (!finished_) Abort();
  }

  Status Add(const RecordInput& record) override;
  Status Finish(const DatasetMetadata& metadata) override;
  void Abort() override;
  std::uint64_t records_written() const override { return records_; }
  std::uint64_t bytes_written() const override {
    return bytes_written_ + (current_ ? current_->file->size() : 0);
  }

 private:
  struct OpenShard {
    std::unique_ptr<WritableFile> file;  // keeps the whole-file checksum for the manifest
    std::string name;
    fs::path tmp_path;
    std::uint64_t first_record = 0;
    std::vector<IndexEntry> entries;
    std::string keys;
  };

  Status StartShard();
  Status SealShard();

  OutputDirectory out_;
  fs::path dir_;  // where files are written until out_.Commit()
  WriterOptions options_;
  bool finished_ = false;
  std::unique_ptr<OpenShard> current_;
  std::vector<ManifestShard> sealed_;
  std::uint64_t records_ = 0;
  std::uint64_t payload_bytes_ = 0;
  std::uint64_t bytes_written_ = 0;
  std::uint32_t label_count_ = 0;
  std::vector<std::byte> compressed_;
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
  current_ = std::move(shard);
  Header header;
  header.shard_index = static_cast<std::uint32_t>(sealed_.size());
  header.align_bytes = options_.align_bytes;
  header.first_record = records_;
  std::array<std::byte, kHeaderSize> bytes{};
  EncodeHeader(header, bytes);
  return current_->file->Append(bytes);
}

Status ShardWriter::SealShard() {
  OpenShard& shard = *current_;
  Footer footer;
  footer.keys_offset = shard.file->size();
  footer.keys_size = shard.keys.size();
  footer.record_count = shard.entries.size();
  footer.first_record = shard.first_record;
  footer.index_offset = AlignUp(footer.keys_offset + footer.keys_size, kIndexAlignment);

  // Keys, padding and index are hashed as one block, so they are laid out in one buffer.
  std::vector<std::byte> metadata(footer.index_offset - footer.keys_offset +
                                  shard.entries.size() * kIndexEntrySize);
  std::memcpy(metadata.data(), shard.keys.data(), shard.keys.size());
  std::byte* index = metadata.data() + (footer.index_offset - footer.keys_offset);
  for (std::size_t i = 0; i < shard.entries.size(); ++i) {
    EncodeIndexEntry(shard.entries[i], std::span<std::byte, kIndexEntrySize>(
                                           index + i * kIndexEntrySize, kIndexEntrySize));
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
  current_.reset();
  return Status::OK();
}

Status ShardWriter::Add(const RecordInput& record) {
  if (finished_) return Status::Internal("Add after Finish");
  PACKREC_RETURN_IF_ERROR(CheckKeySize(records_, record.key.size(), kMaxKeyBytes));
  PACKREC_ASSIGN_OR_RETURN(const StoredPayload payload,
                           PreparePayload(record, options_, compressed_));
  const std::span<const std::byte> stored = payload.bytes;
  const std::uint8_t compression = payload.zstd ? static_cast<std::uint8_t>(Compression::kZstd) : 0;

  if (current_ && !current_->entries.empty()) {
    const std::uint64_t projected = AlignUp(current_->file->size(), options_.align_bytes) +
                                    stored.size() + current_->keys.size() + record.key.size() +
                                    kIndexAlignment +
                                    (current_->entries.size() + 1) * kIndexEntrySize + kFooterSize;
    // Key table offsets are 32-bit: a shard's keys may not pass 4 GiB.
    const bool keys_full = current_->keys.size() + record.key.size() > UINT32_MAX;
    if (projected > options_.shard_size_bytes || keys_full) PACKREC_RETURN_IF_ERROR(SealShard());
  }
  if (!current_) PACKREC_RETURN_IF_ERROR(StartShard());
  OpenShard& shard = *current_;
  PACKREC_RETURN_IF_ERROR(shard.file->AppendZeros(
      AlignUp(shard.file->size(), options_.align_bytes) - shard.file->size()));

  IndexEntry entry;
  entry.offset = shard.file->size();
  entry.stored_size = stored.size();
  entry.raw_size = record.bytes.size();
  entry.checksum = Xxh64(stored, /*seed=*/records_);
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
  PACKREC_RETURN_IF_ERROR(shard.file->Append(stored));
  shard.keys.append(record.key);
  shard.entries.push_back(entry);
  ++records_;
  payload_bytes_ += stored.size();
  label_count_ = std::max(label_count_, record.label + 1);
  return Status::OK();
}

Status ShardWriter::Finish(const DatasetMetadata& metadata) {
  if (finished_) return Status::Internal("Finish called twice");
  if (current_) PACKREC_RETURN_IF_ERROR(SealShard());
  PACKREC_RETURN_IF_ERROR(SyncDirectory(dir_));
  Manifest manifest;
  manifest.common = ManifestFromMetadata(metadata, kManifestFormatName, kShardFormatVersion,
                                         records_, payload_bytes_, label_count_);
  manifest.shards = sealed_;
  PACKREC_ASSIGN_OR_RETURN(const std::string text, SerializeManifest(manifest));
  PACKREC_RETURN_IF_ERROR(WriteRejectsFile(dir_ / "rejects.tsv", metadata.rejects));
  PACKREC_RETURN_IF_ERROR(WriteFileAtomically(dir_ / kManifestName, AsBytes(text)));
  PACKREC_RETURN_IF_ERROR(out_.Commit());
  finished_ = true;
  return Status::OK();
}

void ShardWriter::Abort() {
  if (finished_) return;
  std::error_code ignored;
  if (current_) {
    current_->file->Close().ok();  // the file is removed next; its close status is moot
    fs::remove(current_->tmp_path, ignored);
    current_.reset();
  }
  sealed_.clear();
  out_.Abort();
  finished_ = true;  // nothing left to abort
}

}  // namespace

bool LooksLikeShardDataset(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path / kManifestName, ignored);
}

Result<std::unique_ptr<DatasetWriter>> CreateShardWriter(const fs::path& dir,
                                                         const WriterOptions& options) {
  if (options.align_bytes == 0 || (options.align_bytes & (options.align_bytes - 1)) != 0 ||
      options.align_bytes > kMaxAlignBytes) {
    return Status::InvalidArgument("--align must be a power of two from 1 to 1048576, got " +
                                   std::to_string(options.align_bytes));
  }
  if (options.shard_size_bytes < 4096) {
    return Status::InvalidArgument("--shard-size must be at least 4096 bytes, got " +
                                   std::to_string(options.shard_size_bytes));
  }
  PACKREC_RETURN_IF_ERROR(ValidateCommonWriterOptions(options));
  PACKREC_ASSIGN_OR_RETURN(OutputDirectory out,
                           OutputDirectory::Prepare(dir, kManifestName, options.overwrite));
  return std::unique_ptr<DatasetWriter>(new ShardWriter(std::move(out), options));
}

}  // namespace packrec::shard
