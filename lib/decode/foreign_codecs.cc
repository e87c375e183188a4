// BMP, PPM/PGM, GIF and TIFF: decoded by their formats' well-kept libraries (stb_image from
// Debian's libstb for BMP and binary PPM/PGM, giflib for GIF, libtiff for TIFF) so that convert
// can transcode them to PNG or JPEG (foreign.h). Each checks the pixel limit from the header
// before it allocates the image.
#include <gif_lib.h>
#include <stb_image.h>
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "decode/foreign.h"
#include "packrec/image.h"

namespace packrec {
namespace {

bool Starts(std::span<const std::byte> bytes, std::string_view prefix) {
  return bytes.size() >= prefix.size() &&
         std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

Status OverLimit(std::string_view kind, std::uint64_t width, std::uint64_t height) {
  return Status::InvalidInput(std::string(kind) + " of " + std::to_string(width) + "x" +
                              std::to_string(height) + " exceeds the pixel limit");
}

// stb_image: BMP (uncompressed, 1 to 32 bits) and binary PPM/PGM. Gray stays one channel; an alpha
// channel is dropped (stb_image's channel conversion keeps the colour samples as they are).
Result<Pixels> DecodeWithStb(std::string_view kind, std::span<const std::byte> bytes,
                             std::uint64_t max_pixels) {
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int size = static_cast<int>(std::min<std::size_t>(bytes.size(), INT32_MAX));
  int width = 0;
  int height = 0;
  int channels = 0;
  if (stbi_info_from_memory(data, size, &width, &height, &channels) == 0) {
    return Status::InvalidInput(std::string(kind) + " does not decode: " + stbi_failure_reason());
  }
  if (static_cast<std::uint64_t>(width) * static_cast<std::uint64_t>(height) > max_pixels) {
    return OverLimit(kind, width, height);
  }
  const int wanted = channels <= 2 ? 1 : 3;
  stbi_uc* decoded = stbi_load_from_memory(data, size, &width, &height, &channels, wanted);
  if (decoded == nullptr) {
    return Status::InvalidInput(std::string(kind) + " does not decode: " + stbi_failure_reason());
  }
  Pixels pixels;
  pixels.width = static_cast<std::uint32_t>(width);
  pixels.height = static_cast<std::uint32_t>(height);
  pixels.channels = static_cast<std::uint8_t>(wanted);
  pixels.data.assign(decoded, decoded + static_cast<std::size_t>(width) * height * wanted);
  stbi_image_free(decoded);
  return pixels;
}

// giflib's message for an error code; GifErrorString returns null for codes it does not know.
std::string GifError(int code) {
  const char* text = GifErrorString(code);
  return text != nullptr ? text : "giflib error " + std::to_string(code);
}

struct MemoryInput {
  std::span<const std::byte> bytes;
  std::size_t offset = 0;
};

int ReadGif(GifFileType* gif, GifByteType* out, int length) {
  auto* input = static_cast<MemoryInput*>(gif->UserData);
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max(length, 0)),
                                              input->bytes.size() - input->offset);
  std::memcpy(out, input->bytes.data() + input->offset, n);
  input->offset += n;
  return static_cast<int>(n);
}

// The records before the first image (extensions: comments, animation control) are skipped.
Status SkipToFirstImage(GifFileType* gif) {
  GifRecordType type = UNDEFINED_RECORD_TYPE;
  do {
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) {
      return Status::InvalidInput("GIF does not decode: " + GifError(gif->Error));
    }
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* extension = nullptr;
      int status = DGifGetExtension(gif, &code, &extension);
      while (status != GIF_ERROR && extension != nullptr) {
        status = DGifGetExtensionNext(gif, &extension);
      }
      if (status == GIF_ERROR) {
        return Status::InvalidInput("GIF does not decode: " + GifError(gif->Error));
      }
    }
  } while (type != IMAGE_DESC_RECORD_TYPE && type != TERMINATE_RECORD_TYPE);
  if (type == TERMINATE_RECORD_TYPE) return Status::InvalidInput("GIF holds no image");
  if (DGifGetImageDesc(gif) == GIF_ERROR) {
    return Status::InvalidInput("GIF does not decode: " + GifError(gif->Error));
  }
  return Status::OK();
}

// The first frame's colour indices on the logical screen (outside the frame: the background
// index), rows de-interlaced.
Status ReadFirstFrame(GifFileType* gif, std::vector<GifByteType>& indices) {
  const GifImageDesc& frame = gif->Image;
  if (gif->SWidth <= 0 || gif->SHeight <= 0 || frame.Width <= 0 || frame.Height <= 0) {
    return Status::InvalidInput("GIF has an empty screen or first frame (" +
                                std::to_string(frame.Width) + "x" + std::to_string(frame.Height) +
                                ")");
  }
  const auto screen_width = static_cast<std::size_t>(gif->SWidth);
  indices.assign(screen_width * static_cast<std::size_t>(gif->SHeight),
                 static_cast<GifByteType>(gif->SBackGroundColor));
  std::vector<GifByteType> row(static_cast<std::size_t>(std::max(frame.Width, 0)));
  const auto put = [&](int y) -> Status {
    if (DGifGetLine(gif, row.data(), frame.Width) == GIF_ERROR) {
      return Status::InvalidInput("GIF does not decode: " + GifError(gif->Error));
    }
    const int top = frame.Top + y;
    if (top < 0 || top >= gif->SHeight || frame.Left >= gif->SWidth) return Status::OK();
    const int count = std::min(frame.Width, gif->SWidth - frame.Left);
    if (count <= 0) return Status::OK();
    std::memcpy(&indices[static_cast<std::size_t>(top) * screen_width + frame.Left], row.data(),
                static_cast<std::size_t>(std::max(count, 0)));
    return Status::OK();
  };
  if (!frame.Interlace) {
    for (int y = 0; y < frame.Height; ++y) PACKREC_RETURN_IF_ERROR(put(y));
    return Status::OK();
  }
  // GIF's four interlace passes: rows 0, 8, ...; 4, 12, ...; 2, 6, ...; 1, 3, ...
  constexpr int kStart[4] = {0, 4, 2, 1};
  constexpr int kStep[4] = {8, 8, 4, 2};
  for (int pass = 0; pass < 4; ++pass) {
    for (int y = kStart[pass]; y < frame.Height; y += kStep[pass]) PACKREC_RETURN_IF_ERROR(put(y));
  }
  return Status::OK();
}

// giflib: the first frame's palette colours, as PIL's convert("RGB") of a GIF's first frame
// (transparency ignored).
Result<Pixels> DecodeGif(std::span<const std::byte> bytes, std::uint64_t max_pixels) {
  MemoryInput input{bytes};
  int error = 0;
  GifFileType* gif = DGifOpen(&input, ReadGif, &error);
  if (gif == nullptr) {
    return Status::InvalidInput("GIF does not decode: " + GifError(error));
  }
  struct Closer {
    GifFileType* gif;
    ~Closer() {
      int ignored = 0;
      DGifCloseFile(gif, &ignored);
    }
  } closer{gif};
  if (static_cast<std::uint64_t>(gif->SWidth) * static_cast<std::uint64_t>(gif->SHeight) >
      max_pixels) {
    return OverLimit("GIF", gif->SWidth, gif->SHeight);
  }
  PACKREC_RETURN_IF_ERROR(SkipToFirstImage(gif));
  const ColorMapObject* colors = gif->Image.ColorMap ? gif->Image.ColorMap : gif->SColorMap;
  if (colors == nullptr) return Status::InvalidInput("GIF has no colour table");
  std::vector<GifByteType> indices;
  PACKREC_RETURN_IF_ERROR(ReadFirstFrame(gif, indices));
  Pixels pixels;
  pixels.width = static_cast<std::uint32_t>(gif->SWidth);
  pixels.height = static_cast<std::uint32_t>(gif->SHeight);
  pixels.channels = 3;
  pixels.data.resize(indices.size() * 3);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const GifColorType color =
        indices[i] < colors->ColorCount ? colors->Colors[indices[i]] : GifColorType{0, 0, 0};
    pixels.data[3 * i] = color.Red;
    pixels.data[3 * i + 1] = color.Green;
    pixels.data[3 * i + 2] = color.Blue;
  }
  return pixels;
}

// libtiff over memory: the callbacks of TIFFClientOpen.
tmsize_t TiffRead(thandle_t handle, void* out, tmsize_t size) {
  auto* input = static_cast<MemoryInput*>(handle);
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max<tmsize_t>(size, 0)),
                                              input->bytes.size() - input->offset);
  std::memcpy(out, input->bytes.data() + input->offset, n);
  input->offset += n;
  return static_cast<tmsize_t>(n);
}
tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return 0; }
toff_t TiffSeek(thandle_t handle, toff_t offset, int whence) {
  auto* input = static_cast<MemoryInput*>(handle);
  const std::uint64_t base = whence == SEEK_CUR   ? input->offset
                             : whence == SEEK_END ? input->bytes.size()
                                                  : 0;
  input->offset =
      static_cast<std::size_t>(std::min<std::uint64_t>(base + offset, input->bytes.size()));
  return input->offset;
}
int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t handle) { return static_cast<MemoryInput*>(handle)->bytes.size(); }
int TiffMap(thandle_t, void**, toff_t*) { return 0; }
void TiffUnmap(thandle_t, void*, toff_t) {}

// The first libtiff error, kept for the message (libtiff would print it to stderr).
int KeepTiffError(TIFF*, void* user_data, const char* module, const char* format, va_list args) {
  auto* message = static_cast<std::string*>(user_data);
  if (!message->empty()) return 1;
  char text[256];
  std::vsnprintf(text, sizeof text, format, args);
  *message = std::string(module != nullptr ? module : "libtiff") + ": " + text;
  return 1;
}
int IgnoreTiffWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

// libtiff's RGBA interface (TIFFReadRGBAImageOriented): every photometric and bit depth it knows,
// first page only. Gray stays one channel; alpha is dropped (for unassociated alpha, after
// libtiff's premultiplication: docs/decoding.md).
Result<Pixels> DecodeTiff(std::span<const std::byte> bytes, std::uint64_t max_pixels) {
  MemoryInput input{bytes};
  std::string error;
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, KeepTiffError, &error);
  TIFFOpenOptionsSetWarningHandlerExtR(options, IgnoreTiffWarning, nullptr);
  TIFFOpenOptionsSetMaxSingleMemAlloc(options, static_cast<tmsize_t>(max_pixels * 4 + (1 << 20)));
  TIFF* tiff = TIFFClientOpenExt("memory", "rm", &input, TiffRead, TiffWrite, TiffSeek, TiffClose,
                                 TiffSize, TiffMap, TiffUnmap, options);
  TIFFOpenOptionsFree(options);
  if (tiff == nullptr) return Status::InvalidInput("TIFF does not decode: " + error);
  struct Closer {
    TIFF* tiff;
    ~Closer() { TIFFClose(tiff); }
  } closer{tiff};
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint16_t samples = 1;
  std::uint16_t photometric = PHOTOMETRIC_RGB;
  TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &height);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_PHOTOMETRIC, &photometric);
  if (width == 0 || height == 0) return Status::InvalidInput("TIFF has no image size");
  if (static_cast<std::uint64_t>(width) * height > max_pixels) {
    return OverLimit("TIFF", width, height);
  }
  // An unassociated alpha channel would be multiplied into the colours by libtiff's RGBA
  // interface; PIL's convert("RGB") drops it, leaving the colours as stored. Declared unspecified
  // (in this in-memory directory only), libtiff leaves it alone too.
  std::uint16_t extra_count = 0;
  std::uint16_t* extra_kinds = nullptr;
  if (TIFFGetField(tiff, TIFFTAG_EXTRASAMPLES, &extra_count, &extra_kinds) != 0 &&
      extra_count > 0 && extra_kinds[0] == EXTRASAMPLE_UNASSALPHA) {
    std::vector<std::uint16_t> unspecified(extra_count, EXTRASAMPLE_UNSPECIFIED);
    TIFFSetField(tiff, TIFFTAG_EXTRASAMPLES, extra_count, unspecified.data());
  }
  char why[1024] = {};
  if (TIFFRGBAImageOK(tiff, why) == 0) {
    return Status::InvalidInput(std::string("TIFF is of a kind libtiff cannot convert: ") + why);
  }
  std::vector<std::uint32_t> raster(static_cast<std::size_t>(width) * height);
  if (TIFFReadRGBAImageOriented(tiff, width, height, raster.data(), ORIENTATION_TOPLEFT, 0) == 0) {
    return Status::InvalidInput("TIFF does not decode: " + error);
  }
  const bool gray =
      (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) &&
      samples <= 2;
  Pixels pixels;
  pixels.width = width;
  pixels.height = height;
  pixels.channels = gray ? 1 : 3;
  pixels.data.resize(raster.size() * pixels.channels);
  for (std::size_t i = 0; i < raster.size(); ++i) {
    if (gray) {
      pixels.data[i] = static_cast<std::uint8_t>(TIFFGetR(raster[i]));
      continue;
    }
    pixels.data[3 * i] = static_cast<std::uint8_t>(TIFFGetR(raster[i]));
    pixels.data[3 * i + 1] = static_cast<std::uint8_t>(TIFFGetG(raster[i]));
    pixels.data[3 * i + 2] = static_cast<std::uint8_t>(TIFFGetB(raster[i]));
  }
  return pixels;
}

}  // namespace

std::string_view ForeignImageKind(std::span<const std::byte> bytes) {
  if (Starts(bytes, "BM")) return "BMP";
  if (Starts(bytes, "GIF87a") || Starts(bytes, "GIF89a")) return "GIF";
  if (Starts(bytes, std::string_view("II*\0", 4)) || Starts(bytes, std::string_view("MM\0*", 4)) ||
      Starts(bytes, std::string_view("II+\0", 4)) || Starts(bytes, std::string_view("MM\0+", 4))) {
    return "TIFF";
  }
  // VP8X's flags byte (offset 20) has the animation bit (0x02): kept as the first frame, as GIF.
  if (IsWebp(bytes) && bytes.size() > 20 && std::memcmp(bytes.data() + 12, "VP8X", 4) == 0 &&
      (static_cast<unsigned>(bytes[20]) & 0x02u) != 0) {
    return "animated WebP";
  }
  if (bytes.size() >= 2 && Starts(bytes, "P") && static_cast<char>(bytes[1]) >= '1' &&
      static_cast<char>(bytes[1]) <= '6') {
    return "PNM";
  }
  return "";
}

Result<Pixels> DecodeForeign(std::span<const std::byte> bytes, std::uint64_t max_pixels) {
  if (max_pixels == 0) max_pixels = MaxImagePixels();
  const std::string_view kind = ForeignImageKind(bytes);
  if (kind == "BMP") return DecodeWithStb(kind, bytes, max_pixels);
  if (kind == "GIF") return DecodeGif(bytes, max_pixels);
  if (kind == "TIFF") return DecodeTiff(bytes, max_pixels);
  if (kind == "animated WebP") return DecodeWebp(bytes, max_pixels);
  if (kind == "PNM") {
    const char type = static_cast<char>(bytes[1]);
    if (type != '5' && type != '6') {
      return Status::InvalidInput(
          std::string("PNM of type P") + type +
          " (ASCII or 1-bit) is not read: binary PPM (P6) and PGM (P5) are");
    }
    return DecodeWithStb(type == '6' ? "PPM" : "PGM", bytes, max_pixels);
  }
  return Status::InvalidInput("not a BMP, GIF, TIFF, PPM, PGM or animated WebP");
}

Result<std::vector<std::byte>> TranscodeForeignToPng(std::span<const std::byte> bytes) {
  PACKREC_ASSIGN_OR_RETURN(const Pixels pixels, DecodeForeign(bytes));
  return EncodePng(pixels);
}

}  // namespace packrec
