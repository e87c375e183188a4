#include "core/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace packrec {

std::uint32_t Crc32c(std::span<const std::byte> bytes, std::uint32_t crc) {
  // ISA-L's iSCSI CRC is CRC-32C without the pre- and post-inversion, and takes an int length.
  crc = ~crc;
  while (!bytes.empty()) {
    const std::size_t chunk = std::min<std::size_t>(bytes.size(), INT_MAX);
    // crc32_iscsi only reads the buffer; its C signature lacks the const.
    auto* data = const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(bytes.data()));
    crc = crc32_iscsi(data, static_cast<int>(chunk), crc);
    bytes = bytes.subspan(chunk);
  }
  return ~crc;
}

}  // namespace packrec
