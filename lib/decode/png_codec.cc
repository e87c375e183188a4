#include <png.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decode/codecs.h"
#include "packrec/image.h"

namespace packrec {

namespace {

// libpng's classic API reports errors by longjmp: what the callbacks need, kept in one plain
// struct so that nothing with a destructor lies between setjmp and a jump.
struct PngReading {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::size_t offset = 0;
  char error[256] = {};
};

void ReadFromMemory(png_structp png, png_bytep out, png_size_t length) {
  auto* reading = static_cast<PngReading*>(png_get_io_ptr(png));
  if (length > reading->size - reading->offset) png_error(png, "truncated (read past the end)");
  std::memcpy(out, reading->data + reading->offset, length);
  reading->offset += length;
}

[[noreturn]] void OnError(png_structp png, png_const_charp message) {
  auto* reading = static_cast<PngReading*>(png_get_error_ptr(png));
  std::snprintf(reading->error, sizeof reading->error, "%s", message);
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}  // a bad ancillary chunk: decoded as PIL does

}  // namespace

// libpng's classic API with the transforms that give what PIL's Image.open(...).convert("RGB")
// gives (torchvision's ImageFolder loader): 16-bit samples keep their high byte, an alpha channel
// or tRNS transparency is dropped without compositing onto a background, a palette gives its
// colours, gamma and colour-profile chunks are not applied; gray (with or without alpha) stays one
// channel (expanded to RGB as PIL's L -> RGB does, by the caller). One documented difference:
// 16-bit gray, which PIL opens as I;16 and converts to RGB by clipping at 255, keeps its high byte
// here as 16-bit colour does (docs/decoding.md). libpng's simplified API, used before,
// composited alpha onto black and read 16-bit samples as linear light.
Result<Pixels> DecodePng(std::span<const std::byte> bytes, std::uint64_t max_pixels) {
  PngReading reading{bytes.data(), bytes.size()};
  Pixels pixels;
  std::vector<png_bytep> rows;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reading, OnError, OnWarning);
  png_infop info = png == nullptr ? nullptr : png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return Status::Internal("libpng could not allocate its state");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Status::InvalidInput(std::string("PNG does not decode: ") + reading.error);
  }
  png_set_read_fn(png, &reading, ReadFromMemory);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  if (static_cast<std::uint64_t>(width) * height >
      (max_pixels != 0 ? max_pixels : MaxImagePixels())) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Status::InvalidInput("PNG of " + std::to_string(width) + "x" + std::to_string(height) +
                                " exceeds the pixel limit");
  }
  const int color_type = png_get_color_type(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) {
    png_set_expand_gray_1_2_4_to_8(png);
  }
  if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);  // the high byte, as PIL
  // Expanding a palette (or low-depth gray) also turns tRNS into an alpha channel: dropped too.
  if ((color_type & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(png, info, PNG_INFO_tRNS) != 0) {
    png_set_strip_alpha(png);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  pixels.width = width;
  pixels.height = height;
  pixels.channels = static_cast<std::uint8_t>(png_get_channels(png, info));
  const std::size_t stride = static_cast<std::size_t>(width) * pixels.channels;
  if ((pixels.channels != 1 && pixels.channels != 3) || png_get_rowbytes(png, info) != stride) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Status::Internal("libpng gave " + std::to_string(pixels.channels) +
                            " channels per pixel, not 1 or 3");
  }
  pixels.data.resize(stride * height);
  rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) {
    rows[y] = reinterpret_cast<png_bytep>(pixels.data.data()) + y * stride;
  }
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return pixels;
}

Result<std::vector<std::byte>> EncodePng(const Pixels& pixels) {
  if (pixels.channels != 1 && pixels.channels != 3) {
    return Status::InvalidArgument("PNG encoding takes 1 or 3 channels, got " +
                                   std::to_string(pixels.channels));
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = pixels.width;
  image.height = pixels.height;
  image.format = pixels.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data.data(), 0, nullptr) == 0) {
    return Status::InvalidInput(std::string("PNG does not encode: ") + image.message);
  }
  std::vector<std::byte> out(size);
  if (png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data.data(), 0, nullptr) ==
      0) {
    return Status::InvalidInput(std::string("PNG does not encode: ") + image.message);
  }
  out.resize(size);
  return out;
}

}  // namespace packrec
