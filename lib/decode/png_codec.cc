#include <png.h>

#include <string>

#include "decode/codecs.h"
#include "packrec/image.h"

namespace packrec {

Result<Pixels> DecodePng(std::span<const std::byte> bytes, std::uint64_t max_pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()) == 0) {
    return Status::InvalidInput(std::string("PNG does not decode: ") + image.message);
  }
  if (static_cast<std::uint64_t>(image.width) * image.height >
      (max_pixels != 0 ? max_pixels : MaxImagePixels())) {
    png_image_free(&image);
    return Status::InvalidInput("PNG of " + std::to_string(image.width) + "x" +
                                std::to_string(image.height) + " exceeds the pixel limit");
  }
  const bool gray = (image.format & PNG_FORMAT_FLAG_COLOR) == 0;
  image.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  Pixels pixels;
  pixels.width = image.width;
  pixels.height = image.height;
  pixels.channels = gray ? 1 : 3;
  pixels.data.resize(PNG_IMAGE_SIZE(image));
  if (png_image_finish_read(&image, nullptr, pixels.data.data(), 0, nullptr) == 0) {
    std::string message = image.message;
    png_image_free(&image);
    return Status::InvalidInput("PNG does not decode: " + message);
  }
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
