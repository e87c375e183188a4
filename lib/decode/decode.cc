#include "packrec/decode.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "decode/codecs.h"
#include "decode/resize.h"

namespace packrec {
namespace {

bool IsJpeg(std::span<const std::byte> bytes) {
  return bytes.size() >= 3 && bytes[0] == std::byte{0xFF} && bytes[1] == std::byte{0xD8} &&
         bytes[2] == std::byte{0xFF};
}

// PNG has no region decoding: decode it whole, then copy the region out as RGB.
Status DecodePngRegion(std::span<const std::byte> bytes, const DecodeRequest& request,
                       std::vector<std::uint8_t>& rgb, std::uint32_t* width,
                       std::uint32_t* height) {
  PACKREC_ASSIGN_OR_RETURN(const Pixels pixels, DecodePng(bytes, MaxPixels(request.limits)));
  if (std::uint64_t{pixels.width} * pixels.height > MaxPixels(request.limits)) {
    return Status::InvalidInput("PNG of " + std::to_string(pixels.width) + "x" +
                                std::to_string(pixels.height) + " exceeds the pixel limit");
  }
  const Rect region = ClampRegion(request.region ? request.region(pixels.width, pixels.height)
                                                 : Rect{0, 0, pixels.width, pixels.height},
                                  pixels.width, pixels.height);
  rgb.resize(std::size_t{region.width} * region.height * 3);
  for (std::uint32_t y = 0; y < region.height; ++y) {
    const std::uint8_t* source =
        pixels.data.data() +
        (std::size_t{region.y + y} * pixels.width + region.x) * pixels.channels;
    std::uint8_t* target = rgb.data() + std::size_t{y} * region.width * 3;
    if (pixels.channels == 3) {
      std::memcpy(target, source, std::size_t{region.width} * 3);
    } else {
      for (std::uint32_t x = 0; x < region.width; ++x)
        target[3 * x] = target[3 * x + 1] = target[3 * x + 2] = source[x];
    }
  }
  *width = region.width;
  *height = region.height;
  return Status::OK();
}

}  // namespace

Rect ClampRegion(Rect region, std::uint32_t width, std::uint32_t height) {
  region.x = std::min(region.x, width - 1);
  region.y = std::min(region.y, height - 1);
  region.width = std::clamp<std::uint32_t>(region.width, 1, width - region.x);
  region.height = std::clamp<std::uint32_t>(region.height, 1, height - region.y);
  return region;
}

void FlipHorizontal(std::span<std::uint8_t> image, std::uint32_t width, std::uint32_t height) {
  for (std::uint32_t y = 0; y < height; ++y) {
    std::uint8_t* row = image.data() + std::size_t{y} * width * 3;
    for (std::uint32_t left = 0, right = width - 1; left < right; ++left, --right) {
      for (int c = 0; c < 3; ++c) std::swap(row[3 * left + c], row[3 * right + c]);
    }
  }
}

Status DecodeInto(std::span<const std::byte> encoded, const DecodeRequest& request,
                  std::span<std::uint8_t> out, DecodeScratch& scratch) {
  if (request.out_width == 0 || request.out_height == 0 ||
      std::uint64_t{request.out_width} * request.out_height > MaxImagePixels()) {
    return Status::InvalidArgument("output size " + std::to_string(request.out_width) + "x" +
                                   std::to_string(request.out_height) + " is empty or too large");
  }
  const std::size_t out_bytes = std::size_t{request.out_width} * request.out_height * 3;
  if (out.size() != out_bytes) {
    return Status::InvalidArgument("output buffer holds " + std::to_string(out.size()) +
                                   " bytes, " + std::to_string(out_bytes) + " needed");
  }
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  if (IsJpeg(encoded)) {
    JpegRegionRequest jpeg;
    jpeg.choose = request.region;
    jpeg.needed_width = request.out_width;
    jpeg.needed_height = request.out_height;
    jpeg.limits = request.limits;
    jpeg.output = out;
    JpegRegion region;
    PACKREC_RETURN_IF_ERROR(
        DecodeJpegRegion(encoded, jpeg, &region, scratch.decoded, scratch.rows));
    if (region.in_output) {
      if (request.flip_horizontal) FlipHorizontal(out, request.out_width, request.out_height);
      return Status::OK();
    }
    width = region.width;
    height = region.height;
  } else if (IsWebp(encoded)) {
    PACKREC_RETURN_IF_ERROR(DecodeWebpRegion(encoded, request.region, request.limits,
                                             scratch.decoded, &width, &height));
  } else {
    PACKREC_ASSIGN_OR_RETURN(const ImageInfo info, ProbeImage(encoded));  // names what it is
    if (info.encoding != Encoding::kPng) {
      return Status::InvalidInput("not a JPEG, PNG or WebP");
    }
    PACKREC_RETURN_IF_ERROR(DecodePngRegion(encoded, request, scratch.decoded, &width, &height));
  }
  if (width == request.out_width && height == request.out_height) {
    std::memcpy(out.data(), scratch.decoded.data(), out_bytes);
  } else {
    PACKREC_RETURN_IF_ERROR(ResizeRgb(scratch.decoded.data(), width, height, std::size_t{width} * 3,
                                      out.data(), request.out_width, request.out_height));
  }
  if (request.flip_horizontal) FlipHorizontal(out, request.out_width, request.out_height);
  return Status::OK();
}

Result<ImageInfo> ReadImageSize(std::span<const std::byte> encoded) { return ProbeImage(encoded); }

}  // namespace packrec
