#include "lmdb/lmdb_layout.h"

#include <algorithm>
#include <cstring>

#include "core/endian.h"

namespace packrec::lmdb {

std::array<std::byte, kRecordKeySize> RecordKey(std::uint64_t index) {
  std::array<std::byte, kRecordKeySize> key{};
  for (std::size_t i = 0; i < kRecordKeySize; ++i) {
    key[i] = static_cast<std::byte>(index >> (8 * (kRecordKeySize - 1 - i)));
  }
  return key;
}

bool ParseRecordKey(std::span<const std::byte> key, std::uint64_t* index) {
  if (key.size() != kRecordKeySize) return false;
  std::uint64_t value = 0;
  for (std::byte b : key) value = (value << 8) | static_cast<std::uint64_t>(b);
  *index = value;
  return true;
}

void EncodeValueHeader(const ValueHeader& header, std::span<std::byte, kValueHeaderSize> out) {
  std::fill(out.begin(), out.end(), std::byte{0});
  std::memcpy(out.data(), kValueMagic.data(), kValueMagic.size());
  out[4] = std::byte{header.version};
  out[5] = std::byte{header.encoding};
  out[6] = std::byte{header.channels};
  out[7] = std::byte{header.flags};
  StoreLE<std::uint32_t>(&out[8], header.label);
  StoreLE<std::uint32_t>(&out[12], header.width);
  StoreLE<std::uint32_t>(&out[16], header.height);
  StoreLE<std::uint16_t>(&out[20], header.key_size);
  out[22] = std::byte{header.subsampling};
  StoreLE<std::uint64_t>(&out[24], header.checksum);
  StoreLE<std::uint64_t>(&out[32], header.raw_size);
}

bool DecodeValueHeader(std::span<const std::byte> value, ValueHeader* header) {
  if (value.size() < kValueHeaderSize ||
      std::memcmp(value.data(), kValueMagic.data(), kValueMagic.size()) != 0) {
    return false;
  }
  header->version = static_cast<std::uint8_t>(value[4]);
  header->encoding = static_cast<std::uint8_t>(value[5]);
  header->channels = static_cast<std::uint8_t>(value[6]);
  header->flags = static_cast<std::uint8_t>(value[7]);
  header->label = LoadLE<std::uint32_t>(&value[8]);
  header->width = LoadLE<std::uint32_t>(&value[12]);
  header->height = LoadLE<std::uint32_t>(&value[16]);
  header->key_size = LoadLE<std::uint16_t>(&value[20]);
  header->subsampling = static_cast<std::uint8_t>(value[22]);
  header->checksum = LoadLE<std::uint64_t>(&value[24]);
  header->raw_size = LoadLE<std::uint64_t>(&value[32]);
  return header->version == kLmdbFormatVersion && value[23] == std::byte{0} &&
         (header->flags & ~(kValueProgressive | kValueZstd)) == 0;
}

}  // namespace packrec::lmdb
