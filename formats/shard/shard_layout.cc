#include "shard/shard_layout.h"

#include <algorithm>
#include <cstring>

#include "core/checksum.h"
#include "core/endian.h"

namespace packrec::shard {
namespace {

bool AllZero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

template <std::size_t N>
bool MagicMatches(const std::byte* in, const std::array<unsigned char, N>& magic) {
  return std::memcmp(in, magic.data(), N) == 0;
}

}  // namespace

void EncodeHeader(const Header& header, std::span<std::byte, kHeaderSize> out) {
  std::fill(out.begin(), out.end(), std::byte{0});
  std::memcpy(out.data(), kHeaderMagic.data(), kHeaderMagic.size());
  StoreLE<std::uint32_t>(&out[8], header.format_version);
  StoreLE<std::uint32_t>(&out[12], static_cast<std::uint32_t>(kHeaderSize));
  StoreLE<std::uint32_t>(&out[16], header.shard_index);
  StoreLE<std::uint32_t>(&out[20], header.align_bytes);
  StoreLE<std::uint64_t>(&out[24], header.first_record);
  StoreLE<std::uint64_t>(&out[56], Xxh64(out.first(56)));
}

DecodeError DecodeHeader(std::span<const std::byte, kHeaderSize> in, Header* header) {
  if (!MagicMatches(in.data(), kHeaderMagic)) return DecodeError::kBadMagic;
  if (LoadLE<std::uint64_t>(&in[56]) != Xxh64(in.first(56))) return DecodeError::kBadChecksum;
  if (LoadLE<std::uint32_t>(&in[12]) != kHeaderSize || !AllZero(in.subspan(32, 24))) {
    return DecodeError::kBadReserved;
  }
  header->format_version = LoadLE<std::uint32_t>(&in[8]);
  header->shard_index = LoadLE<std::uint32_t>(&in[16]);
  header->align_bytes = LoadLE<std::uint32_t>(&in[20]);
  header->first_record = LoadLE<std::uint64_t>(&in[24]);
  return DecodeError::kNone;
}

void EncodeFooter(const Footer& footer, std::span<std::byte, kFooterSize> out) {
  StoreLE<std::uint64_t>(&out[0], footer.keys_offset);
  StoreLE<std::uint64_t>(&out[8], footer.keys_size);
  StoreLE<std::uint64_t>(&out[16], footer.index_offset);
  StoreLE<std::uint64_t>(&out[24], footer.record_count);
  StoreLE<std::uint64_t>(&out[32], footer.first_record);
  StoreLE<std::uint64_t>(&out[40], footer.metadata_xxh64);
  StoreLE<std::uint64_t>(&out[48], Xxh64(out.first(48)));
  std::memcpy(&out[56], kFooterMagic.data(), kFooterMagic.size());
}

DecodeError DecodeFooter(std::span<const std::byte, kFooterSize> in, Footer* footer) {
  if (!MagicMatches(&in[56], kFooterMagic)) return DecodeError::kBadMagic;
  if (LoadLE<std::uint64_t>(&in[48]) != Xxh64(in.first(48))) return DecodeError::kBadChecksum;
  footer->keys_offset = LoadLE<std::uint64_t>(&in[0]);
  footer->keys_size = LoadLE<std::uint64_t>(&in[8]);
  footer->index_offset = LoadLE<std::uint64_t>(&in[16]);
  footer->record_count = LoadLE<std::uint64_t>(&in[24]);
  footer->first_record = LoadLE<std::uint64_t>(&in[32]);
  footer->metadata_xxh64 = LoadLE<std::uint64_t>(&in[40]);
  return DecodeError::kNone;
}

void EncodeIndexEntry(const IndexEntry& entry, std::uint32_t version, std::span<std::byte> out) {
  std::fill(out.begin(), out.end(), std::byte{0});
  StoreLE<std::uint64_t>(&out[0], entry.offset);
  StoreLE<std::uint64_t>(&out[8], entry.stored_size);
  StoreLE<std::uint64_t>(&out[16], entry.raw_size);
  StoreLE<std::uint64_t>(&out[24], entry.checksum);
  StoreLE<std::uint32_t>(&out[32], entry.label);
  StoreLE<std::uint32_t>(&out[36], entry.key_offset);
  StoreLE<std::uint32_t>(&out[40], entry.width);
  StoreLE<std::uint32_t>(&out[44], entry.height);
  StoreLE<std::uint16_t>(&out[48], entry.key_size);
  out[50] = std::byte{entry.channels};
  out[51] = std::byte{entry.encoding};
  out[52] = std::byte{entry.compression};
  out[53] = std::byte{entry.flags};
  out[54] = std::byte{entry.subsampling};
  if (version >= 2) {
    StoreLE<std::uint64_t>(&out[56], entry.fields_offset);
    StoreLE<std::uint32_t>(&out[64], entry.fields_size);
    StoreLE<std::uint64_t>(&out[72], entry.fields_checksum);
  }
}

DecodeError DecodeIndexEntry(std::span<const std::byte> in, std::uint32_t version,
                             IndexEntry* entry) {
  if (version >= 2) {
    if (in[55] != std::byte{0} || !AllZero(in.subspan(68, 4))) return DecodeError::kBadReserved;
    entry->fields_offset = LoadLE<std::uint64_t>(&in[56]);
    entry->fields_size = LoadLE<std::uint32_t>(&in[64]);
    entry->fields_checksum = LoadLE<std::uint64_t>(&in[72]);
  } else if (!AllZero(in.subspan(55, 9))) {
    return DecodeError::kBadReserved;
  }
  entry->offset = LoadLE<std::uint64_t>(&in[0]);
  entry->stored_size = LoadLE<std::uint64_t>(&in[8]);
  entry->raw_size = LoadLE<std::uint64_t>(&in[16]);
  entry->checksum = LoadLE<std::uint64_t>(&in[24]);
  entry->label = LoadLE<std::uint32_t>(&in[32]);
  entry->key_offset = LoadLE<std::uint32_t>(&in[36]);
  entry->width = LoadLE<std::uint32_t>(&in[40]);
  entry->height = LoadLE<std::uint32_t>(&in[44]);
  entry->key_size = LoadLE<std::uint16_t>(&in[48]);
  entry->channels = static_cast<std::uint8_t>(in[50]);
  entry->encoding = static_cast<std::uint8_t>(in[51]);
  entry->compression = static_cast<std::uint8_t>(in[52]);
  entry->flags = static_cast<std::uint8_t>(in[53]);
  entry->subsampling = static_cast<std::uint8_t>(in[54]);
  return DecodeError::kNone;
}

}  // namespace packrec::shard
