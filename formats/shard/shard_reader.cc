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
#include "storage/manifest_json.h"
#include "storage/object_store.h"
#include "storage/payload.h"
#include "storage/range_fetcher.h"

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
// How ValidateShard reads the shard's bytes: pread locally, ranged GETs remotely.
using ReadAt = std::function<Status(std::uint64_t offset, std::span<std::byte> out)>;

// The header: magic, checksum, reserved bytes, a version this reader knows, the first record
// the manifest says.
Status CheckShardHeader(Shard& shard, const std::string& name, const ReadAt& read_at) {
  std::array<std::byte, kHeaderSize> header_bytes{};
  PACKREC_RETURN_IF_ERROR(read_at(0, header_bytes));
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
  return Status::OK();
}

// The footer against the manifest, the key table and index inside the file, and the metadata
// checksum; reads the key table and index into shard.metadata.
Status CheckShardFooter(Shard& shard, const std::string& name, std::uint64_t size,
                        const ReadAt& read_at) {
  const std::uint64_t footer_offset = size - kFooterSize;
  std::array<std::byte, kFooterSize> footer_bytes{};
  PACKREC_RETURN_IF_ERROR(read_at(footer_offset, footer_bytes));
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
  PACKREC_RETURN_IF_ERROR(read_at(footer.keys_offset, shard.metadata));
  const std::uint64_t computed = Xxh64(shard.metadata);
  if (computed != footer.metadata_xxh64) {
    return Status::Corruption(name + ": index checksum mismatch (bytes " +
                              std::to_string(footer.keys_offset) + "-" +
                              std::to_string(footer_offset - 1) + ")");
  }
  return Status::OK();
}

// Every index entry: its payload, key and field block inside the file, its sizes possible.
Status CheckIndexEntries(const Shard& shard, std::size_t field_count, const std::string& name) {
  const Footer& footer = shard.footer;
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

Status ValidateShard(Shard& shard, std::size_t field_count, std::uint64_t size,
                     const ReadAt& read_at) {
  const std::string name = shard.path.string();
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
  PACKREC_RETURN_IF_ERROR(CheckShardHeader(shard, name, read_at));
  PACKREC_RETURN_IF_ERROR(CheckShardFooter(shard, name, size, read_at));
  return CheckIndexEntries(shard, field_count, name);
}

class ShardReader final : public Reader {
 public:
  // `fetcher`: where the shards' bytes come from when the dataset is at a URL; null locally.
  ShardReader(DatasetInfo info, std::vector<Shard> shards, OpenOptions options,
              std::unique_ptr<RangeFetcher> fetcher)
      : info_(std::move(info)),
        shards_(std::move(shards)),
        options_(options),
        fetcher_(std::move(fetcher)) {
    for (const Shard& shard : shards_) shard_first_.push_back(shard.meta.first_record);
  }

  const DatasetInfo& info() const override { return info_; }

  Result<RecordView> Read(std::uint64_t index, ReadScratch& scratch) const override {
    PACKREC_ASSIGN_OR_RETURN(const Shard* shard, ShardOf(index));
    return AtRecord(fetcher_ ? ReadRemote(*shard, index, scratch)
                             : ReadFromShard(*shard, index, scratch, options_.verify_checksums),
                    index, shard->path.string());
  }

  void WillNeed(std::span<const std::uint64_t> indices) const override {
    if (!fetcher_) return;
    std::vector<WantedRange> ranges;
    ranges.reserve(indices.size() * 2);
    for (const std::uint64_t index : indices) {
      const Result<const Shard*> shard = ShardOf(index);
      if (!shard.ok()) continue;  // its Read reports the error
      AppendRanges(**shard, (*shard)->Entry(index - (*shard)->meta.first_record), index, ranges);
    }
    fetcher_->Stage(std::move(ranges));
  }

  RemoteStats remote_stats() const override {
    if (!fetcher_) return {};
    RemoteStats stats = fetcher_->store().counters();
    if (const BlockCache* cache = fetcher_->cache()) {
      const BlockCache::Counters counters = cache->counters();
      stats.cache_hits = counters.hits;
      stats.cache_fills = counters.fills;
      stats.cache_evictions = counters.evictions;
    }
    return stats;
  }

  Result<FieldView> ReadField(std::uint64_t index, std::size_t field,
                              ReadScratch& scratch) const override {
    // Field values are views into the mapping, or into scratch.field_bytes remotely.
    if (field >= info_.fields.size()) return Reader::ReadField(index, field, scratch);
    PACKREC_ASSIGN_OR_RETURN(const Shard* shard, ShardOf(index));
    const IndexEntry entry = shard->Entry(index - shard->meta.first_record);
    std::span<const std::byte> block = shard->FieldBlock(entry);
    if (fetcher_ && shard->version >= 2) {
      scratch.field_bytes.resize(entry.fields_size);
      const ObjectStore::Range range{shard->meta.file, entry.fields_offset, scratch.field_bytes};
      const Status fetched = fetcher_->Fetch({&range, 1});
      if (!fetched.ok()) return fetched.WithRecordIndex(index).WithPath(shard->path.string());
      block = scratch.field_bytes;
    }
    Result<FieldView> value =
        shard->version < 2
            ? Result<FieldView>(FieldView{})
            : DecodeFieldValue(block, info_.fields.size(), field, options_.verify_checksums);
    if (value.ok()) {
      const Status declared = CheckFieldValue(info_.fields[field], *value);
      if (!declared.ok()) {
        return Status::Corruption(
                   RecordWhere(*shard, index, shard->Key(entry), entry.fields_offset) + ": " +
                   declared.message())
            .WithRecordIndex(index)
            .WithPath(shard->path.string());
      }
    }
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
      PACKREC_RETURN_IF_ERROR(ScanShard(
          shard, std::max(begin, first), std::min(end, shard_end),
          [&](std::uint64_t index, const IndexEntry& entry, std::span<const std::byte> stored,
              std::span<const std::byte> block) {
            PACKREC_ASSIGN_OR_RETURN(
                const RecordView view,
                MakeView(shard, entry, index, stored, block, scratch, options_.verify_checksums));
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
      const std::uint64_t problems_before = stats.problems;
      const std::uint64_t first = shard.meta.first_record;
      const Status scanned = ScanShard(
          shard, first, first + shard.meta.record_count,
          [&](std::uint64_t index, const IndexEntry& entry, std::span<const std::byte> stored,
              std::span<const std::byte> block) {
            ++stats.records_checked;
            Result<RecordView> view = MakeView(shard, entry, index, stored, block, scratch, true);
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
      Result<std::uint64_t> computed = HashShard(shard);
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
  // Receives a record's stored bytes and its field block (empty without fields).
  using StoredVisitor = std::function<Status(
      std::uint64_t, const IndexEntry&, std::span<const std::byte>, std::span<const std::byte>)>;

  // Records [begin, end) of `shard` in order: streamed with pread locally, fetched in coalesced
  // ranged requests of about kRemoteScanBytes remotely.
  Status ScanShard(const Shard& shard, std::uint64_t begin, std::uint64_t end,
                   const StoredVisitor& on_record) const {
    if (!fetcher_) {
      PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(shard.path));
      return StreamShard(
          shard, *file, begin, end,
          [&](std::uint64_t index, const IndexEntry& entry, std::span<const std::byte> stored) {
            return on_record(index, entry, stored, shard.FieldBlock(entry));
          });
    }
    constexpr std::uint64_t kRemoteScanBytes = 32 << 20;
    std::vector<WantedRange> ranges;
    for (std::uint64_t chunk_begin = begin; chunk_begin < end;) {
      ranges.clear();
      std::uint64_t bytes = 0;
      std::uint64_t chunk_end = chunk_begin;
      for (; chunk_end < end && (chunk_end == chunk_begin || bytes < kRemoteScanBytes);
           ++chunk_end) {
        const IndexEntry entry = shard.Entry(chunk_end - shard.meta.first_record);
        AppendRanges(shard, entry, chunk_end, ranges);
        bytes += entry.stored_size;
      }
      const std::size_t per_record = ranges.size() / (chunk_end - chunk_begin);
      std::span<const std::byte> stored;
      PACKREC_RETURN_IF_ERROR(fetcher_->FetchNow(
          ranges, [&](std::size_t i, std::span<const std::byte> bytes_of_range) -> Status {
            if (per_record == 2 && i % 2 == 0) {
              stored = bytes_of_range;
              return Status::OK();
            }
            const std::uint64_t index = chunk_begin + i / per_record;
            const IndexEntry entry = shard.Entry(index - shard.meta.first_record);
            return per_record == 2 ? on_record(index, entry, stored, bytes_of_range)
                                   : on_record(index, entry, bytes_of_range, {});
          }));
      chunk_begin = chunk_end;
    }
    return Status::OK();
  }

  // The whole shard's xxHash64, as the manifest records it.
  Result<std::uint64_t> HashShard(const Shard& shard) const {
    if (fetcher_) return fetcher_->HashObject(ShardNumber(shard), shard.meta.size_bytes);
    PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(shard.path));
    return HashFileXxh64(*file, shard.meta.size_bytes);
  }

  std::size_t ShardNumber(const Shard& shard) const {
    return static_cast<std::size_t>(&shard - shards_.data());
  }

  bool HasFieldBlocks(const Shard& shard) const {
    return !info_.fields.empty() && shard.version >= 2;
  }

  // The byte ranges record `index` needs remotely: its stored bytes, then its field block when
  // the shard has field blocks. Keys: 2 * index and 2 * index + 1.
  void AppendRanges(const Shard& shard, const IndexEntry& entry, std::uint64_t index,
                    std::vector<WantedRange>& ranges) const {
    const std::size_t object = ShardNumber(shard);
    ranges.push_back({2 * index, object, entry.offset, entry.offset + entry.stored_size});
    if (HasFieldBlocks(shard)) {
      ranges.push_back(
          {2 * index + 1, object, entry.fields_offset, entry.fields_offset + entry.fields_size});
    }
  }

  // A record of a dataset at a URL: its stored bytes into scratch.fetched and its field block
  // into scratch.field_bytes, from what WillNeed staged or by requests now.
  Result<RecordView> ReadRemote(const Shard& shard, std::uint64_t index,
                                ReadScratch& scratch) const {
    const IndexEntry entry = shard.Entry(index - shard.meta.first_record);
    std::vector<WantedRange> ranges;
    AppendRanges(shard, entry, index, ranges);
    std::array<std::vector<std::byte>*, 2> targets{&scratch.fetched, &scratch.field_bytes};
    std::vector<ObjectStore::Range> missing;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (fetcher_->TakeStaged(ranges[i].key, *targets[i])) continue;
      targets[i]->resize(ranges[i].end - ranges[i].begin);
      missing.push_back({shard.meta.file, ranges[i].begin, *targets[i]});
    }
    if (!missing.empty()) PACKREC_RETURN_IF_ERROR(fetcher_->Fetch(missing));
    const std::span<const std::byte> block = ranges.size() == 2
                                                 ? std::span<const std::byte>(scratch.field_bytes)
                                                 : std::span<const std::byte>();
    return MakeView(shard, entry, index, scratch.fetched, block, scratch,
                    options_.verify_checksums);
  }

  // Calls `on_record` with the stored bytes of records [begin, end) of `shard`, in order,
  // streamed through pread windows (core/range_stream.h).
  using StreamVisitor =
      std::function<Status(std::uint64_t, const IndexEntry&, std::span<const std::byte>)>;
  static Status StreamShard(const Shard& shard, const RandomAccessFile& file, std::uint64_t begin,
                            std::uint64_t end, const StreamVisitor& on_record) {
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
                    shard.FieldBlock(entry), scratch, verify);
  }

  // `stored` holds the entry's stored bytes and `block` its field block, from the mapping, a
  // streamed window or a fetch.
  Result<RecordView> MakeView(const Shard& shard, const IndexEntry& entry, std::uint64_t index,
                              std::span<const std::byte> stored, std::span<const std::byte> block,
                              ReadScratch& scratch, bool verify) const {
    RecordView view;
    view.index = index;
    view.key = shard.Key(entry);
    view.label = entry.label;
    view.width = entry.width;
    view.height = entry.height;
    view.channels = entry.channels;
    view.encoding = static_cast<Encoding>(entry.encoding);
    if (const Status label = CheckLabelAgainstManifest(info_, index, view.label); !label.ok()) {
      return Status::Corruption(RecordWhere(shard, index, view.key, entry.offset) + ": " +
                                label.message())
          .WithRecordIndex(index);
    }
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
      PACKREC_RETURN_IF_ERROR(ViewFields(shard, entry, index, block, scratch, verify));
      view.fields = scratch.fields;
    }
    return view;
  }

  // The record's field block, checked when `verify`, decoded into scratch.fields.
  Status ViewFields(const Shard& shard, const IndexEntry& entry, std::uint64_t index,
                    std::span<const std::byte> block, ReadScratch& scratch, bool verify) const {
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
    Status decoded = DecodeFieldBlock(block, count, scratch.fields);
    if (decoded.ok()) decoded = CheckFieldValues(info_.fields, scratch.fields);
    if (!decoded.ok()) {
      return Status::Corruption(RecordWhere(shard, index, shard.Key(entry), entry.fields_offset) +
                                ": " + decoded.message())
          .WithByteOffset(entry.fields_offset);
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
  std::unique_ptr<RangeFetcher> fetcher_;
};

}  // namespace

namespace {

Result<Manifest> ParseManifestBytes(const std::vector<std::byte>& text, const std::string& name) {
  return ParseManifest(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                       name);
}

DatasetInfo InfoOf(const Manifest& manifest) {
  DatasetInfo info = InfoFromManifest(manifest.common, "shard");
  for (const ManifestShard& meta : manifest.shards) {
    info.files.push_back({meta.file, meta.first_record, meta.record_count, meta.size_bytes});
  }
  return info;
}

// A remote shard's header and tail (footer, index and, by a guess at the keys' size, its key
// table), fetched for every shard of the dataset in one parallel round of requests; ValidateShard
// then reads from these, and fetches anything else (long keys) with a request of its own.
struct ShardEdges {
  std::vector<std::byte> head;
  std::vector<std::byte> tail;
  std::uint64_t tail_offset = 0;
};

std::vector<ShardEdges> PlanEdges(const std::vector<ManifestShard>& metas) {
  constexpr std::uint64_t kKeyBytesGuess = 64;
  std::vector<ShardEdges> edges(metas.size());
  for (std::size_t i = 0; i < metas.size(); ++i) {
    const std::uint64_t size = metas[i].size_bytes;
    const std::uint64_t guess =
        kFooterSize + metas[i].record_count * (kMaxIndexEntrySize + kKeyBytesGuess) + 4096;
    edges[i].head.resize(std::min<std::uint64_t>(kHeaderSize, size));
    edges[i].tail_offset = size - std::min(guess, size);
    edges[i].tail.resize(size - edges[i].tail_offset);
  }
  return edges;
}

ReadAt RemoteReadAt(const ObjectStore& store, const std::string& name, const ShardEdges& edges) {
  return [&store, name, &edges](std::uint64_t offset, std::span<std::byte> out) -> Status {
    const auto from = [&](const std::vector<std::byte>& bytes, std::uint64_t start) {
      if (offset < start || offset - start > bytes.size() ||
          out.size() > bytes.size() - (offset - start)) {
        return false;
      }
      std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset - start), out.size(),
                  out.begin());
      return true;
    };
    if (from(edges.head, 0) || from(edges.tail, edges.tail_offset)) return Status::OK();
    const ObjectStore::Range range{name, offset, out};
    return store.Fetch({&range, 1});
  };
}

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
  PACKREC_ASSIGN_OR_RETURN(Manifest manifest, ParseManifestBytes(*text, manifest_path.string()));
  DatasetInfo info = InfoOf(manifest);
  std::vector<Shard> shards;
  shards.reserve(manifest.shards.size());
  for (const ManifestShard& meta : manifest.shards) {
    Shard& shard = shards.emplace_back();
    shard.meta = meta;
    shard.path = dir / meta.file;
    Result<MappedFile> map = MappedFile::Open(shard.path);
    Result<std::unique_ptr<RandomAccessFile>> file =
        map.ok() ? RandomAccessFile::Open(shard.path) : map.status();
    if (file.ok()) {
      shard.map = std::move(map).value();
      shard.damage = ValidateShard(shard, info.fields.size(), shard.map.size(),
                                   [&](std::uint64_t offset, std::span<std::byte> out) {
                                     return (*file)->ReadExact(offset, out);
                                   });
    } else {
      shard.damage = file.status();
    }
    if (!shard.damage.ok() && !options.allow_damaged_shards) return shard.damage;
  }
  return std::unique_ptr<Reader>(
      new ShardReader(std::move(info), std::move(shards), options, nullptr));
}

Result<std::unique_ptr<Reader>> OpenRemoteShardDataset(std::string_view url,
                                                       const OpenOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> store,
                           ObjectStore::ForUrl(url, options.remote));
  const std::string manifest_url = store->NameUrl(kManifestName);
  // A manifest that fails its checksum may be a body cut short on the way (a proxy that ends it
  // early and shortens Content-Length to match, which curl cannot see): fetched again, a few
  // times, before it is called corrupt.
  Result<Manifest> manifest = Status::Corruption(manifest_url + ": not fetched");
  for (int attempt = 0; attempt < 3; ++attempt) {
    Result<std::vector<std::byte>> text = store->Get(kManifestName);
    if (!text.ok()) {
      if (text.status().code() == StatusCode::kNotFound) {
        return Status::NotFound(store->url() + " is not a packrec shard dataset (no " +
                                manifest_url +
                                "; of the formats, only shard datasets are read from URLs)");
      }
      return text.status();
    }
    manifest = ParseManifestBytes(*text, manifest_url);
    if (manifest.status().code() != StatusCode::kCorruption) break;
  }
  if (!manifest.ok()) return manifest.status();
  DatasetInfo info = InfoOf(*manifest);
  std::vector<ShardEdges> edges = PlanEdges(manifest->shards);
  std::vector<ObjectStore::Range> ranges;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    ranges.push_back({manifest->shards[i].file, 0, edges[i].head});
    ranges.push_back({manifest->shards[i].file, edges[i].tail_offset, edges[i].tail});
  }
  const Status fetched = store->Fetch(ranges);
  if (!fetched.ok()) {
    if (!options.allow_damaged_shards) return fetched;
    edges = std::vector<ShardEdges>(edges.size());  // each shard fetches its own, errors apart
  }
  std::vector<Shard> shards;
  std::vector<std::string> names;
  shards.reserve(manifest->shards.size());
  for (std::size_t i = 0; i < manifest->shards.size(); ++i) {
    const ManifestShard& meta = manifest->shards[i];
    Shard& shard = shards.emplace_back();
    shard.meta = meta;
    shard.path = store->NameUrl(meta.file);
    names.push_back(meta.file);
    shard.damage = ValidateShard(shard, info.fields.size(), meta.size_bytes,
                                 RemoteReadAt(*store, meta.file, edges[i]));
    if (!shard.damage.ok() && !options.allow_damaged_shards) return shard.damage;
  }
  std::unique_ptr<BlockCache> cache;
  if (!store->options().cache_dir.empty()) {
    std::vector<BlockCache::Object> objects;
    for (const ManifestShard& meta : manifest->shards) {
      objects.push_back({meta.file, meta.size_bytes, meta.xxh64});
    }
    PACKREC_ASSIGN_OR_RETURN(cache, BlockCache::Open(store, std::move(objects)));
  }
  return std::unique_ptr<Reader>(
      new ShardReader(std::move(info), std::move(shards), options,
                      std::make_unique<RangeFetcher>(store, names, std::move(cache))));
}

}  // namespace packrec::shard
