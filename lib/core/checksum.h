// xxHash64, the one checksum of packrec's formats (docs/formats/shard.md).
#ifndef PACKREC_LIB_CORE_CHECKSUM_H_
#define PACKREC_LIB_CORE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace packrec {

std::uint64_t Xxh64(std::span<const std::byte> bytes, std::uint64_t seed = 0);
std::uint64_t Xxh64(std::string_view text, std::uint64_t seed = 0);

// Incremental xxHash64, for whole files hashed while they are written.
class Xxh64Stream {
 public:
  explicit Xxh64Stream(std::uint64_t seed = 0);
  ~Xxh64Stream();
  Xxh64Stream(const Xxh64Stream&) = delete;
  Xxh64Stream& operator=(const Xxh64Stream&) = delete;
  void Update(std::span<const std::byte> bytes);
  std::uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// 16 lowercase hex digits.
std::string Hex64(std::uint64_t value);
// Parses exactly 16 lowercase hex digits, as Hex64 writes them (so a flipped case bit is an
// error, not a silent alias).
bool ParseHex64(std::string_view text, std::uint64_t* value);

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_CHECKSUM_H_
