// Epoch orders and the geometry of the eval and train transforms: pure functions of the options,
// the epoch and the record, so every rank and every run computes the same ones.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/random.h"
#include "packrec/loader.h"

namespace packrec {
namespace {

// Mixes the seed, the epoch and a stream id into one generator seed (SplitMix64's finalizer on
// each step, so neighbouring epochs or records give unrelated sequences).
std::uint64_t MixSeed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream) {
  SplitMix64 mix(seed);
  std::uint64_t state = mix.Next() ^ epoch;
  SplitMix64 second(state);
  state = second.Next() ^ stream;
  return SplitMix64(state).Next();
}

void Shuffle(std::vector<std::uint64_t>::iterator begin, std::vector<std::uint64_t>::iterator end,
             SplitMix64& random) {
  for (auto n = static_cast<std::uint64_t>(end - begin); n > 1; --n) {
    std::swap(begin[static_cast<std::ptrdiff_t>(n - 1)],
              begin[static_cast<std::ptrdiff_t>(random.Below(n))]);
  }
}

double Uniform(SplitMix64& random) {
  return static_cast<double>(random.Next() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
}

// round(value) clamped to [1, high].
std::uint32_t RoundClamped(double value, std::uint32_t high) {
  return static_cast<std::uint32_t>(std::clamp(std::round(value), 1.0, static_cast<double>(high)));
}

}  // namespace

std::vector<std::uint64_t> EpochOrder(std::uint64_t record_count, const LoaderOptions& options,
                                      std::uint64_t epoch) {
  std::vector<std::uint64_t> order(record_count);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  SplitMix64 random(MixSeed(options.seed, epoch, /*stream=*/0));
  if (options.shuffle == ShuffleMode::kGlobal) {
    Shuffle(order.begin(), order.end(), random);
  } else if (options.shuffle == ShuffleMode::kWindowed && record_count > 0) {
    const std::uint64_t window = std::max<std::uint32_t>(1, options.shuffle_window);
    const std::uint64_t windows = (record_count + window - 1) / window;
    std::vector<std::uint64_t> window_order(windows);
    std::iota(window_order.begin(), window_order.end(), std::uint64_t{0});
    Shuffle(window_order.begin(), window_order.end(), random);
    std::vector<std::uint64_t> windowed;
    windowed.reserve(record_count);
    for (const std::uint64_t w : window_order) {
      const std::uint64_t begin = w * window;
      const std::uint64_t end = std::min(record_count, begin + window);
      const auto first = static_cast<std::ptrdiff_t>(windowed.size());
      for (std::uint64_t i = begin; i < end; ++i) windowed.push_back(i);
      Shuffle(windowed.begin() + first, windowed.end(), random);
    }
    order = std::move(windowed);
  }
  const std::uint64_t world = std::max<std::uint32_t>(1, options.world_size);
  if (world == 1) return order;
  // Equal parts: cut to a multiple of world_size, or pad by repeating the order's start.
  std::uint64_t total =
      options.drop_last ? record_count / world * world : (record_count + world - 1) / world * world;
  for (std::uint64_t i = 0; order.size() < total && record_count > 0; ++i)
    order.push_back(order[i % record_count]);
  order.resize(total);
  std::vector<std::uint64_t> mine;
  mine.reserve(total / world);
  for (std::uint64_t i = options.rank; i < total; i += world) mine.push_back(order[i]);
  return mine;
}

Rect EvalRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options) {
  // torchvision: Resize(resize_size) on the shorter side, then CenterCrop(output_size). The crop
  // in source pixels is output_size / scale, centred.
  const double scale = static_cast<double>(options.resize_size) / std::min(width, height);
  const std::uint32_t side_w = RoundClamped(options.output_size / scale, width);
  const std::uint32_t side_h = RoundClamped(options.output_size / scale, height);
  return {(width - side_w) / 2, (height - side_h) / 2, side_w, side_h};
}

Rect TrainRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options,
                 std::uint64_t epoch, std::uint64_t record_index, bool* flip) {
  // torchvision.transforms.RandomResizedCrop.get_params, step for step.
  SplitMix64 random(MixSeed(options.seed, epoch, record_index + 1));
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(options.min_ratio);
  const double log_max = std::log(options.max_ratio);
  Rect region{0, 0, width, height};
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target =
        area * (options.min_scale + (options.max_scale - options.min_scale) * Uniform(random));
    const double ratio = std::exp(log_min + (log_max - log_min) * Uniform(random));
    const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target * ratio)));
    const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      region.width = static_cast<std::uint32_t>(w);
      region.height = static_cast<std::uint32_t>(h);
      region.y = static_cast<std::uint32_t>(random.Below(height - region.height + 1));
      region.x = static_cast<std::uint32_t>(random.Below(width - region.width + 1));
      found = true;
    }
  }
  if (!found) {  // a central crop at the nearest allowed aspect ratio
    const double ratio = static_cast<double>(width) / height;
    if (ratio < options.min_ratio) {
      region.width = width;
      region.height = RoundClamped(width / double{options.min_ratio}, height);
    } else if (ratio > options.max_ratio) {
      region.height = height;
      region.width = RoundClamped(height * double{options.max_ratio}, width);
    }
    region.x = (width - region.width) / 2;
    region.y = (height - region.height) / 2;
  }
  *flip = options.random_flip && (random.Next() >> 63) != 0;
  return region;
}

}  // namespace packrec
