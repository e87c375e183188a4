// packrec's conventions inside an LMDB environment, version 1: keys, the value layout and the
// metadata key. Specified in docs/formats/lmdb.md: change both together and bump the version.
#ifndef PACKREC_FORMATS_LMDB_LMDB_LAYOUT_H_
#define PACKREC_FORMATS_LMDB_LMDB_LAYOUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace packrec::lmdb {

inline constexpr std::uint32_t kLmdbFormatVersion = 1;
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
inline constexpr std::size_t kValueHeaderSize = 40;
inline constexpr std::size_t kMaxKeyBytes = 0xffff;

enum ValueFlags : std::uint8_t {
  kValueProgressive = 1u << 0,
  kValueZstd = 1u << 1,
};

// The fixed part of a record's value; the key (path) and the stored payload follow it.
struct ValueHeader {
  std::uint8_t version = 1;
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
};

std::array<std::byte, kRecordKeySize> RecordKey(std::uint64_t index);
// False when `key` is not a record key.
bool ParseRecordKey(std::span<const std::byte> key, std::uint64_t* index);

void EncodeValueHeader(const ValueHeader& header, std::span<std::byte, kValueHeaderSize> out);
// False on bad magic, unknown version or non-zero reserved bytes.
bool DecodeValueHeader(std::span<const std::byte> value, ValueHeader* header);

}  // namespace packrec::lmdb

#endif  // PACKREC_FORMATS_LMDB_LMDB_LAYOUT_H_
