#include "packrec/image.h"

#include <stb_image_resize.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/endian.h"
#include "decode/codecs.h"
#include "decode/foreign.h"
#include "packrec/decode.h"

namespace packrec {
namespace {

constexpr unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool StartsWith(std::span<const std::byte> bytes, const void* prefix, std::size_t size) {
  return bytes.size() >= size && std::memcmp(bytes.data(), prefix, size) == 0;
}

unsigned At(std::span<const std::byte> bytes, std::size_t i) {
  return static_cast<unsigned>(bytes[i]);
}

// A WebP packrec stores as it is; an animated one is foreign (foreign.h): its first frame is kept.
bool IsStillWebp(std::span<const std::byte> bytes) {
  return IsWebp(bytes) && ForeignImageKind(bytes).empty();
}

// Names what a file that is neither JPEG, PNG nor a still WebP probably is, for the reject
// message.
std::string DescribeUnsupported(std::span<const std::byte> bytes) {
  if (bytes.empty()) return "empty file";
  // BMP, GIF, TIFF, PNM: recognised by the same test convert uses to transcode them.
  if (const std::string_view kind = ForeignImageKind(bytes); !kind.empty()) {
    return "unsupported encoding (" + std::string(kind) +
           "); packrec stores JPEG, PNG and WebP (convert transcodes " + std::string(kind) +
           " to PNG or JPEG)";
  }
  char hex[48];
  std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", At(bytes, 0),
                bytes.size() > 1 ? At(bytes, 1) : 0u, bytes.size() > 2 ? At(bytes, 2) : 0u,
                bytes.size() > 3 ? At(bytes, 3) : 0u);
  return std::string("not a JPEG, PNG or WebP (starts with ") + hex + ")";
}

// Walks the marker segments up to the frame header: libjpeg-turbo 2.1's TurboJPEG API does not
// report whether a JPEG is progressive, and this also rejects files whose structure is broken.
Status ScanJpegMarkers(std::span<const std::byte> bytes, bool* progressive) {
  std::size_t pos = 2;
  while (pos < bytes.size()) {
    if (At(bytes, pos) != 0xFF) {
      return Status::InvalidInput("bad JPEG marker structure at byte " + std::to_string(pos));
    }
    while (pos < bytes.size() && At(bytes, pos) == 0xFF) ++pos;
    if (pos >= bytes.size()) break;
    const unsigned marker = At(bytes, pos++);
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) continue;  // no length field
    if (marker == 0xD9 || marker == 0xDA) {
      return Status::InvalidInput("JPEG has no frame header before its first scan");
    }
    if (pos + 2 > bytes.size()) break;
    const std::uint16_t length = LoadBE16(bytes.data() + pos);
    if (length < 2) {
      return Status::InvalidInput("bad JPEG segment length at byte " + std::to_string(pos));
    }
    const bool is_sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (is_sof) {
      *progressive = marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE;
      return Status::OK();
    }
    pos += length;
  }
  return Status::InvalidInput("truncated JPEG: ends before its frame header");
}

Result<ImageInfo> ProbeJpeg(std::span<const std::byte> bytes) {
  ImageInfo info;
  info.encoding = Encoding::kJpeg;
  PACKREC_RETURN_IF_ERROR(ScanJpegMarkers(bytes, &info.progressive));
  PACKREC_ASSIGN_OR_RETURN(const JpegHeader header, ReadJpegHeader(bytes));
  // Baseline files hold one scan per component at most; only progressive ones need counting.
  if (info.progressive)
    PACKREC_RETURN_IF_ERROR(CheckJpegScanCount(bytes, DecodeLimits{}.max_scans));
  info.width = header.width;
  info.height = header.height;
  info.channels = header.channels;
  info.subsampling = header.subsampling;
  // A JPEG cut short (an interrupted download) has no end-of-image marker. Some writers pad after
  // it, so look for it near the end rather than exactly there.
  const std::size_t window = std::min<std::size_t>(bytes.size() - 2, 1024);
  bool has_eoi = false;
  for (std::size_t i = bytes.size() - 2; i + window >= bytes.size() && i >= 2; --i) {
    if (At(bytes, i) == 0xFF && At(bytes, i + 1) == 0xD9) {
      has_eoi = true;
      break;
    }
  }
  if (!has_eoi) return Status::InvalidInput("truncated JPEG: no end-of-image marker");
  return info;
}

Result<ImageInfo> ProbePng(std::span<const std::byte> bytes) {
  if (bytes.size() < 8 + 25 + 12 || std::memcmp(bytes.data() + 12, "IHDR", 4) != 0 ||
      LoadBE32(bytes.data() + 8) != 13) {
    return Status::InvalidInput("PNG without a valid IHDR chunk");
  }
  ImageInfo info;
  info.encoding = Encoding::kPng;
  info.width = LoadBE32(bytes.data() + 16);
  info.height = LoadBE32(bytes.data() + 20);
  switch (At(bytes, 25)) {
    case 0:
      info.channels = 1;
      break;
    case 2:
      info.channels = 3;
      break;
    case 3:
      info.channels = 3;
      break;  // palette
    case 4:
      info.channels = 2;
      break;
    case 6:
      info.channels = 4;
      break;
    default:
      return Status::InvalidInput("PNG with unknown color type " + std::to_string(At(bytes, 25)));
  }
  if (info.width == 0 || info.height == 0 || info.width > 0x7fffffff || info.height > 0x7fffffff) {
    return Status::InvalidInput("PNG declares an impossible size");
  }
  if (std::memcmp(bytes.data() + bytes.size() - 8, "IEND", 4) != 0) {
    return Status::InvalidInput("truncated PNG: no IEND chunk at the end");
  }
  return info;
}

Result<ImageInfo> ProbeWebp(std::span<const std::byte> bytes) {
  PACKREC_ASSIGN_OR_RETURN(const WebpHeader header, ReadWebpHeader(bytes));
  ImageInfo info;
  info.encoding = Encoding::kWebp;
  info.width = header.width;
  info.height = header.height;
  info.channels = header.has_alpha ? 4 : 3;
  return info;
}

Result<Pixels> DecodeAny(std::span<const std::byte> bytes, std::uint32_t min_short_side) {
  if (StartsWith(bytes, kPngSignature, sizeof kPngSignature)) return DecodePng(bytes);
  if (IsStillWebp(bytes)) return DecodeWebp(bytes);
  if (bytes.size() >= 2 && At(bytes, 0) == 0xFF && At(bytes, 1) == 0xD8) {
    return DecodeJpeg(bytes, min_short_side);
  }
  // BMP, GIF, TIFF, PPM/PGM: what convert transcodes (foreign.h), so --quality and the HDF5
  // pixels layout take them too.
  if (!ForeignImageKind(bytes).empty()) return DecodeForeign(bytes);
  return Status::InvalidInput(DescribeUnsupported(bytes));
}

}  // namespace

std::string_view EncodingName(Encoding encoding) {
  switch (encoding) {
    case Encoding::kJpeg:
      return "jpeg";
    case Encoding::kPng:
      return "png";
    case Encoding::kRawRgb:
      return "raw-rgb";
    case Encoding::kWebp:
      return "webp";
    case Encoding::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view SubsamplingName(Subsampling subsampling) {
  switch (subsampling) {
    case Subsampling::k444:
      return "4:4:4";
    case Subsampling::k422:
      return "4:2:2";
    case Subsampling::k420:
      return "4:2:0";
    case Subsampling::kGray:
      return "gray";
    case Subsampling::k440:
      return "4:4:0";
    case Subsampling::k411:
      return "4:1:1";
    case Subsampling::kOther:
      return "other";
    case Subsampling::kNone:
      break;
  }
  return "none";
}

namespace {

std::uint64_t LimitFromEnvironment() {
  const char* text = std::getenv("PACKREC_MAX_IMAGE_PIXELS");
  if (text == nullptr) return kDefaultMaxImagePixels;
  std::uint64_t pixels = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, pixels);
  const bool valid = *text != '\0' && error == std::errc() && stop == end && pixels >= 1 &&
                     pixels <= kMaxImagePixels;
  return valid ? pixels : kDefaultMaxImagePixels;
}

std::atomic<std::uint64_t>& PixelLimit() {
  static std::atomic<std::uint64_t> limit{LimitFromEnvironment()};
  return limit;
}

}  // namespace

std::uint64_t MaxImagePixels() { return PixelLimit().load(std::memory_order_relaxed); }

Status SetMaxImagePixels(std::uint64_t pixels) {
  if (pixels < 1 || pixels > kMaxImagePixels) {
    return Status::InvalidArgument("the pixel limit must be 1 to " +
                                   std::to_string(kMaxImagePixels) + " (16384 x 16384), got " +
                                   std::to_string(pixels));
  }
  PixelLimit().store(pixels, std::memory_order_relaxed);
  return Status::OK();
}

Result<ImageInfo> ProbeImage(std::span<const std::byte> bytes) {
  const bool png = StartsWith(bytes, kPngSignature, sizeof kPngSignature);
  const bool jpeg =
      bytes.size() >= 4 && At(bytes, 0) == 0xFF && At(bytes, 1) == 0xD8 && At(bytes, 2) == 0xFF;
  const bool webp = IsStillWebp(bytes);
  if (!png && !jpeg && !webp) return Status::InvalidInput(DescribeUnsupported(bytes));
  Result<ImageInfo> info = png ? ProbePng(bytes) : jpeg ? ProbeJpeg(bytes) : ProbeWebp(bytes);
  const std::uint64_t limit = MaxImagePixels();
  if (info.ok() && std::uint64_t{info->width} * info->height > limit) {
    return Status::InvalidInput("declares " + std::to_string(info->width) + "x" +
                                std::to_string(info->height) + " pixels, over the limit of " +
                                std::to_string(limit) +
                                " (a decompression bomb, or an image too large to train on; "
                                "the limit is PACKREC_MAX_IMAGE_PIXELS, up to " +
                                std::to_string(kMaxImagePixels) + ")");
  }
  return info;
}

Status CheckDecodes(std::span<const std::byte> bytes) {
  Result<Pixels> pixels = DecodeAny(bytes, 0);
  return pixels.ok() ? Status::OK() : pixels.status();
}

Result<std::vector<std::byte>> TranscodeToJpeg(std::span<const std::byte> bytes,
                                               std::uint32_t resize_short, int quality) {
  PACKREC_ASSIGN_OR_RETURN(Pixels pixels, DecodeAny(bytes, resize_short));
  const std::uint32_t short_side = std::min(pixels.width, pixels.height);
  if (resize_short > 0 && short_side > resize_short) {
    const double scale = static_cast<double>(resize_short) / short_side;
    Pixels resized;
    resized.channels = pixels.channels;
    resized.width =
        std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(pixels.width * scale)));
    resized.height =
        std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(pixels.height * scale)));
    if (pixels.width < pixels.height)
      resized.width = resize_short;
    else
      resized.height = resize_short;
    resized.data.resize(static_cast<std::size_t>(resized.width) * resized.height *
                        resized.channels);
    if (stbir_resize_uint8(pixels.data.data(), static_cast<int>(pixels.width),
                           static_cast<int>(pixels.height), 0, resized.data.data(),
                           static_cast<int>(resized.width), static_cast<int>(resized.height), 0,
                           pixels.channels) == 0) {
      return Status::Internal("resize failed");
    }
    pixels = std::move(resized);
  }
  JpegEncodeOptions options;
  options.quality = quality > 0 ? quality : 90;
  return EncodeJpeg(pixels, options);
}

Result<std::vector<std::byte>> DecodeResizedRgb(std::span<const std::byte> bytes,
                                                std::uint32_t width, std::uint32_t height) {
  if (width == 0 || height == 0 || std::uint64_t{width} * height > MaxImagePixels()) {
    return Status::InvalidArgument("output size " + std::to_string(width) + "x" +
                                   std::to_string(height) + " is empty or too large");
  }
  // A shorter side of max(width, height) covers both output dimensions.
  PACKREC_ASSIGN_OR_RETURN(const Pixels decoded, DecodeAny(bytes, std::max(width, height)));
  const std::uint8_t channels = decoded.channels;
  std::vector<std::uint8_t> resized;
  const std::vector<std::uint8_t>* source = &decoded.data;
  if (decoded.width != width || decoded.height != height) {
    resized.resize(std::size_t{width} * height * channels);
    if (stbir_resize_uint8(decoded.data.data(), static_cast<int>(decoded.width),
                           static_cast<int>(decoded.height), 0, resized.data(),
                           static_cast<int>(width), static_cast<int>(height), 0, channels) == 0) {
      return Status::Internal("resize failed");
    }
    source = &resized;
  }
  std::vector<std::byte> rgb(std::size_t{width} * height * 3);
  if (channels == 3) {
    std::memcpy(rgb.data(), source->data(), rgb.size());
  } else {
    for (std::size_t i = 0; i < source->size(); ++i)
      rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = static_cast<std::byte>((*source)[i]);
  }
  return rgb;
}

}  // namespace packrec
