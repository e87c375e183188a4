// CRC-32C (Castagnoli), as TFRecord frames use it, and TFRecord's masking of it.
//
// Hand-written: Debian 12 packages no CRC-32C library (google/crc32c is not in bookworm, zlib
// has only the IEEE polynomial). x86-64 CPUs with SSE4.2 compute it in hardware; elsewhere a
// table does, slower but the same result.
#ifndef PACKREC_LIB_CORE_CRC32C_H_
#define PACKREC_LIB_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace packrec {

// Extends `crc` (0 to start) over `bytes`.
std::uint32_t Crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// TFRecord's masked CRC: rotate right by 15 and add 0xa282ead8, so a CRC of data holding CRCs is
// not trivially zero.
inline std::uint32_t MaskCrc32c(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_CRC32C_H_
