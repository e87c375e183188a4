// Pixel-level codecs behind include/packrec/image.h and decode.h: JPEG through libjpeg-turbo's
// TurboJPEG API (jpeg_codec.cc is the only file that includes turbojpeg.h) and, for regions, its
// libjpeg API (jpeg_region.cc, the only one with jpeglib.h); PNG through libpng (png_codec.cc);
// WebP through libwebp (webp_codec.cc).
#ifndef PACKREC_LIB_DECODE_CODECS_H_
#define PACKREC_LIB_DECODE_CODECS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "packrec/decode.h"
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

// InvalidInput when the JPEG holds more than `max_scans` scans (start-of-scan markers, found by
// walking its segments and entropy-coded data: one pass, no decoding). Progressive files with
// thousands of scans are a known way to make libjpeg burn minutes of CPU on a few KB; TurboJPEG
// 2.1 has no scan limit of its own.
Status CheckJpegScanCount(std::span<const std::byte> bytes, int max_scans);

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

// `region` moved and cut to lie inside a width x height image, at least one pixel each way.
Rect ClampRegion(Rect region, std::uint32_t width, std::uint32_t height);

struct JpegRegionRequest {
  RegionChooser choose;  // empty: the whole image
  // The decoded region must be at least this large: the DCT scale is the smallest that covers it.
  std::uint32_t needed_width = 0;
  std::uint32_t needed_height = 0;
  DecodeLimits limits;
  // Where the pixels go when the region decodes at exactly the needed size (no resize after):
  // needed_height x needed_width x 3 bytes, or empty.
  std::span<std::uint8_t> output;
};

struct JpegRegion {
  std::uint32_t width = 0;  // of the decoded region, at the DCT scale
  std::uint32_t height = 0;
  std::uint32_t image_width = 0;  // of the whole image, from the header
  std::uint32_t image_height = 0;
  unsigned scale_num = 8;  // the DCT scale was scale_num / 8
  Rect region;             // what was asked for, clamped to the image
  bool in_output = false;  // the pixels went to request.output, not to `rgb`
};

// Decodes only request.choose's region of a JPEG (rows above it skipped, rows below never
// decoded, columns cut to the iMCUs that hold it) at the smallest DCT scale that covers the
// needed size, into request.output when it fits exactly, else into `rgb` (width x height x 3;
// gray and CMYK converted). `rows` is the caller's reusable scanline buffer.
Status DecodeJpegRegion(std::span<const std::byte> bytes, const JpegRegionRequest& request,
                        JpegRegion* result, std::vector<std::uint8_t>& rgb,
                        std::vector<std::uint8_t>& rows);

// Decodes to gray or RGB (alpha dropped, 16-bit reduced to 8).
// `max_pixels` 0: MaxImagePixels(). Checked from the header, before anything is allocated.
Result<Pixels> DecodePng(std::span<const std::byte> bytes, std::uint64_t max_pixels = 0);

// `limits`' pixel limit: its own, or the process-wide one (MaxImagePixels).
inline std::uint64_t MaxPixels(const DecodeLimits& limits) {
  return limits.max_pixels != 0 ? limits.max_pixels : MaxImagePixels();
}

// RIFF....WEBP: a WebP file (still or animated), by its first 12 bytes.
bool IsWebp(std::span<const std::byte> bytes);

struct WebpHeader {
  std::uint32_t width = 0;  // of the canvas, for an animated WebP
  std::uint32_t height = 0;
  bool has_alpha = false;
  bool animated = false;
  bool lossless = false;  // VP8L; false for lossy (VP8) and animations
};

// The header's features (libwebp's WebPGetFeatures), after checking that the file holds as many
// bytes as its RIFF header declares (a WebP cut short is refused here, not at decode time).
Result<WebpHeader> ReadWebpHeader(std::span<const std::byte> bytes);

// Decodes to RGB as PIL's Image.open(...).convert("RGB") does: alpha dropped without compositing,
// the colours as stored; an animated WebP's first frame on its canvas. `max_pixels` 0:
// MaxImagePixels(), checked from the header before anything is allocated.
Result<Pixels> DecodeWebp(std::span<const std::byte> bytes, std::uint64_t max_pixels = 0);

// Decodes only `choose`'s region of a still WebP (libwebp's cropping: rows below it are never
// decoded) into `rgb` (width x height x 3). Animated WebPs are refused: convert stores their
// first frame as a PNG.
Status DecodeWebpRegion(std::span<const std::byte> bytes, const RegionChooser& choose,
                        const DecodeLimits& limits, std::vector<std::uint8_t>& rgb,
                        std::uint32_t* width, std::uint32_t* height);

// Encodes gray or RGB pixels as a PNG (lossless), with libpng's default compression.
Result<std::vector<std::byte>> EncodePng(const Pixels& pixels);

}  // namespace packrec

#endif  // PACKREC_LIB_DECODE_CODECS_H_
