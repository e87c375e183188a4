// Images packrec does not store as they are: BMP, GIF, TIFF and binary PPM/PGM, the other formats
// of torchvision's ImageFolder, and animated WebP (its first frame, as PIL opens it). Convert
// transcodes them (losslessly to PNG, or to JPEG with
// --quality / --resize-short); docs/decoding.md says how their pixels compare with PIL's.
#ifndef PACKREC_LIB_DECODE_FOREIGN_H_
#define PACKREC_LIB_DECODE_FOREIGN_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "decode/codecs.h"
#include "packrec/status.h"

namespace packrec {

// "BMP", "GIF", "TIFF", "PNM" or "animated WebP" by the first bytes; "" when `bytes` starts as none
// of them.
std::string_view ForeignImageKind(std::span<const std::byte> bytes);

// Decodes one of them to gray or RGB: BMP and binary PPM/PGM with stb_image, GIF's first frame
// with giflib, TIFF's first page with libtiff, animated WebP's first frame with libwebp. The pixel
// limit (`max_pixels`, 0: MaxImagePixels) is checked from the header first. Errors: InvalidInput
// naming the kind and what failed.
Result<Pixels> DecodeForeign(std::span<const std::byte> bytes, std::uint64_t max_pixels = 0);

// DecodeForeign, then a lossless PNG of the pixels.
Result<std::vector<std::byte>> TranscodeForeignToPng(std::span<const std::byte> bytes);

}  // namespace packrec

#endif  // PACKREC_LIB_DECODE_FOREIGN_H_
