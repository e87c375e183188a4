// The shard reader: every shard mapped read-only and validated at open (header, footer, index
// checksum and the bounds of every index entry), so Read is a bounds-free lookup plus, when
// enabled, one checksum of the record.

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/range_stream.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "shard/shard_layout.h"
#include "storage/field_block.h"
#include "storage/payload.h"

namespace packrec::shard {
namespace {

namespace fs = std::filesystem;

struct Shard {
  ManifestShard meta;
  fs::path path;
  MappedFile map;
  Footer footer;
  Status damage;  // why the shard is unusable; OK when it is fine
  // Key table, padding and index, copied out of the file at open: lookups never fault on the
  // mapping, and a file truncated under an open reader cannot take the index with it.
  std::vector<std::byte> metadata;
  std::uint32_t version = kShardVersionWithoutFields;  // from the header
  std::size_t entry_size = kIndexEntrySizeV1;          // IndexEntrySize(version)

  std::span<const std::byte> EntryBytes(std::uint64_t local) const {
    return std::span<const std::byte>(
        metadata.data() + (footer.index_offset - footer.keys_offset) + local * entry_size,
        entry_size);
  }
  IndexEntry Entry(std::uint64_t local) const {
    IndexEntry entry;
    DecodeIndexEntry(EntryBytes(local), version, &entry);  // validated at open
    return entry;
  }
  std::span<const std::byte> FieldBlock(const IndexEntry& entry) const {
    return map.bytes().subspan(entry.fields_offset, entry.fields_size);
  }
  std::string_view Key(const IndexEntry& entry) const {
    return {reinterpret_cast<const char*>(metadata.data() + entry.key_offset), entry.key_size};
  }
};

std::string RecordWhere(const Shard& shard, std::uint64_t index, std::string_view key,
                        std::uint64_t offset) {
  return shard.meta.file + ": record " + std::to_string(index) + " (key '" + std::string(key) +
         "') at byte offset " + std::to_string(offset);
}

// Checks everything about a shard that does not need the records' bytes. `field_count`: the
// manifest's schema. Header, footer and index are read with pread, not through the mapping: a
// page fault there reads around the faulting page (read_ahead_kb, 8 MiB on some disks), which
// pulled megabytes of image bytes into memory at every open; pread reads what it is asked for.
Status ValidateShard(Shard& shard, std::size_t field_count) {
  const std::string name = shard.path.string();
  const std::uint64_t size = shard.map.size();
  if (size < shard.meta.size_bytes) {
    return Status::Truncated(name + ": truncated (expected " +
                             std::to_string(shard.meta.size_bytes) + " bytes, got " +
                             std::to_string(size) + ")");
  }
  if (size > shard.meta.size_bytes) {
    return Status::Corruption(name + ": " + std::to_string(size) + " bytes, the manifest says " +
                              std::to_string(shard.meta.size_bytes));
  }
  if (size < kHeaderSize + kFooterSize) {
    return Status::Corruption(name + ": " + std::to_string(size) +
                              " bytes is too small for a shard");
  }
  PACKREC_ASSIGN_OR_RETURN(const std::unique_ptr<RandomAccessFile> file,
                           RandomAccessFile::Open(shard.path));
  std::array<std::byte, kHeaderSize> header_bytes{};
  PACKREC_RETURN_IF_ERROR(file->ReadExact(0, header_bytes));
  Header header;
  switch (DecodeHeader(header_bytes, &header)) {
    case DecodeError::kBadMagic:
      return Status::Corruption(name + ": not a packrec shard (bad magic at byte offset 0)");
    case DecodeError::kBadChecksum:
      return Status::Corruption(name + ": header checksum mismatch (bytes 0-63)");
    case DecodeError::kBadReserved:
      return Status::Corruption(name + ": header has non-zero reserved bytes");
    case DecodeError::kNone:
      break;
  }
  if (header.format_version > kShardFormatVersion) {
    return Status::NotSupported(
        name + ": shard format version " + std::to_string(header.format_version) +
        " is newer than this packrec supports (" + std::to_string(kShardFormatVersion) + ")");
  }
  if (header.format_version == 0) return Status::Corruption(name + ": shard format version 0");
  shard.version = header.format_version;
  shard.entry_size = IndexEntrySize(shard.version);
  // A version-1 shard in a dataset with fields was sealed before the writer met its first field
  // (an import whose first records had none): its records have every field absent.
  if (header.first_record != shard.meta.first_record) {
    return Status::Corruption(name + ": header says first record " +
                              std::to_string(header.first_record) + ", the manifest " +
                              std::to_string(shard.meta.first_record));
  }
  const std::uint64_t footer_offset = size - kFooterSize;
  std::array<std::byte, kFooterSize> footer_bytes{};
  PACKREC_RETURN_IF_ERROR(file->ReadExact(footer_offset, footer_bytes));
  switch (DecodeFooter(footer_bytes, &shard.footer)) {
    case DecodeError::kBadMagic:
      return Status::Corruption(name + ": footer magic missing at byte offset " +
                                std::to_string(footer_offset + 56));
    case DecodeError::kBadChecksum:
      return Status::Corruption(name + ": footer checksum mismatch at byte offset " +
                                std::to_string(footer_offset));
    default:
      break;
  }
  const Footer& footer = shard.footer;
  if (footer.record_count != shard.meta.record_count ||
      footer.first_record != shard.meta.first_record) {
    return Status::Corruption(name + ": footer says " + std::to_string(footer.record_count) +
                              " records from " + std::to_string(footer.first_record) +
                              ", the manifest " + std::to_string(shard.meta.record_count) +
                              " from " + std::to_string(shard.meta.first_record));
  }
  // Overflow-safe: every quantity is bounded by the file size before it is multiplied or added.
  const bool index_fits =
      footer.record_count <= footer_offset / shard.entry_size &&
      footer.index_offset <= footer_offset &&
      footer.index_offset == footer_offset - footer.record_count * shard.entry_size;
  const bool keys_fit =
      footer.keys_offset >= kHeaderSize && footer.keys_offset <= footer.index_offset &&
      footer.keys_size <= footer.index_offset - footer.keys_offset &&
      footer.index_offset - footer.keys_offset - footer.keys_size < kIndexAlignment;
  if (!index_fits || !keys_fit) {
    return Status::Corruption(name + ": footer locates the key table or index outside the file");
  }
  shard.metadata.resize(footer_offset - footer.keys_offset);
  PACKREC_RETURN_IF_ERROR(file->ReadExact(footer.keys_offset, shard.metadata));
  const std::uint64_t computed = Xxh64(shard.metadata);
  if (computed != footer.metadata_xxh64) {
    return Status::Corruption(name + ": index checksum mismatch (bytes " +
                              std::to_string(footer.keys_offset) + "-" +
                              std::to_string(footer_offset - 1) + ")");
  }
  for (std::uint64_t local = 0; local < footer.record_count; ++local) {
    IndexEntry entry;
    const std::uint64_t index = footer.first_record + local;
    const std::uint64_t entry_offset = footer.index_offset + local * shard.entry_size;
    const bool reserved_ok =
        DecodeIndexEntry(shard.EntryBytes(local), shard.version, &entry) == DecodeError::kNone;
    const bool payload_fits = entry.offset >= kHeaderSize && entry.offset <= footer.keys_offset &&
                              entry.stored_size <= footer.keys_offset - entry.offset;
    const bool key_fits = entry.key_offset <= footer.keys_size &&
                          entry.key_size <= footer.keys_size - entry.key_offset;
    const bool sizes_ok = entry.compression <= static_cast<std::uint8_t>(Compression::kZstd) &&
                          (entry.compression != 0 || entry.raw_size == entry.stored_size) &&
                          entry.raw_size <= kMaxRawRecordBytes &&
                          entry.encoding <= static_cast<std::uint8_t>(Encoding::kWebp);
    // The block's table may be shorter than the schema (FieldTableEntries checks it when read).
    const bool fields_fit =
        field_count == 0 || shard.version < 2 ||
        (entry.fields_offset >= kHeaderSize && entry.fields_offset <= footer.keys_offset &&
         entry.fields_offset % kFieldValueAlignment == 0 &&
         entry.fields_size <= footer.keys_offset - entry.fields_offset);
    if (!reserved_ok || !payload_fits || !key_fits || !sizes_ok || !fields_fit) {
      return Status::Corruption(name + ": index entry of record " + std::to_string(index) +
                                " at byte offset " + std::to_string(entry_offset) +
                                " is impossible (offset " + std::to_string(entry.offset) +
                                ", size " + std::to_string(entry.stored_size) + ")");
    }
  }
  return Status::OK();
}

class ShardReader final : public Reader {
 public:
  ShardReader(DatasetInfo info, std::vector<Shard> shards, OpenOptions options)
      : info_(std::move(info)), shards_(std::move(shards)), options_(options) {
    for (const Shard& shard : shards_) shard_first_.push_back(shard.meta.first_record);
  }

  const DatasetInfo& info() const override { return info_; }

  Result<RecordView> Read(std::uint64_t index, ReadScratch& scratch) const override {
    PACKREC_ASSIGN_OR_RETURN(const Shard* shard, ShardOf(index));
    return AtRecord(ReadFromShard(*shard, index, scratch, options_.verify_checksums), index,
                    shard->path.string());
  }

  Result<FieldView> ReadField(std::uint64_t index, std::size_t field,
                              ReadScratch& scratch) const override {
    (void)scratch;  // field values are always views into the mapping
    if (field >= info_.fields.size()) return Reader::ReadField(index, field, scratch);
    PACKREC_ASSIGN_OR_RETURN(const Shard* shard, ShardOf(index));
    const IndexEntry entry = shard->Entry(index - shard->meta.first_record);
    Result<FieldView> value = shard->version < 2
                                  ? Result<FieldView>(FieldView{})
                                  : DecodeFieldValue(shard->FieldBlock(entry), info_.fields.size(),
                                                     field, options_.verify_checksums);
    if (!value.ok()) {
      return Status(value.status().code(),
                    FieldWhere(*shard, entry, index, field) + ": " + value.status().message())
          .WithRecordIndex(index)
          .WithPath(shard->path.string());
    }
    return value;
  }

  Result<std::vector<std::uint32_t>> ReadLabels() const override {
    std::vector<std::uint32_t> labels;
    labels.reserve(info_.record_count);
    for (const Shard& shard : shards_) {
      if (!shard.damage.ok()) return shard.damage;
      // The label alone (bytes 32-35 of each entry, checked at open), not a whole entry decoded.
      for (std::uint64_t local = 0; local < shard.meta.record_count; ++local) {
        labels.push_back(LoadLE<std::uint32_t>(&shard.EntryBytes(local)[32]));
      }
    }
    return labels;
  }

  Result<RecordLocation> Locate(std::uint64_t index) const override {
    PACKREC_ASSIGN_OR_RETURN(const Shard* shard, ShardOf(index));
    const IndexEntry entry = shard->Entry(index - shard->meta.first_record);
    return RecordLocation{shard->path, entry.offset, entry.stored_size,
                          entry.compression != static_cast<std::uint8_t>(Compression::kNone)};
  }

  Status ForEach(const Visitor& visit, std::uint64_t begin, std::uint64_t end) const override {
    end = std::min(end, info_.record_count);
    ReadScratch scratch;
    for (const Shard& shard : shards_) {
      const std::uint64_t first = shard.meta.first_record;
      const std::uint64_t shard_end = first + shard.meta.record_count;
      if (shard_end <= begin || first >= end) continue;
      if (!shard.damage.ok()) return shard.damage;
      PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(shard.path));
      PACKREC_RETURN_IF_ERROR(StreamShard(
          shard, *file, std::max(begin, first), std::min(end, shard_end),
          [&](std::uint64_t index, const IndexEntry& entry, std::span<const std::byte> stored) {
            PACKREC_ASSIGN_OR_RETURN(
                const RecordView view,
                MakeView(shard, entry, index, stored, scratch, options_.verify_checksums));
            return visit(view);
          }));
    }
    return Status::OK();
  }

  VerifyStats Verify(VerifyReporter& reporter) const override {
    VerifyStats stats;
    ReadScratch scratch;
    for (const Shard& shard : shards_) {
      auto report_shard = [&](const Status& status) {
        reporter.Report({shard.meta.file, std::nullopt, "", std::nullopt, status});
        ++stats.problems;
      };
      if (!shard.damage.ok()) {
        report_shard(shard.damage);
        continue;
      }
      Result<std::unique_ptr<RandomAccessFile>> file = RandomAccessFile::Open(shard.path);
      if (!file.ok()) {
        report_shard(file.status());
        continue;
      }
      const std::uint64_t problems_before = stats.problems;
      const std::uint64_t first = shard.meta.first_record;
      const Status scanned = StreamShard(
          shard, **file, first, first + shard.meta.record_count,
          [&](std::uint64_t index, const IndexEntry& entry, std::span<const std::byte> stored) {
            ++stats.records_checked;
            Result<RecordView> view = MakeView(shard, entry, index, stored, scratch, true);
            if (view.ok()) {
              stats.bytes_checked += stored.size();
            } else {
              reporter.Report({shard.meta.file, index, std::string(shard.Key(entry)),
                               view.status().byte_offset().value_or(entry.offset), view.status()});
              ++stats.problems;
            }
            return Status::OK();  // report and go on
          });
      if (!scanned.ok()) {
        report_shard(scanned);
        continue;
      }
      // Bytes outside records (padding) are covered only by the whole-file checksum.
      if (stats.problems != problems_before) continue;
      Result<std::uint64_t> computed = HashFileXxh64(**file, shard.meta.size_bytes);
      if (!computed.ok()) {
        report_shard(computed.status());
      } else if (*computed != shard.meta.xxh64) {
        report_shard(Status::Corruption(shard.meta.file + ": file checksum mismatch (manifest " +
                                        Hex64(shard.meta.xxh64) + ", computed " + Hex64(*computed) +
                                        ")"));
      }
    }
    return stats;
  }

 private:
  using StoredVisitor =
      std::function<Status(std::uint64_t, const IndexEntry&, std::span<const std::byte>)>;

  // Calls `on_record` with the stored bytes of records [begin, end) of `shard`, in order,
  // streamed through pread windows (core/range_stream.h).
  static Status StreamShard(const Shard& shard, const RandomAccessFile& file, std::uint64_t begin,
                            std::uint64_t end, const StoredVisitor& on_record) {
    const std::uint64_t first = shard.meta.first_record;
    return StreamRanges(
        file, begin, end,
        [&](std::uint64_t i) {
          const IndexEntry entry = shard.Entry(i - first);
          return std::pair{entry.offset, entry.stored_size};
        },
        [&](std::uint64_t i, std::span<const std::byte> stored) {
          return on_record(i, shard.Entry(i - first), stored);
        });
  }

 private:
  // The undamaged shard holding record `index`.
  Result<const Shard*> ShardOf(std::uint64_t index) const {
    if (index >= info_.record_count) {
      return IndexOutOfRange(index, info_.record_count);
    }
    const auto it = std::upper_bound(shard_first_.begin(), shard_first_.end(), index);
    const Shard& shard = shards_[static_cast<std::size_t>(it - shard_first_.begin()) - 1];
    if (!shard.damage.ok()) return shard.damage;
    return &shard;
  }

  Result<RecordView> ReadFromShard(const Shard& shard, std::uint64_t index, ReadScratch& scratch,
                                   bool verify) const {
    const IndexEntry entry = shard.Entry(index - shard.meta.first_record);
    return MakeView(shard, entry, index, shard.map.bytes().subspan(entry.offset, entry.stored_size),
                    scratch, verify);
  }

  // `stored` holds the entry's stored bytes, from the mapping or from a streamed window.
  Result<RecordView> MakeView(const Shard& shard, const IndexEntry& entry, std::uint64_t index,
                              std::span<const std::byte> stored, ReadScratch& scratch,
                              bool verify) const {
    RecordView view;
    view.index = index;
    view.key = shard.Key(entry);
    view.label = entry.label;
    view.width = entry.width;
    view.height = entry.height;
    view.channels = entry.channels;
    view.encoding = static_cast<Encoding>(entry.encoding);
    if (verify) {
      const std::uint64_t computed = Xxh64(stored, /*seed=*/index);
      if (computed != entry.checksum) {
        return Status::Corruption(RecordWhere(shard, index, view.key, entry.offset) +
                                  ": checksum mismatch (stored " + Hex64(entry.checksum) +
                                  ", computed " + Hex64(computed) + ")");
      }
    }
    if (entry.compression == static_cast<std::uint8_t>(Compression::kZstd)) {
      PACKREC_RETURN_IF_ERROR(DecompressPayload(stored, entry.raw_size, scratch,
                                                RecordWhere(shard, index, view.key, entry.offset)));
      view.bytes = scratch.bytes;
    } else {
      view.bytes = stored;
    }
    if (!info_.fields.empty()) {
      PACKREC_RETURN_IF_ERROR(ViewFields(shard, entry, index, scratch, verify));
      view.fields = scratch.fields;
    }
    return view;
  }

  // The record's field block, checked when `verify`, decoded into scratch.fields.
  Status ViewFields(const Shard& shard, const IndexEntry& entry, std::uint64_t index,
                    ReadScratch& scratch, bool verify) const {
    const std::span<const std::byte> block = shard.FieldBlock(entry);
    const std::size_t count = info_.fields.size();
    if (verify && shard.version >= 2 && Xxh64(block, /*seed=*/index) != entry.fields_checksum) {
      const std::optional<std::size_t> field = FirstDamagedField(block, count);
      const std::string what =
          field ? FieldWhere(shard, entry, index, *field)
                : RecordWhere(shard, index, shard.Key(entry), entry.fields_offset) +
                      ", its field table";
      return Status::Corruption(what + ": checksum mismatch (the record's fields are damaged)")
          .WithByteOffset(entry.fields_offset);
    }
    const Status decoded = DecodeFieldBlock(block, count, scratch.fields);
    if (!decoded.ok()) {
      return Status::Corruption(RecordWhere(shard, index, shard.Key(entry), entry.fields_offset) +
                                ": " + decoded.message());
    }
    return Status::OK();
  }

  std::string FieldWhere(const Shard& shard, const IndexEntry& entry, std::uint64_t index,
                         std::size_t field) const {
    return RecordWhere(shard, index, shard.Key(entry), entry.fields_offset) + ", field '" +
           info_.fields[field].name + "'";
  }

  DatasetInfo info_;
  std::vector<Shard> shards_;
  std::vector<std::uint64_t> shard_first_;
  OpenOptions options_;
};

}  // namespace

Result<std::unique_ptr<Reader>> OpenShardDataset(const fs::path& dir, const OpenOptions& options) {
  const fs::path manifest_path = dir / kManifestName;
  Result<std::vector<std::byte>> text = ReadWholeFile(manifest_path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status::NotFound(dir.string() + " is not a packrec dataset (no " + kManifestName +
                              ")");
    }
    return text.status();
  }
  PACKREC_ASSIGN_OR_RETURN(
      Manifest manifest,
      ParseManifest(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()),
                    manifest_path.string()));

  DatasetInfo info = InfoFromManifest(manifest.common, "shard");

  std::vector<Shard> shards;
  shards.reserve(manifest.shards.size());
  for (const ManifestShard& meta : manifest.shards) {
    info.files.push_back({meta.file, meta.first_record, meta.record_count, meta.size_bytes});
    Shard& shard = shards.emplace_back();
    shard.meta = meta;
    shard.path = dir / meta.file;
    Result<MappedFile> map = MappedFile::Open(shard.path);
    if (map.ok()) {
      shard.map = std::move(map).value();
      shard.damage = ValidateShard(shard, info.fields.size());
    } else {
      shard.damage = map.status();
    }
    if (!shard.damage.ok() && !options.allow_damaged_shards) return shard.damage;
  }
  return std::unique_ptr<Reader>(new ShardReader(std::move(info), std::move(shards), options));
}

}  // namespace packrec::shard
