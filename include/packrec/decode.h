// Decoding records into caller-owned RGB buffers: what the loader does for every image, usable on
// its own. JPEG through libjpeg-turbo (DCT-domain scaling, and for crops only the rows and iMCU
// columns that hold the region are decoded), PNG through libpng. Thread-safe: every function may
// run on many threads at once, each with its own DecodeScratch.
#ifndef PACKREC_DECODE_H_
#define PACKREC_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "packrec/image.h"
#include "packrec/status.h"

namespace packrec {

// A region of an image, in the image's own pixels.
struct Rect {
  std::uint32_t x = 0;
  std::uint32_t y = 0;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  bool operator==(const Rect&) const = default;
};

// Guards against hostile files; on by default.
struct DecodeLimits {
  // width x height from the header; 0: MaxImagePixels(), the process-wide limit (image.h)
  std::uint64_t max_pixels = 0;
  int max_scans = 64;  // progressive JPEG scans (crafted files use thousands to burn CPU)
  // A libjpeg warning (truncated data, corrupt entropy segment) is an error: never a gray or
  // half-decoded image.
  bool stop_on_warning = true;
};

// Picks the region to decode once the image's size is known from its header.
using RegionChooser = std::function<Rect(std::uint32_t width, std::uint32_t height)>;

struct DecodeRequest {
  std::uint32_t out_width = 0;
  std::uint32_t out_height = 0;
  RegionChooser region;  // empty: the whole image
  bool flip_horizontal = false;
  DecodeLimits limits;
};

// Buffers one thread reuses from image to image, so steady-state decoding does not allocate.
struct DecodeScratch {
  std::vector<std::uint8_t> decoded;  // the region at the chosen DCT scale
  std::vector<std::uint8_t> rows;     // libjpeg's scanline buffer, CMYK conversion
};

// Decodes `encoded` (JPEG, PNG or still WebP), takes request.region (clamped to the image), resizes
// it to out_width x out_height (OpenCV: bilinear, or area averaging past 1.34x shrink) and writes
// RGB, rows top to bottom, into `out`, which must hold out_height x out_width x 3 bytes. Gray and
// CMYK JPEGs and gray, palette and alpha PNGs come out as RGB. InvalidInput with the decoder's
// message for a bad image; InvalidArgument for a bad request.
Status DecodeInto(std::span<const std::byte> encoded, const DecodeRequest& request,
                  std::span<std::uint8_t> out, DecodeScratch& scratch);

// Mirrors an RGB image (height x width x 3, rows packed) left to right, in place.
void FlipHorizontal(std::span<std::uint8_t> image, std::uint32_t width, std::uint32_t height);

// The image's size from its header (JPEG, PNG or WebP), without decoding.
Result<ImageInfo> ReadImageSize(std::span<const std::byte> encoded);

}  // namespace packrec

#endif  // PACKREC_DECODE_H_
