// Pixel-level codecs behind include/packrec/image.h: JPEG through libjpeg-turbo's TurboJPEG API
// (jpeg_codec.cc is the only file that includes turbojpeg.h), PNG through libpng (png_codec.cc).
#ifndef PACKREC_LIB_DECODE_CODECS_H_
#define PACKREC_LIB_DECODE_CODECS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "packrec/record.h"
#include "packrec/status.h"

namespace packrec {

// Interleaved 8-bit pixels: 1 channel (gray) or 3 (RGB), rows without padding.
struct Pixels {
  std::vector<std::uint8_t> data;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint8_t channels = 0;
};

struct JpegHeader {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint8_t channels = 0;
  Subsampling subsampling = Subsampling::kNone;
};

Result<JpegHeader> ReadJpegHeader(std::span<const std::byte> bytes);

// Decodes to gray (for grayscale JPEGs) or RGB (everything else, CMYK included), stopping on any
// libjpeg warning. With min_short_side > 0, uses libjpeg-turbo's DCT scaling to decode at the
// smallest size whose shorter side is still >= min_short_side.
Result<Pixels> DecodeJpeg(std::span<const std::byte> bytes, std::uint32_t min_short_side = 0);

struct JpegEncodeOptions {
  int quality = 90;
  Subsampling subsampling = Subsampling::k420;  // ignored for gray pixels
  bool progressive = false;
};
Result<std::vector<std::byte>> EncodeJpeg(const Pixels& pixels, const JpegEncodeOptions& options);

// Decodes to gray or RGB (alpha dropped, 16-bit reduced to 8).
Result<Pixels> DecodePng(std::span<const std::byte> bytes);

}  // namespace packrec

#endif  // PACKREC_LIB_DECODE_CODECS_H_
