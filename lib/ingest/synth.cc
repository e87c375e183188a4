// Synthetic trees: smooth gradients, shapes and noise, so JPEG sizes and decode costs resemble
// photographs more than flat test patterns do.
#include "packrec/synth.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/file_io.h"
#include "core/random.h"
#include "core/threads.h"
#include "decode/codecs.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::string ClassName(std::uint32_t index) {
  char name[16];
  std::snprintf(name, sizeof name, "n%08u", 1440764u + index * 1117u);  // WordNet-id look-alikes
  return name;
}

std::string FileName(const std::string& class_name, std::uint32_t index) {
  // ImageNet's own files end in upper-case .JPEG; mix in .jpg to exercise case-insensitive match.
  return class_name + "_" + std::to_string(index) + (index % 5 == 4 ? ".jpg" : ".JPEG");
}

Pixels Paint(SplitMix64& random, std::uint32_t width, std::uint32_t height, bool gray) {
  Pixels pixels;
  pixels.width = width;
  pixels.height = height;
  pixels.channels = gray ? 1 : 3;
  pixels.data.resize(static_cast<std::size_t>(width) * height * pixels.channels);
  int from[3];
  int to[3];
  for (int c = 0; c < 3; ++c) {
    from[c] = static_cast<int>(random.Below(256));
    to[c] = static_cast<int>(random.Below(256));
  }
  struct Shape {
    int x0, y0, x1, y1, color[3];
    bool ellipse;
  };
  std::vector<Shape> shapes(6 + random.Below(7));
  for (Shape& shape : shapes) {
    shape.x0 = static_cast<int>(random.Below(width));
    shape.y0 = static_cast<int>(random.Below(height));
    shape.x1 = shape.x0 + 10 + static_cast<int>(random.Below(width / 2));
    shape.y1 = shape.y0 + 10 + static_cast<int>(random.Below(height / 2));
    for (int& c : shape.color) c = static_cast<int>(random.Below(256));
    shape.ellipse = random.Below(2) == 0;
  }
  const int noise = 4 + static_cast<int>(random.Below(12));
  for (std::uint32_t y = 0; y < height; ++y) {
    for (std::uint32_t x = 0; x < width; ++x) {
      const int t = static_cast<int>((x + y) * 256 / (width + height));
      int rgb[3];
      for (int c = 0; c < 3; ++c) rgb[c] = from[c] + (to[c] - from[c]) * t / 256;
      for (const Shape& s : shapes) {
        const int px = static_cast<int>(x);
        const int py = static_cast<int>(y);
        if (px < s.x0 || px >= s.x1 || py < s.y0 || py >= s.y1) continue;
        if (s.ellipse) {
          const double dx = (px - (s.x0 + s.x1) / 2.0) / ((s.x1 - s.x0) / 2.0);
          const double dy = (py - (s.y0 + s.y1) / 2.0) / ((s.y1 - s.y0) / 2.0);
          if (dx * dx + dy * dy > 1.0) continue;
        }
        for (int c = 0; c < 3; ++c) rgb[c] = s.color[c];
      }
      const std::uint64_t r = random.Next();
      const std::size_t p = (static_cast<std::size_t>(y) * width + x) * pixels.channels;
      if (gray) {
        const int luma = (rgb[0] * 77 + rgb[1] * 150 + rgb[2] * 29) / 256;
        pixels.data[p] = static_cast<std::uint8_t>(
            std::clamp(luma + static_cast<int>(r % (2 * noise)) - noise, 0, 255));
      } else {
        for (int c = 0; c < 3; ++c) {
          const int n = static_cast<int>((r >> (c * 8)) % (2 * noise)) - noise;
          pixels.data[p + c] = static_cast<std::uint8_t>(std::clamp(rgb[c] + n, 0, 255));
        }
      }
    }
  }
  return pixels;
}

}  // namespace

Result<SynthStats> WriteSyntheticTree(const fs::path& out, const SynthOptions& options) {
  if (options.classes == 0 || options.per_class == 0) {
    return Status::InvalidArgument("--classes and --per-class must be at least 1");
  }
  if (options.mean_width < 16 || options.mean_height < 16 || options.mean_width > 16384 ||
      options.mean_height > 16384) {
    return Status::InvalidArgument("image size must be 16 to 16384 pixels");
  }
  std::error_code error;
  if (fs::exists(out, error) && !(fs::is_directory(out, error) && fs::is_empty(out, error))) {
    return Status::AlreadyExists(out.string() + " exists and is not an empty directory");
  }
  for (std::uint32_t c = 0; c < options.classes; ++c) {
    fs::create_directories(out / ClassName(c), error);
    if (error) return ErrnoStatus("create directory", out / ClassName(c), error.value());
  }
  const std::uint64_t total = static_cast<std::uint64_t>(options.classes) * options.per_class;
  std::atomic<std::uint64_t> next{0};
  std::atomic<std::uint64_t> bytes{0};
  std::mutex failure_mutex;
  Status failure;
  auto work = [&] {
    for (std::uint64_t i = next++; i < total; i = next++) {
      const auto c = static_cast<std::uint32_t>(i / options.per_class);
      const auto k = static_cast<std::uint32_t>(i % options.per_class);
      // Each image has its own generator, so the bytes do not depend on the thread count.
      SplitMix64 random(options.seed * 0x9e3779b97f4a7c15ull + i);
      const auto width = static_cast<std::uint32_t>(
          random.Between(options.mean_width * 3 / 4, options.mean_width * 5 / 4));
      const auto height = static_cast<std::uint32_t>(
          random.Between(options.mean_height * 3 / 4, options.mean_height * 5 / 4));
      const std::uint64_t kind = random.Below(100);
      const bool gray = kind < 10;
      JpegEncodeOptions encode;
      encode.progressive = kind >= 10 && kind < 25;
      encode.subsampling = kind >= 25 && kind < 45 ? Subsampling::k444 : Subsampling::k420;
      encode.quality = static_cast<int>(random.Between(75, 95));
      const Pixels pixels = Paint(random, width, height, gray);
      Result<std::vector<std::byte>> jpeg = EncodeJpeg(pixels, encode);
      Status status = jpeg.status();
      if (jpeg.ok()) {
        const std::string name = ClassName(c);
        status = WriteWholeFile(out / name / FileName(name, k), *jpeg, false);
        bytes += jpeg->size();
      }
      if (!status.ok()) {
        std::lock_guard lock(failure_mutex);
        if (failure.ok()) failure = status;
        next = total;
      }
    }
  };
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  // Those that start share the work; none at all is an error.
  const Status started = StartThreads(pool, threads, "packrec-synth", work);
  for (std::thread& thread : pool) thread.join();
  if (pool.empty()) return started;
  if (!failure.ok()) return failure;
  return SynthStats{total, bytes.load()};
}

}  // namespace packrec
