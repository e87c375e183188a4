// Image header probing and the checks convert and verify run on encoded images.
// Thread-safe: every function may be called from many threads at once.
#ifndef PACKREC_IMAGE_H_
#define PACKREC_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "packrec/record.h"
#include "packrec/status.h"

namespace packrec {

// The ceiling of the pixel limit (width x height): 16384 x 16384.
inline constexpr std::uint64_t kMaxImagePixels = 1ull << 28;
// The pixel limit's default: PIL's (torchvision's) DecompressionBombError threshold, 2 x
// Image.MAX_IMAGE_PIXELS, about 13,377 x 13,377 and 537 MB of RGB. An image over it is refused
// from its header, before anything is allocated: a 783 KB PNG of 16384 x 16384 took 8-19 s and
// 0.8-1.6 GB to decode under the old limit (the ceiling).
inline constexpr std::uint64_t kDefaultMaxImagePixels = 178'956'970;

// The pixel limit every probe and decoder applies, process-wide (like PIL's
// Image.MAX_IMAGE_PIXELS): kDefaultMaxImagePixels, or the environment's PACKREC_MAX_IMAGE_PIXELS
// when it holds a number from 1 to kMaxImagePixels, or what SetMaxImagePixels last set.
std::uint64_t MaxImagePixels();
// InvalidArgument unless 1 <= pixels <= kMaxImagePixels. Thread-safe; it applies to decodes that
// start after it returns.
Status SetMaxImagePixels(std::uint64_t pixels);

// Reads the header only: JPEG (SOF via libjpeg-turbo, plus progressive and end-of-image checks) or
// PNG (signature and IHDR). InvalidInput for anything else, with the reason, and for an image that
// declares more than MaxImagePixels() (a decompression bomb: convert rejects it up front rather
// than store a record no loader will decode).
Result<ImageInfo> ProbeImage(std::span<const std::byte> bytes);

// Decodes every pixel (JPEG with libjpeg-turbo, stopping on warnings and limiting progressive
// scans; PNG with libpng) and discards them. InvalidInput with the decoder's message on failure.
Status CheckDecodes(std::span<const std::byte> bytes);

// Re-encodes an image as JPEG: shorter side scaled down to `resize_short` when it is larger
// (0: keep the size), at `quality` (1-100). Grayscale stays grayscale.
Result<std::vector<std::byte>> TranscodeToJpeg(std::span<const std::byte> bytes,
                                               std::uint32_t resize_short, int quality);

// Decodes an image to RGB (gray and CMYK converted, alpha dropped) and resizes it to exactly
// width x height, aspect ratio not kept (the classic HDF5 pixels layout). JPEGs are decoded at the
// smallest DCT scale that still covers the output. Returns height x width x 3 bytes.
Result<std::vector<std::byte>> DecodeResizedRgb(std::span<const std::byte> bytes,
                                                std::uint32_t width, std::uint32_t height);

}  // namespace packrec

#endif  // PACKREC_IMAGE_H_
