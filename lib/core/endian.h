// Little-endian loads and stores for on-disk fields, independent of the host's byte order.
#ifndef PACKREC_LIB_CORE_ENDIAN_H_
#define PACKREC_LIB_CORE_ENDIAN_H_

#include <cstddef>
#include <cstdint>

namespace packrec {

template <typename T>
inline void StoreLE(std::byte* out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::byte>(static_cast<std::uint64_t>(value) >> (8 * i));
  }
}

template <typename T>
inline T LoadLE(const std::byte* in) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  }
  return static_cast<T>(value);
}

inline std::uint32_t LoadBE32(const std::byte* in) {
  return (static_cast<std::uint32_t>(in[0]) << 24) | (static_cast<std::uint32_t>(in[1]) << 16) |
         (static_cast<std::uint32_t>(in[2]) << 8) | static_cast<std::uint32_t>(in[3]);
}

inline std::uint16_t LoadBE16(const std::byte* in) {
  return static_cast<std::uint16_t>((static_cast<unsigned>(in[0]) << 8) |
                                    static_cast<unsigned>(in[1]));
}

constexpr std::uint64_t AlignUp(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_ENDIAN_H_
