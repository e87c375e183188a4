#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "decode/codecs.h"
#include "packrec/decode.h"
#include "packrec/image.h"

namespace packrec {
namespace {

// TurboJPEG handles are not thread-safe but are cheap to keep: one of each kind per thread.
class TjHandle {
 public:
  explicit TjHandle(tjhandle handle) : handle_(handle) {}
  ~TjHandle() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  tjhandle get() const { return handle_; }

 private:
  tjhandle handle_;
};

tjhandle Decompressor() {
  thread_local TjHandle handle(tjInitDecompress());
  return handle.get();
}

// libjpeg-turbo 2.1 (Debian 12) keeps progressive scan settings in a compress handle: a baseline
// JPEG made with a handle that once made a progressive one is corrupt. So each mode has its own.
tjhandle Compressor(bool progressive) {
  thread_local TjHandle baseline(tjInitCompress());
  thread_local TjHandle progressive_handle(tjInitCompress());
  return progressive ? progressive_handle.get() : baseline.get();
}

Subsampling FromTj(int subsamp) {
  switch (subsamp) {
    case TJSAMP_444:
      return Subsampling::k444;
    case TJSAMP_422:
      return Subsampling::k422;
    case TJSAMP_420:
      return Subsampling::k420;
    case TJSAMP_GRAY:
      return Subsampling::kGray;
    case TJSAMP_440:
      return Subsampling::k440;
    case TJSAMP_411:
      return Subsampling::k411;
    default:
      return Subsampling::kOther;
  }
}

int ToTj(Subsampling subsampling) {
  switch (subsampling) {
    case Subsampling::k444:
      return TJSAMP_444;
    case Subsampling::k422:
      return TJSAMP_422;
    case Subsampling::k440:
      return TJSAMP_440;
    case Subsampling::k411:
      return TJSAMP_411;
    case Subsampling::kGray:
      return TJSAMP_GRAY;
    default:
      return TJSAMP_420;
  }
}

std::string TjError(tjhandle handle) { return tjGetErrorStr2(handle); }

}  // namespace

Result<JpegHeader> ReadJpegHeader(std::span<const std::byte> bytes) {
  tjhandle handle = Decompressor();
  if (handle == nullptr) return Status::Internal("tjInitDecompress failed");
  int width = 0;
  int height = 0;
  int subsamp = 0;
  int colorspace = 0;
  if (tjDecompressHeader3(handle, reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<unsigned long>(bytes.size()), &width, &height, &subsamp,
                          &colorspace) != 0) {
    return Status::InvalidInput("bad JPEG header: " + TjError(handle));
  }
  if (width <= 0 || height <= 0) return Status::InvalidInput("JPEG declares no pixels");
  JpegHeader header;
  header.width = static_cast<std::uint32_t>(width);
  header.height = static_cast<std::uint32_t>(height);
  header.subsampling = FromTj(subsamp);
  header.channels = colorspace == TJCS_GRAY                                ? 1
                    : (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) ? 4
                                                                           : 3;
  return header;
}

Status CheckJpegScanCount(std::span<const std::byte> bytes, int max_scans) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned>(bytes[i]); };
  int scans = 0;
  std::size_t pos = 2;  // after SOI
  while (pos + 1 < bytes.size()) {
    if (at(pos) != 0xFF) {
      // Entropy-coded data (or padding): on to the next 0xFF. memchr, not a byte at a time: this
      // scan runs over every byte of every image an import or a loader takes in.
      const void* next = std::memchr(bytes.data() + pos, 0xFF, bytes.size() - pos);
      if (next == nullptr) break;
      pos = static_cast<std::size_t>(static_cast<const std::byte*>(next) - bytes.data());
      continue;
    }
    const unsigned marker = at(pos + 1);
    // Stuffed 0xFF00, fill bytes and restart markers belong to the entropy-coded data.
    if (marker == 0x00 || marker == 0xFF || (marker >= 0xD0 && marker <= 0xD7)) {
      pos += marker == 0xFF ? 1 : 2;
      continue;
    }
    if (marker == 0xD9) break;  // end of image
    if (marker == 0x01 || marker == 0xD8) {
      pos += 2;
      continue;
    }
    if (pos + 4 > bytes.size()) break;
    const std::size_t length = (std::size_t{at(pos + 2)} << 8) | at(pos + 3);
    if (marker == 0xDA && ++scans > max_scans) {
      return Status::InvalidInput("JPEG with more than " + std::to_string(max_scans) +
                                  " scans (a limit against files that make the decoder spin)");
    }
    pos += 2 + std::max<std::size_t>(length, 2);
  }
  return Status::OK();
}

Result<Pixels> DecodeJpeg(std::span<const std::byte> bytes, std::uint32_t min_short_side) {
  PACKREC_ASSIGN_OR_RETURN(const JpegHeader header, ReadJpegHeader(bytes));
  if (static_cast<std::uint64_t>(header.width) * header.height > MaxImagePixels()) {
    return Status::InvalidInput("JPEG of " + std::to_string(header.width) + "x" +
                                std::to_string(header.height) + " exceeds the pixel limit");
  }
  PACKREC_RETURN_IF_ERROR(CheckJpegScanCount(bytes, DecodeLimits{}.max_scans));
  int width = static_cast<int>(header.width);
  int height = static_cast<int>(header.height);
  if (min_short_side > 0) {
    int count = 0;
    const tjscalingfactor* factors = tjGetScalingFactors(&count);
    int best_width = width;
    int best_height = height;
    for (int i = 0; i < count; ++i) {
      if (factors[i].num > factors[i].denom) continue;  // never upscale in the decoder
      const int w = TJSCALED(width, factors[i]);
      const int h = TJSCALED(height, factors[i]);
      if (static_cast<std::uint32_t>(std::min(w, h)) >= min_short_side &&
          w * h < best_width * best_height) {
        best_width = w;
        best_height = h;
      }
    }
    width = best_width;
    height = best_height;
  }
  const bool gray = header.channels == 1;
  const bool cmyk = header.channels == 4;
  Pixels pixels;
  pixels.width = static_cast<std::uint32_t>(width);
  pixels.height = static_cast<std::uint32_t>(height);
  pixels.channels = gray ? 1 : 3;
  const int decode_channels = gray ? 1 : (cmyk ? 4 : 3);
  std::vector<std::uint8_t> decoded(static_cast<std::size_t>(width) * height * decode_channels);
  tjhandle handle = Decompressor();
  const int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  if (tjDecompress2(handle, reinterpret_cast<const unsigned char*>(bytes.data()),
                    static_cast<unsigned long>(bytes.size()), decoded.data(), width, 0, height,
                    gray ? TJPF_GRAY : (cmyk ? TJPF_CMYK : TJPF_RGB), flags) != 0) {
    return Status::InvalidInput("JPEG does not decode: " + TjError(handle));
  }
  if (cmyk) {
    // libjpeg writes Adobe's inverted CMYK: each channel is already 255 - ink.
    pixels.data.resize(static_cast<std::size_t>(width) * height * 3);
    for (std::size_t p = 0, n = static_cast<std::size_t>(width) * height; p < n; ++p) {
      const unsigned k = decoded[p * 4 + 3];
      for (int c = 0; c < 3; ++c) {
        pixels.data[p * 3 + c] = static_cast<std::uint8_t>(decoded[p * 4 + c] * k / 255);
      }
    }
  } else {
    pixels.data = std::move(decoded);
  }
  return pixels;
}

Result<std::vector<std::byte>> EncodeJpeg(const Pixels& pixels, const JpegEncodeOptions& options) {
  tjhandle handle = Compressor(options.progressive);
  if (handle == nullptr) return Status::Internal("tjInitCompress failed");
  const bool gray = pixels.channels == 1;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  const int flags = options.progressive ? TJFLAG_PROGRESSIVE : 0;
  if (tjCompress2(handle, pixels.data.data(), static_cast<int>(pixels.width), 0,
                  static_cast<int>(pixels.height), gray ? TJPF_GRAY : TJPF_RGB, &out, &out_size,
                  gray ? TJSAMP_GRAY : ToTj(options.subsampling), options.quality, flags) != 0) {
    const std::string message = TjError(handle);
    tjFree(out);
    return Status::Internal("JPEG encode failed: " + message);
  }
  std::vector<std::byte> bytes(reinterpret_cast<std::byte*>(out),
                               reinterpret_cast<std::byte*>(out) + out_size);
  tjFree(out);
  return bytes;
}

}  // namespace packrec
