// SplitMix64: a tiny generator whose sequence is fixed by its definition. std::mt19937 is fixed
// too, but the std distributions are not (they differ between standard libraries), and shuffles
// and synthetic data must be the same everywhere for a given seed.
#ifndef PACKREC_LIB_CORE_RANDOM_H_
#define PACKREC_LIB_CORE_RANDOM_H_

#include <cstdint>

namespace packrec {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound) without modulo bias (rejects the incomplete last block).
  // REQUIRES: bound > 0.
  std::uint64_t Below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const std::uint64_t r = Next();
      if (r >= threshold) return r % bound;
    }
  }

  // Uniform in [low, high]. REQUIRES: low <= high.
  std::int64_t Between(std::int64_t low, std::int64_t high) {
    return low + static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(high - low) + 1));
  }

 private:
  std::uint64_t state_;
};

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_RANDOM_H_
