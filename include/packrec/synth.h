// Synthetic ImageNet-like trees for demos, tests and benchmarks: real JPEGs from libjpeg-turbo.
#ifndef PACKREC_SYNTH_H_
#define PACKREC_SYNTH_H_

#include <cstdint>
#include <filesystem>

#include "packrec/status.h"

namespace packrec {

struct SynthOptions {
  std::uint32_t classes = 10;
  std::uint32_t per_class = 100;
  std::uint64_t seed = 0;
  std::uint32_t mean_width = 400;  // sizes vary +-25% around these
  std::uint32_t mean_height = 350;
};

struct SynthStats {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};

// Writes OUT/<class>/<file> JPEGs: quality 75-95, about 10% grayscale, 15% progressive, 20% 4:4:4
// (the rest 4:2:0), extensions .JPEG and .jpg mixed. The same seed gives the same bytes.
// Errors: AlreadyExists when OUT exists and is not empty, IOError.
Result<SynthStats> WriteSyntheticTree(const std::filesystem::path& out,
                                      const SynthOptions& options);

}  // namespace packrec

#endif  // PACKREC_SYNTH_H_
