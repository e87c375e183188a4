// The loader's resizer: OpenCV's imgproc (the only file that includes OpenCV is resize.cc).
#ifndef PACKREC_LIB_DECODE_RESIZE_H_
#define PACKREC_LIB_DECODE_RESIZE_H_

#include <cstddef>
#include <cstdint>

#include "packrec/status.h"

namespace packrec {

// Resizes an RGB image (rows `in_stride` bytes apart) to out_width x out_height, rows packed.
// Bilinear while the image shrinks by at most 1.34x in both directions (as good as a Mitchell
// filter there, 17x faster), area averaging beyond (no aliasing). Measured in
// benchmarks/resize_compare.cc; docs/benchmarks.md has the table.
Status ResizeRgb(const std::uint8_t* in, std::uint32_t in_width, std::uint32_t in_height,
                 std::size_t in_stride, std::uint8_t* out, std::uint32_t out_width,
                 std::uint32_t out_height);

}  // namespace packrec

#endif  // PACKREC_LIB_DECODE_RESIZE_H_
