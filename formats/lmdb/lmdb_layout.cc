#include "lmdb/lmdb_layout.h"

#include <algorithm>
#include <cstring>

#include "core/checksum.h"
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

std::uint64_t ValueHeaderChecksum(std::span<const std::byte> header_first_40,
                                  std::span<const std::byte> key, std::uint64_t index) {
  // Chained rather than one hash over a copied buffer: no allocation per record on either side.
  return Xxh64(key, Xxh64(header_first_40.first(kValueHeaderSizeV1), index));
}

void EncodeValueHeader(const ValueHeader& header, std::span<const std::byte> key,
                       std::uint64_t index, std::span<std::byte, kValueHeaderSize> out) {
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
  out[4] = std::byte{kValueHeaderVersion};
  StoreLE<std::uint64_t>(&out[40], ValueHeaderChecksum(out, key, index));
}

bool DecodeValueHeader(std::span<const std::byte> value, ValueHeader* header) {
  if (value.size() < kValueHeaderSizeV1 ||
      std::memcmp(value.data(), kValueMagic.data(), kValueMagic.size()) != 0) {
    return false;
  }
  header->version = static_cast<std::uint8_t>(value[4]);
  if ((header->version != 1 && header->version != 2) ||
      value.size() < ValueHeaderSize(header->version)) {
    return false;
  }
  header->header_checksum = header->version == 2 ? LoadLE<std::uint64_t>(&value[40]) : 0;
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
  return value[23] == std::byte{0} && (header->flags & ~(kValueProgressive | kValueZstd)) == 0;
}

// A hand encoder for this one message, not libprotobuf: the Datum wire format is four fields of
// two wire types, stable since 2008, and writing it by hand keeps the payload a slice of the value
// (zero-copy on read, no per-record message object), adds no protoc step or runtime library to
// the build and to every consumer of the static library, and lets the parser below be strict about
// hostile values. The interop test checks it against Google's protobuf (python3-protobuf).
namespace {

enum WireType : std::uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void PutVarint(std::vector<std::byte>& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<std::byte>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<std::byte>(value));
}

void PutTag(std::vector<std::byte>& out, std::uint32_t field, WireType type) {
  PutVarint(out, (std::uint64_t{field} << 3) | type);
}

bool GetVarint(std::span<const std::byte> in, std::size_t* pos, std::uint64_t* value) {
  *value = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= in.size()) return false;
    const auto b = static_cast<std::uint8_t>(in[(*pos)++]);
    *value |= std::uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;  // more than 10 bytes
}

}  // namespace

std::vector<std::byte> DatumPrefix(std::span<const std::byte> header, std::string_view key,
                                   std::size_t payload_size) {
  std::vector<std::byte> out;
  out.reserve(header.size() + key.size() + 16);
  PutTag(out, kDatumPackrecField, kLengthDelimited);
  PutVarint(out, header.size() + key.size());
  out.insert(out.end(), header.begin(), header.end());
  const auto key_bytes = std::as_bytes(std::span<const char>(key.data(), key.size()));
  out.insert(out.end(), key_bytes.begin(), key_bytes.end());
  PutTag(out, 4, kLengthDelimited);
  PutVarint(out, payload_size);
  return out;
}

std::vector<std::byte> DatumSuffix(std::uint32_t label) {
  std::vector<std::byte> out;
  PutTag(out, 5, kVarint);
  PutVarint(out, label);
  PutTag(out, 7, kVarint);
  PutVarint(out, 1);
  return out;
}

bool ParseDatum(std::span<const std::byte> value, DatumFields* fields) {
  *fields = DatumFields{};
  bool seen_data = false, seen_packrec = false, seen_encoded = false;
  std::size_t pos = 0;
  while (pos < value.size()) {
    std::uint64_t tag = 0;
    if (!GetVarint(value, &pos, &tag)) return false;
    const std::uint64_t field = tag >> 3;
    if (field == 0) return false;
    switch (static_cast<WireType>(tag & 7)) {
      case kVarint: {
        std::uint64_t number = 0;
        if (!GetVarint(value, &pos, &number)) return false;
        if (field == 5) {
          if (fields->has_label) return false;
          fields->label = number;
          fields->has_label = true;
        } else if (field == 7) {
          if (seen_encoded) return false;
          fields->encoded = number != 0;
          seen_encoded = true;
        }
        break;
      }
      case kLengthDelimited: {
        std::uint64_t size = 0;
        if (!GetVarint(value, &pos, &size) || size > value.size() - pos) return false;
        const auto bytes = value.subspan(pos, static_cast<std::size_t>(size));
        pos += static_cast<std::size_t>(size);
        if (field == 4) {
          if (seen_data) return false;
          fields->data = bytes;
          seen_data = true;
        } else if (field == kDatumPackrecField) {
          if (seen_packrec) return false;
          fields->packrec = bytes;
          seen_packrec = true;
        }
        break;
      }
      case kFixed64:
        if (value.size() - pos < 8) return false;
        pos += 8;
        break;
      case kFixed32:
        if (value.size() - pos < 4) return false;
        pos += 4;
        break;
      default:
        return false;  // groups (3, 4) and unused wire types
    }
  }
  return seen_data && seen_packrec;
}

std::array<std::byte, kFieldsKeySize> FieldsKey(std::uint64_t index) {
  std::array<std::byte, kFieldsKeySize> key{};
  const auto record = RecordKey(index);
  std::copy(record.begin(), record.end(), key.begin());
  key[kRecordKeySize] = std::byte{1};
  return key;
}

bool ParseFieldsKey(std::span<const std::byte> key, std::uint64_t* index) {
  return key.size() == kFieldsKeySize && key[kRecordKeySize] == std::byte{1} &&
         ParseRecordKey(key.first(kRecordKeySize), index);
}

void EncodeFieldsHeader(std::span<const std::byte> block, std::uint64_t index,
                        std::span<std::byte, kFieldsHeaderSize> out) {
  std::fill(out.begin(), out.end(), std::byte{0});
  std::memcpy(out.data(), kFieldsMagic.data(), kFieldsMagic.size());
  StoreLE<std::uint64_t>(&out[8], Xxh64(block, /*seed=*/index));
}

}  // namespace packrec::lmdb
