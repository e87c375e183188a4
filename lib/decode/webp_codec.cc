// WebP through libwebp (Debian's libwebp-dev): still images with its decoder, animated ones'
// first frame with its demuxer's animation decoder, as PIL opens them. The only file that
// includes webp/decode.h and webp/demux.h.
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "core/endian.h"
#include "decode/codecs.h"
#include "packrec/image.h"

namespace packrec {
namespace {

// RIFF header (12 bytes) plus the first chunk's header (8): what WebPGetFeatures needs at least.
constexpr std::size_t kRiffHeaderSize = 12;

const std::uint8_t* Data(std::span<const std::byte> bytes) {
  return reinterpret_cast<const std::uint8_t*>(bytes.data());
}

std::string StatusText(VP8StatusCode code) {
  switch (code) {
    case VP8_STATUS_OK:
      return "ok";
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
      return "suspended";
    case VP8_STATUS_USER_ABORT:
      return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "truncated (not enough data)";
  }
  return "libwebp status " + std::to_string(static_cast<int>(code));
}

Status CheckLimit(const WebpHeader& header, std::uint64_t max_pixels) {
  if (max_pixels == 0) max_pixels = MaxImagePixels();
  if (std::uint64_t{header.width} * header.height > max_pixels) {
    return Status::InvalidInput("WebP of " + std::to_string(header.width) + "x" +
                                std::to_string(header.height) + " exceeds the pixel limit");
  }
  return Status::OK();
}

struct AnimDecoderDeleter {
  void operator()(WebPAnimDecoder* decoder) const { WebPAnimDecoderDelete(decoder); }
};

// The first frame of an animated WebP on its canvas, as PIL's WebPImagePlugin shows frame 0: the
// demuxer's animation decoder in non-premultiplied RGBA, the alpha then dropped.
Result<Pixels> DecodeFirstFrame(std::span<const std::byte> bytes, const WebpHeader& header) {
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) return Status::Internal("libwebp version mismatch");
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  const WebPData data{Data(bytes), bytes.size()};
  std::unique_ptr<WebPAnimDecoder, AnimDecoderDeleter> decoder(WebPAnimDecoderNew(&data, &options));
  if (decoder == nullptr) return Status::InvalidInput("animated WebP does not decode");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(decoder.get(), &info) || info.canvas_width != header.width ||
      info.canvas_height != header.height) {
    return Status::InvalidInput("animated WebP with an inconsistent canvas");
  }
  std::uint8_t* canvas = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(decoder.get(), &canvas, &timestamp) || canvas == nullptr) {
    return Status::InvalidInput("animated WebP: its first frame does not decode");
  }
  Pixels pixels;
  pixels.width = header.width;
  pixels.height = header.height;
  pixels.channels = 3;
  const std::size_t count = std::size_t{header.width} * header.height;
  pixels.data.resize(count * 3);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(&pixels.data[3 * i], canvas + 4 * i, 3);
  return pixels;
}

// Decodes `region` of a still WebP as RGB into `out` (region.width x region.height x 3). libwebp
// crops from an even corner (it rounds crop_left and crop_top down), and its chroma upsampling
// treats the crop's edges as the image's: so the crop reaches kCropMargin pixels past the region
// on every side (inside the image), and the copy keeps only the region, whose pixels are then
// those of the whole image decoded.
Status DecodeStill(std::span<const std::byte> bytes, Rect region, std::uint32_t image_width,
                   std::uint32_t image_height, std::uint8_t* out) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return Status::Internal("libwebp version mismatch");
  constexpr std::uint32_t kCropMargin = 2;  // one chroma sample of 4:2:0
  const std::uint32_t left = region.x > kCropMargin ? (region.x - kCropMargin) & ~1u : 0;
  const std::uint32_t top = region.y > kCropMargin ? (region.y - kCropMargin) & ~1u : 0;
  const std::uint32_t right = std::min(image_width, region.x + region.width + kCropMargin);
  const std::uint32_t bottom = std::min(image_height, region.y + region.height + kCropMargin);
  const bool crop = left > 0 || top > 0 || right < image_width || bottom < image_height;
  const std::uint32_t crop_width = right - left;
  const std::uint32_t crop_height = bottom - top;
  std::vector<std::uint8_t> cropped;
  if (crop) {
    config.options.use_cropping = 1;
    config.options.crop_left = static_cast<int>(left);
    config.options.crop_top = static_cast<int>(top);
    config.options.crop_width = static_cast<int>(crop_width);
    config.options.crop_height = static_cast<int>(crop_height);
  }
  config.output.colorspace = MODE_RGB;  // alpha dropped, colours as stored: PIL's convert("RGB")
  config.output.is_external_memory = 1;
  const bool direct = !crop && region.width == image_width && region.height == image_height;
  if (!direct) cropped.resize(std::size_t{crop_width} * crop_height * 3);
  config.output.u.RGBA.rgba = direct ? out : cropped.data();
  config.output.u.RGBA.stride = static_cast<int>(crop_width * 3);
  config.output.u.RGBA.size = std::size_t{crop_width} * crop_height * 3;
  const VP8StatusCode code = WebPDecode(Data(bytes), bytes.size(), &config);
  if (code != VP8_STATUS_OK) {
    return Status::InvalidInput("WebP does not decode: " + StatusText(code));
  }
  if (!direct) {
    for (std::uint32_t y = 0; y < region.height; ++y) {
      std::memcpy(
          out + std::size_t{y} * region.width * 3,
          cropped.data() + (std::size_t{y + region.y - top} * crop_width + (region.x - left)) * 3,
          std::size_t{region.width} * 3);
    }
  }
  return Status::OK();
}

}  // namespace

bool IsWebp(std::span<const std::byte> bytes) {
  return bytes.size() >= kRiffHeaderSize && std::memcmp(bytes.data(), "RIFF", 4) == 0 &&
         std::memcmp(bytes.data() + 8, "WEBP", 4) == 0;
}

Result<WebpHeader> ReadWebpHeader(std::span<const std::byte> bytes) {
  if (!IsWebp(bytes)) return Status::InvalidInput("not a WebP (no RIFF/WEBP header)");
  // The RIFF size counts every byte after its own field: a file shorter than that was cut short,
  // which WebPGetFeatures (it reads the first chunks only) would not notice.
  const std::uint64_t riff_end = std::uint64_t{LoadLE<std::uint32_t>(bytes.data() + 4)} + 8;
  if (riff_end > bytes.size()) {
    return Status::InvalidInput("truncated WebP: its RIFF header declares " +
                                std::to_string(riff_end) + " bytes, the file has " +
                                std::to_string(bytes.size()));
  }
  WebPBitstreamFeatures features;
  const VP8StatusCode code = WebPGetFeatures(Data(bytes), bytes.size(), &features);
  if (code != VP8_STATUS_OK) {
    return Status::InvalidInput("WebP header does not parse: " + StatusText(code));
  }
  if (features.width <= 0 || features.height <= 0) {
    return Status::InvalidInput("WebP declares an impossible size");
  }
  WebpHeader header;
  header.width = static_cast<std::uint32_t>(features.width);
  header.height = static_cast<std::uint32_t>(features.height);
  header.has_alpha = features.has_alpha != 0;
  header.animated = features.has_animation != 0;
  header.lossless = features.format == 2;
  return header;
}

Result<Pixels> DecodeWebp(std::span<const std::byte> bytes, std::uint64_t max_pixels) {
  PACKREC_ASSIGN_OR_RETURN(const WebpHeader header, ReadWebpHeader(bytes));
  PACKREC_RETURN_IF_ERROR(CheckLimit(header, max_pixels));
  if (header.animated) return DecodeFirstFrame(bytes, header);
  Pixels pixels;
  pixels.width = header.width;
  pixels.height = header.height;
  pixels.channels = 3;
  pixels.data.resize(std::size_t{header.width} * header.height * 3);
  PACKREC_RETURN_IF_ERROR(DecodeStill(bytes, Rect{0, 0, header.width, header.height}, header.width,
                                      header.height, pixels.data.data()));
  return pixels;
}

Status DecodeWebpRegion(std::span<const std::byte> bytes, const RegionChooser& choose,
                        const DecodeLimits& limits, std::vector<std::uint8_t>& rgb,
                        std::uint32_t* width, std::uint32_t* height) {
  PACKREC_ASSIGN_OR_RETURN(const WebpHeader header, ReadWebpHeader(bytes));
  PACKREC_RETURN_IF_ERROR(CheckLimit(header, MaxPixels(limits)));
  if (header.animated) {
    return Status::InvalidInput(
        "animated WebP: packrec stores still images (convert keeps the first frame, as a PNG)");
  }
  const Rect region = ClampRegion(
      choose ? choose(header.width, header.height) : Rect{0, 0, header.width, header.height},
      header.width, header.height);
  rgb.resize(std::size_t{region.width} * region.height * 3);
  PACKREC_RETURN_IF_ERROR(DecodeStill(bytes, region, header.width, header.height, rgb.data()));
  *width = region.width;
  *height = region.height;
  return Status::OK();
}

}  // namespace packrec
