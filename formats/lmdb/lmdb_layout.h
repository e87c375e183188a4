// packrec's conventions inside an LMDB environment, version 2: keys, the value layout and the
// metadata key. Specified in docs/formats/lmdb.md: change both together and bump the version.
#ifndef PACKREC_FORMATS_LMDB_LMDB_LAYOUT_H_
#define PACKREC_FORMATS_LMDB_LMDB_LAYOUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace packrec::lmdb {

// 2: the value header carries a checksum of itself and the key (header_checksum). Version 1
// datasets still read; their labels, sizes and keys are under no checksum.
// 3: records carry fields (docs/formats/fields.md), each record's field block under its own key
// right after the record's. Written only for a dataset with fields (a dataset without is version
// 2, byte for byte as before); the record values keep their version 2 header.
inline constexpr std::uint32_t kLmdbFormatVersion = 3;
inline constexpr std::uint32_t kLmdbVersionWithoutFields = 2;
// 4: the manifest's version of a dataset with WebP records (encoding 4), with or without fields
// (the manifest's `fields` says which): its keys and values are those of version 2 or 3, byte for
// byte, but readers before WebP must refuse it as *not supported*. The newest version read.
inline constexpr std::uint32_t kLmdbVersionWithWebp = 4;
inline constexpr std::uint8_t kValueHeaderVersion = 2;
// The value header version of a dataset of layout `format_version`.
constexpr std::uint32_t ValueHeaderVersionOf(std::uint32_t format_version) {
  return format_version >= 2 ? kValueHeaderVersion : 1;
}
inline constexpr char kManifestFormatName[] = "packrec-lmdb";
inline constexpr char kDataFileName[] = "data.mdb";

// Record keys: the global record index, 8 bytes big-endian, so LMDB's byte order is index order
// and a bulk load can use MDB_APPEND.
inline constexpr std::size_t kRecordKeySize = 8;
// The manifest's key: longer than a record key and starting with 0xff, so it sorts after every
// record and cannot be mistaken for one.
inline constexpr std::string_view kManifestKey =
    "\xff"
    "packrec.manifest";

inline constexpr std::array<unsigned char, 4> kValueMagic = {'P', 'K', 'R', 'V'};
inline constexpr std::size_t kValueHeaderSizeV1 = 40;
inline constexpr std::size_t kValueHeaderSize = 48;  // version 2
inline constexpr std::size_t kMaxKeyBytes = 0xffff;

enum ValueFlags : std::uint8_t {
  kValueProgressive = 1u << 0,
  kValueZstd = 1u << 1,
};

// The fixed part of a record's value; the key (path) and the stored payload follow it.
struct ValueHeader {
  std::uint8_t version = kValueHeaderVersion;
  std::uint8_t encoding = 0;
  std::uint8_t channels = 0;
  std::uint8_t flags = 0;
  std::uint32_t label = 0;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint16_t key_size = 0;
  std::uint8_t subsampling = 0;
  std::uint64_t checksum = 0;  // xxHash64 of the stored payload, seed = global record index
  std::uint64_t raw_size = 0;  // payload size after decompression
  // Version 2: XXH64 of the key with seed = XXH64 of the header's first 40 bytes with seed = the
  // global record index (ValueHeaderChecksum): a flipped label, size, flag or key byte, or a
  // value stored under another record's key, does not pass.
  std::uint64_t header_checksum = 0;
};

// Bytes of a value header of `version` (1 or 2).
constexpr std::size_t ValueHeaderSize(std::uint8_t version) {
  return version == 1 ? kValueHeaderSizeV1 : kValueHeaderSize;
}

// The version 2 header checksum over the header's first 40 bytes and the key.
std::uint64_t ValueHeaderChecksum(std::span<const std::byte> header_first_40,
                                  std::span<const std::byte> key, std::uint64_t index);

std::array<std::byte, kRecordKeySize> RecordKey(std::uint64_t index);

// Version 3: record `index`'s field block is under its record key plus one byte 0x01, so it sorts
// right after the record and before the next one (MDB_APPEND keeps working). Its value: the magic
// `PKRF`, 4 zero bytes, XXH64 of the block with seed = index, then the block.
inline constexpr std::size_t kFieldsKeySize = kRecordKeySize + 1;
inline constexpr std::array<unsigned char, 4> kFieldsMagic = {'P', 'K', 'R', 'F'};
inline constexpr std::size_t kFieldsHeaderSize = 16;
std::array<std::byte, kFieldsKeySize> FieldsKey(std::uint64_t index);
// False when `key` is not a fields key.
bool ParseFieldsKey(std::span<const std::byte> key, std::uint64_t* index);
void EncodeFieldsHeader(std::span<const std::byte> block, std::uint64_t index,
                        std::span<std::byte, kFieldsHeaderSize> out);
// False when `key` is not a record key.
bool ParseRecordKey(std::span<const std::byte> key, std::uint64_t* index);

// Writes a version 2 header for record `index` with key `key`, its header_checksum computed.
void EncodeValueHeader(const ValueHeader& header, std::span<const std::byte> key,
                       std::uint64_t index, std::span<std::byte, kValueHeaderSize> out);
// False on bad magic, a version other than 1 or 2, a value shorter than its version's header, or
// non-zero reserved bytes. The header checksum is read, not checked (ValueHeaderChecksum).
bool DecodeValueHeader(std::span<const std::byte> value, ValueHeader* header);

// Caffe Datum values (--lmdb-values caffe-datum): each value is a protobuf `caffe.Datum` with
// data (4) = the encoded image, label (5) and encoded (7) = true, exactly what Caffe's
// convert_imageset --encoded writes, so Caffe and DALI's fn.readers.caffe read it. packrec's own
// value header and key ride in field 1729, which caffe.proto does not define: protobuf parsers
// keep unknown fields aside and Caffe and DALI never look at them. Caffe reads every entry of the
// database as a Datum, so the manifest cannot be a key there (nor a named database, whose name is
// a key of the main one): it is the file kDatumManifestName beside data.mdb.
inline constexpr std::uint32_t kDatumPackrecField = 1729;
inline constexpr char kDatumManifestName[] = "packrec-manifest.json";

// The bytes before the payload (field 1729 with header and key, then field 4's tag and length)
// and after it (label and encoded).
std::vector<std::byte> DatumPrefix(std::span<const std::byte> header, std::string_view key,
                                   std::size_t payload_size);
std::vector<std::byte> DatumSuffix(std::uint32_t label);

struct DatumFields {
  std::span<const std::byte> data;     // field 4
  std::span<const std::byte> packrec;  // field 1729: value header, then the key
  std::uint64_t label = 0;
  bool has_label = false;
  bool encoded = false;
};
// Parses the protobuf wire format strictly: known wire types only, lengths inside the value, no
// field repeated. Unknown fields are skipped as protobuf does. False on anything malformed.
bool ParseDatum(std::span<const std::byte> value, DatumFields* fields);

}  // namespace packrec::lmdb

#endif  // PACKREC_FORMATS_LMDB_LMDB_LAYOUT_H_
