#include "core/checksum.h"

#include <cstdio>

// Inlined so the hash of every record read is a direct, fully optimised call; this is the only
// file that includes xxhash.h.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace packrec {

std::uint64_t Xxh64(std::span<const std::byte> bytes, std::uint64_t seed) {
  return XXH64(bytes.data(), bytes.size(), seed);
}

std::uint64_t Xxh64(std::string_view text, std::uint64_t seed) {
  return XXH64(text.data(), text.size(), seed);
}

struct Xxh64Stream::State {
  XXH64_state_t state;
};

Xxh64Stream::Xxh64Stream(std::uint64_t seed) : state_(std::make_unique<State>()) {
  XXH64_reset(&state_->state, seed);
}

Xxh64Stream::~Xxh64Stream() = default;

void Xxh64Stream::Update(std::span<const std::byte> bytes) {
  XXH64_update(&state_->state, bytes.data(), bytes.size());
}

std::uint64_t Xxh64Stream::Digest() const { return XXH64_digest(&state_->state); }

std::string Hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool ParseHex64(std::string_view text, std::uint64_t* value) {
  if (text.size() != 16) return false;
  std::uint64_t result = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    result = (result << 4) | static_cast<std::uint64_t>(digit);
  }
  *value = result;
  return true;
}

}  // namespace packrec
