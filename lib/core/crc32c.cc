#include "core/crc32c.h"

#include <array>
#include <cstring>

namespace packrec {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78u;  // 0x1edc6f41 bit-reversed

constexpr std::array<std::uint32_t, 256> MakeTable() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = MakeTable();

std::uint32_t Crc32cTable(std::span<const std::byte> bytes, std::uint32_t crc) {
  for (const std::byte b : bytes) {
    crc = kTable[(crc ^ static_cast<std::uint8_t>(b)) & 0xff] ^ (crc >> 8);
  }
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t Crc32cHardware(std::span<const std::byte> bytes,
                                                               std::uint32_t crc) {
  const std::byte* data = bytes.data();
  std::size_t size = bytes.size();
  std::uint64_t wide = crc;
  while (size >= 8) {
    std::uint64_t word;
    std::memcpy(&word, data, 8);
    wide = __builtin_ia32_crc32di(wide, word);
    data += 8;
    size -= 8;
  }
  auto narrow = static_cast<std::uint32_t>(wide);
  while (size > 0) {
    narrow = __builtin_ia32_crc32qi(narrow, static_cast<unsigned char>(*data));
    ++data;
    --size;
  }
  return narrow;
}

bool HasHardwareCrc() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

std::uint32_t Crc32c(std::span<const std::byte> bytes, std::uint32_t crc) {
  crc = ~crc;
#if defined(__x86_64__)
  if (HasHardwareCrc()) return ~Crc32cHardware(bytes, crc);
#endif
  return ~Crc32cTable(bytes, crc);
}

}  // namespace packrec
