// CRC-32C (Castagnoli), as TFRecord frames use it, and TFRecord's masking of it.
//
// Computed by Intel's ISA-L (Debian libisal-dev: crc32_iscsi is CRC-32C), which folds with
// carry-less multiplies where the CPU has them: on an AVX-512 machine about 10x the one-word-at-a-
// time SSE4.2 loop this replaced (docs/benchmarks.md), and a table where it has neither.
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
