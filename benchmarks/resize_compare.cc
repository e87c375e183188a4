// Resizers from Debian side by side on the loader's typical job (an RGB region a little larger
// than the output, after DCT scaling, down to 224 x 224): time per image, and PSNR against an
// exact area-average reference so that speed is compared at known quality.
//   g++ -O2 -std=c++20 benchmarks/resize_compare.cc -I/usr/include/opencv4 -lopencv_imgproc \
//       -lopencv_core -lswscale -lavutil -lstb -o resize_compare && ./resize_compare
#include <stb_image_resize.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

extern "C" {
#include <libswscale/swscale.h>
}

namespace {

struct Case {
  int in_w, in_h, out_w, out_h;
};

// A smooth image with some texture, like a decoded photo (noise alone would favour blurring).
std::vector<std::uint8_t> MakeImage(int w, int h, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::uint8_t> image(static_cast<std::size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = 128 + 60 * std::sin(x * 0.07 * (c + 1)) * std::cos(y * 0.05) +
                         static_cast<double>(random() % 24);
        image[(static_cast<std::size_t>(y) * w + x) * 3 + c] =
            static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return image;
}

// Exact area average (box filter over the covered source area): the reference.
std::vector<double> Reference(const std::vector<std::uint8_t>& in, const Case& k) {
  std::vector<double> out(static_cast<std::size_t>(k.out_w) * k.out_h * 3);
  const double sx = static_cast<double>(k.in_w) / k.out_w,
               sy = static_cast<double>(k.in_h) / k.out_h;
  for (int oy = 0; oy < k.out_h; ++oy)
    for (int ox = 0; ox < k.out_w; ++ox)
      for (int c = 0; c < 3; ++c) {
        double sum = 0, weight = 0;
        const double x0 = ox * sx, x1 = x0 + sx, y0 = oy * sy, y1 = y0 + sy;
        for (int y = static_cast<int>(y0); y < std::min<double>(std::ceil(y1), k.in_h); ++y)
          for (int x = static_cast<int>(x0); x < std::min<double>(std::ceil(x1), k.in_w); ++x) {
            const double wx = std::min<double>(x + 1, x1) - std::max<double>(x, x0);
            const double wy = std::min<double>(y + 1, y1) - std::max<double>(y, y0);
            sum += wx * wy * in[(static_cast<std::size_t>(y) * k.in_w + x) * 3 + c];
            weight += wx * wy;
          }
        out[(static_cast<std::size_t>(oy) * k.out_w + ox) * 3 + c] = sum / weight;
      }
  return out;
}

double Psnr(const std::vector<std::uint8_t>& out, const std::vector<double>& reference) {
  double mse = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    mse += (out[i] - reference[i]) * (out[i] - reference[i]);
  mse /= static_cast<double>(out.size());
  return 10 * std::log10(255.0 * 255.0 / std::max(mse, 1e-9));
}

using Resizer = std::function<void(const std::uint8_t*, const Case&, std::uint8_t*)>;

}  // namespace

int main() {
  const std::vector<Case> cases = {{256, 256, 224, 224},
                                   {300, 260, 224, 224},
                                   {420, 390, 224, 224},
                                   {447, 383, 224, 224},
                                   {180, 150, 224, 224}};
  SwsContext* cached = nullptr;
  const std::vector<std::pair<const char*, Resizer>> resizers = {
      {"stb_image_resize (Mitchell)",
       [](const std::uint8_t* in, const Case& k, std::uint8_t* out) {
         stbir_resize_uint8(in, k.in_w, k.in_h, 0, out, k.out_w, k.out_h, 0, 3);
       }},
      {"OpenCV INTER_LINEAR",
       [](const std::uint8_t* in, const Case& k, std::uint8_t* out) {
         const cv::Mat src(k.in_h, k.in_w, CV_8UC3, const_cast<std::uint8_t*>(in));
         cv::Mat dst(k.out_h, k.out_w, CV_8UC3, out);
         cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
       }},
      {"OpenCV INTER_AREA",
       [](const std::uint8_t* in, const Case& k, std::uint8_t* out) {
         const cv::Mat src(k.in_h, k.in_w, CV_8UC3, const_cast<std::uint8_t*>(in));
         cv::Mat dst(k.out_h, k.out_w, CV_8UC3, out);
         cv::resize(src, dst, dst.size(), 0, 0, cv::INTER_AREA);
       }},
      {"libswscale SWS_BILINEAR (context per size)",
       [&cached](const std::uint8_t* in, const Case& k, std::uint8_t* out) {
         cached = sws_getCachedContext(cached, k.in_w, k.in_h, AV_PIX_FMT_RGB24, k.out_w, k.out_h,
                                       AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
         const int in_stride = k.in_w * 3, out_stride = k.out_w * 3;
         sws_scale(cached, &in, &in_stride, 0, k.in_h, &out, &out_stride);
       }},
  };
  cv::setNumThreads(1);
  std::printf(
      "| resizer | µs per image (mean of the cases) | PSNR vs area average, dB (min of the cases) "
      "|\n|---|---|---|\n");
  for (const auto& [name, resize] : resizers) {
    double total_us = 0, worst_psnr = 1e9;
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      const auto in = MakeImage(k.in_w, k.in_h, static_cast<unsigned>(c));
      std::vector<std::uint8_t> out(static_cast<std::size_t>(k.out_w) * k.out_h * 3);
      resize(in.data(), k, out.data());
      const double psnr = Psnr(out, Reference(in, k));
      if (std::getenv("PER_CASE")) std::printf("  %s %dx%d: %.1f dB\n", name, k.in_w, k.in_h, psnr);
      worst_psnr = std::min(worst_psnr, psnr);
      // Sizes change from image to image in a loader (random crops): alternate two sizes.
      Case other = k;
      other.in_w -= 1;
      const int rounds = 400;
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < rounds; ++r) resize(in.data(), (r & 1) ? other : k, out.data());
      total_us +=
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          rounds;
    }
    std::printf("| %s | %.0f | %.1f |\n", name, total_us / static_cast<double>(cases.size()),
                worst_psnr);
  }
  sws_freeContext(cached);
  return 0;
}
