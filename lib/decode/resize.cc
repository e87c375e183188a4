#include "decode/resize.h"

#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

namespace packrec {

Status ResizeRgb(const std::uint8_t* in, std::uint32_t in_width, std::uint32_t in_height,
                 std::size_t in_stride, std::uint8_t* out, std::uint32_t out_width,
                 std::uint32_t out_height) {
  // The loader runs one resize per thread of its own: OpenCV's internal threads would only
  // oversubscribe the cores.
  static std::once_flag single_threaded;
  std::call_once(single_threaded, [] { cv::setNumThreads(0); });
  constexpr double kBilinearUpTo = 1.34;
  const bool shrinks_a_lot =
      in_width > out_width * kBilinearUpTo || in_height > out_height * kBilinearUpTo;
  try {
    const cv::Mat source(static_cast<int>(in_height), static_cast<int>(in_width), CV_8UC3,
                         const_cast<std::uint8_t*>(in), in_stride);
    cv::Mat target(static_cast<int>(out_height), static_cast<int>(out_width), CV_8UC3, out);
    cv::resize(source, target, target.size(), 0, 0,
               shrinks_a_lot ? cv::INTER_AREA : cv::INTER_LINEAR);
  } catch (const cv::Exception& error) {
    return Status::Internal(std::string("resize failed: ") + error.what());
  }
  return Status::OK();
}

}  // namespace packrec
