// The byte layout of a packrec shard file, versions 1 and 2. The specification, with field tables
// and a hexdump, is docs/formats/shard.md: change both together and bump kShardFormatVersion.
#ifndef PACKREC_FORMATS_SHARD_SHARD_LAYOUT_H_
#define PACKREC_FORMATS_SHARD_SHARD_LAYOUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace packrec::shard {

// The newest version this code reads and writes. Version 2 adds record fields (a field region and
// 80-byte index entries); a dataset without fields is written as version 1, byte for byte as
// before, so that readers older than fields still read it.
inline constexpr std::uint32_t kShardFormatVersion = 2;
inline constexpr std::uint32_t kShardVersionWithoutFields = 1;
// The manifest's format_version of a dataset with WebP records (encoding 4): its shard files are
// of version 1 or 2, byte for byte, but readers before WebP must refuse the dataset as *not
// supported* rather than call its index entries corrupt. The newest manifest version read.
inline constexpr std::uint32_t kShardVersionWithWebp = 3;

// PNG-style: the high-bit first byte catches 7-bit transfers, CR LF and LF catch line-ending
// conversion, 0x1a stops `type` on DOS.
inline constexpr std::array<unsigned char, 8> kHeaderMagic = {0x89, 'P',  'K',  'R',
                                                              '\r', '\n', 0x1a, '\n'};
inline constexpr std::array<unsigned char, 8> kFooterMagic = {'P', 'K', 'R', '-',
                                                              'E', 'N', 'D', '\n'};

inline constexpr std::size_t kHeaderSize = 64;
inline constexpr std::size_t kFooterSize = 64;
inline constexpr std::size_t kIndexEntrySizeV1 = 64;
inline constexpr std::size_t kIndexEntrySizeV2 = 80;
inline constexpr std::size_t kMaxIndexEntrySize = kIndexEntrySizeV2;
constexpr std::size_t IndexEntrySize(std::uint32_t version) {
  return version >= 2 ? kIndexEntrySizeV2 : kIndexEntrySizeV1;
}
inline constexpr std::size_t kIndexAlignment = 8;
inline constexpr std::size_t kMaxKeyBytes = 0xffff;
inline constexpr std::uint32_t kMaxAlignBytes = 1u << 20;

inline constexpr char kManifestName[] = "manifest.json";
inline constexpr char kManifestFormatName[] = "packrec-shard";

struct Header {
  std::uint32_t format_version = kShardFormatVersion;
  std::uint32_t shard_index = 0;
  std::uint32_t align_bytes = 64;
  std::uint64_t first_record = 0;
};

struct Footer {
  std::uint64_t keys_offset = 0;
  std::uint64_t keys_size = 0;
  std::uint64_t index_offset = 0;
  std::uint64_t record_count = 0;
  std::uint64_t first_record = 0;
  std::uint64_t metadata_xxh64 = 0;  // over [keys_offset, file size - 64)
};

enum EntryFlags : std::uint8_t {
  kFlagProgressive = 1u << 0,
};

struct IndexEntry {
  std::uint64_t offset = 0;
  std::uint64_t stored_size = 0;
  std::uint64_t raw_size = 0;
  std::uint64_t checksum = 0;  // xxHash64 of the stored bytes, seed = global record index
  std::uint32_t label = 0;
  std::uint32_t key_offset = 0;  // relative to Footer::keys_offset
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint16_t key_size = 0;
  std::uint8_t channels = 0;
  std::uint8_t encoding = 0;
  std::uint8_t compression = 0;
  std::uint8_t flags = 0;
  std::uint8_t subsampling = 0;
  // Version 2: the record's field block (storage/field_block.h) in the field region, and its
  // XXH64 with seed = global record index. fields_size 0: the dataset has no fields.
  std::uint64_t fields_offset = 0;
  std::uint32_t fields_size = 0;
  std::uint64_t fields_checksum = 0;
};

void EncodeHeader(const Header& header, std::span<std::byte, kHeaderSize> out);
void EncodeFooter(const Footer& footer, std::span<std::byte, kFooterSize> out);
// `out` is IndexEntrySize(version) bytes.
void EncodeIndexEntry(const IndexEntry& entry, std::uint32_t version, std::span<std::byte> out);

// Decoders check magic and checksums; they do not check fields against the file's size.
enum class DecodeError { kNone, kBadMagic, kBadChecksum, kBadReserved };
DecodeError DecodeHeader(std::span<const std::byte, kHeaderSize> in, Header* header);
DecodeError DecodeFooter(std::span<const std::byte, kFooterSize> in, Footer* footer);
DecodeError DecodeIndexEntry(std::span<const std::byte> in, std::uint32_t version,
                             IndexEntry* entry);

}  // namespace packrec::shard

#endif  // PACKREC_FORMATS_SHARD_SHARD_LAYOUT_H_
