// Fuzz target: what every input image goes through: the probe convert runs on each file, the
// region decoder the loader uses (with a crop and a flip), the full decode verify --deep uses,
// and the transcode convert applies to BMP, GIF, TIFF and PPM/PGM inputs (stb_image, giflib,
// libtiff) and animated WebP (libwebp, which also decodes still WebP above), under a small pixel
// limit so that a header's size is what is tested, not memory.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "packrec/decode.h"
#include "packrec/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace packrec;
  static const bool limited = SetMaxImagePixels(1u << 22).ok();
  (void)limited;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Result<ImageInfo> info = ProbeImage(bytes);
  std::vector<std::uint8_t> out(24 * 24 * 3);
  DecodeScratch scratch;
  DecodeRequest request{24, 24, {}, false, {}};
  (void)DecodeInto(bytes, request, out, scratch);
  request.flip_horizontal = true;
  request.region = [](std::uint32_t width, std::uint32_t height) {
    return Rect{width / 4, height / 4, width / 2 + 1, height / 2 + 1};
  };
  (void)DecodeInto(bytes, request, out, scratch);
  // The full decode allocates the whole image: only for what the probe let through, kept small.
  if (info.ok() && std::uint64_t{info->width} * info->height <= (1u << 22)) {
    (void)CheckDecodes(bytes);
  }
  (void)TranscodeToJpeg(bytes, 16, 75);  // JPEG, PNG, WebP, and BMP, GIF, TIFF, PPM/PGM
  return 0;
}
