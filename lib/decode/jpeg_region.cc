// Region decoding through libjpeg-turbo's libjpeg API (the only file that includes jpeglib.h):
// TurboJPEG 2.1, which Debian 12 ships, cannot crop, while the libjpeg API can skip whole rows
// (jpeg_skip_scanlines) and decode only the iMCU columns that hold the region
// (jpeg_crop_scanline), as DALI does for RandomResizedCrop.
//
// libjpeg reports errors by calling error_exit, which must not return: it longjmps back here.
// Nothing with a destructor is created between setjmp and the libjpeg calls it protects.
// jpeglib.h uses size_t and FILE without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>

#include "decode/codecs.h"

namespace packrec {
namespace {

struct ErrorManager {
  jpeg_error_mgr base;  // first, so libjpeg's pointer to it is a pointer to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool stop_on_warning;
  int max_scans;
  jpeg_progress_mgr progress;
};

[[noreturn]] void OnError(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int level) {
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (level < 0) {  // a warning: corrupt or truncated data that libjpeg would paper over
    if (errors->stop_on_warning) {
      (*cinfo->err->format_message)(cinfo, errors->message);
      std::longjmp(errors->jump, 1);
    }
    ++cinfo->err->num_warnings;
  }
}

void OnProgress(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (cinfo->is_decompressor) {
    const auto* decompress = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (decompress->input_scan_number > errors->max_scans) {
      std::snprintf(errors->message, sizeof errors->message,
                    "progressive JPEG with more than %d scans (limit against decompression bombs)",
                    errors->max_scans);
      std::longjmp(errors->jump, 1);
    }
  }
}

// The smallest of libjpeg's N/8 scales at which `size` still covers `needed` (8/8 when even the
// full size does not: upscaling is the resizer's job).
unsigned ScaleNumerator(std::uint32_t region_w, std::uint32_t region_h, std::uint32_t needed_w,
                        std::uint32_t needed_h) {
  for (unsigned num = 1; num < 8; ++num) {
    const std::uint64_t w = (std::uint64_t{region_w} * num + 7) / 8;
    const std::uint64_t h = (std::uint64_t{region_h} * num + 7) / 8;
    if (w >= needed_w && h >= needed_h) return num;
  }
  return 8;
}

void CmykToRgb(const std::uint8_t* cmyk, std::uint8_t* rgb, std::size_t pixels, bool inverted) {
  // Adobe writes inverted CMYK (the common case in JPEGs); libjpeg hands it over as stored.
  for (std::size_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    unsigned c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    rgb[0] = static_cast<std::uint8_t>(c * k / 255);
    rgb[1] = static_cast<std::uint8_t>(m * k / 255);
    rgb[2] = static_cast<std::uint8_t>(y * k / 255);
  }
}

// One libjpeg decompressor per thread, reset between images with jpeg_abort_decompress as
// TurboJPEG does: creating one costs its memory pools every time.
struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorManager errors;
  bool created = false;

  Decompressor() {
    cinfo.err = jpeg_std_error(&errors.base);
    errors.base.error_exit = OnError;
    errors.base.emit_message = OnMessage;
    errors.progress.progress_monitor = OnProgress;
    if (setjmp(errors.jump) != 0) return;  // out of memory in jpeg_create_decompress
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &errors.progress;
    created = true;
  }
  ~Decompressor() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
};

// The scaled image's rows and columns holding the region, set up on `cinfo` (cropped to the
// iMCU columns around it, the rows above it skipped). Called between setjmp and the end of the
// decode: only trivially destructible locals here, for libjpeg's longjmp on an error.
struct ScanlineWindow {
  std::size_t row_bytes = 0;    // one output row as libjpeg delivers it (after the crop)
  JDIMENSION out_rows = 0;      // the region's rows at this scale
  JDIMENSION skip_columns = 0;  // the columns left of the region in each delivered row
  JDIMENSION columns = 0;       // the region's columns at this scale
};

ScanlineWindow StartWindow(jpeg_decompress_struct& cinfo, const Rect& region, unsigned num) {
  // The region at this scale (floor of its start, ceiling of its end).
  const auto scaled = [num](std::uint32_t v) { return static_cast<JDIMENSION>(v * num / 8); };
  const auto scaled_up = [num](std::uint32_t v) {
    return static_cast<JDIMENSION>((std::uint64_t{v} * num + 7) / 8);
  };
  const JDIMENSION x0 = scaled(region.x);
  const JDIMENSION y0 = scaled(region.y);
  const JDIMENSION x1 =
      std::min<JDIMENSION>(scaled_up(region.x + region.width), cinfo.output_width);
  const JDIMENSION y1 =
      std::min<JDIMENSION>(scaled_up(region.y + region.height), cinfo.output_height);
  JDIMENSION crop_x = x0;
  JDIMENSION crop_width = std::max<JDIMENSION>(1, x1 - x0);
  if (crop_width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &crop_x, &crop_width);
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, y0);
  ScanlineWindow window;
  window.row_bytes =
      std::size_t{cinfo.output_width} * static_cast<unsigned>(cinfo.output_components);
  window.out_rows = std::max<JDIMENSION>(1, y1 - y0);
  window.skip_columns = x0 - crop_x;
  window.columns = std::max<JDIMENSION>(
      1, std::min<JDIMENSION>(x1 - x0, cinfo.output_width - window.skip_columns));
  return window;
}

// Reads `out_rows` rows of `row_bytes` into `destination` (libjpeg may longjmp out of it).
void ReadScanlines(jpeg_decompress_struct& cinfo, std::uint8_t* destination, std::size_t row_bytes,
                   JDIMENSION out_rows) {
  constexpr JDIMENSION kRowsPerCall = 32;  // libjpeg hands out up to one iMCU row per call
  JSAMPROW pointers[kRowsPerCall];
  for (JDIMENSION read = 0; read < out_rows;) {
    const JDIMENSION want = std::min(kRowsPerCall, out_rows - read);
    for (JDIMENSION i = 0; i < want; ++i) pointers[i] = destination + row_bytes * (read + i);
    const JDIMENSION got = jpeg_read_scanlines(&cinfo, pointers, want);
    if (got == 0) break;
    read += got;
  }
}

// The region's `columns` of each delivered row (starting `skip_bytes` in), as RGB into `rgb`.
void CutColumns(const std::vector<std::uint8_t>& rows, std::size_t row_bytes,
                std::size_t skip_bytes, JDIMENSION columns, JDIMENSION out_rows, bool cmyk,
                bool inverted, std::vector<std::uint8_t>& rgb) {
  rgb.resize(std::size_t{columns} * out_rows * 3);
  for (JDIMENSION y = 0; y < out_rows; ++y) {
    const std::uint8_t* source = rows.data() + row_bytes * y + skip_bytes;
    std::uint8_t* target = rgb.data() + std::size_t{columns} * 3 * y;
    if (cmyk) {
      CmykToRgb(source, target, columns, inverted);
    } else {
      std::memcpy(target, source, std::size_t{columns} * 3);
    }
  }
}

}  // namespace

Status DecodeJpegRegion(std::span<const std::byte> bytes, const JpegRegionRequest& request,
                        JpegRegion* result, std::vector<std::uint8_t>& rgb,
                        std::vector<std::uint8_t>& rows) {
  thread_local Decompressor decompressor;
  if (!decompressor.created) return Status::Internal("libjpeg could not allocate a decompressor");
  jpeg_decompress_struct& cinfo = decompressor.cinfo;
  ErrorManager& errors = decompressor.errors;
  errors.stop_on_warning = request.limits.stop_on_warning;
  errors.max_scans = request.limits.max_scans;
  errors.message[0] = '\0';
  errors.base.num_warnings = 0;
  if (setjmp(errors.jump) != 0) {
    jpeg_abort_decompress(&cinfo);  // ready for the next image
    return Status::InvalidInput(std::string("JPEG does not decode: ") + errors.message);
  }
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const std::uint32_t width = cinfo.image_width;
  const std::uint32_t height = cinfo.image_height;
  if (std::uint64_t{width} * height > MaxPixels(request.limits) || width == 0 || height == 0) {
    jpeg_abort_decompress(&cinfo);
    return Status::InvalidInput("JPEG of " + std::to_string(width) + "x" + std::to_string(height) +
                                " exceeds the pixel limit");
  }
  const Rect region = ClampRegion(
      request.choose ? request.choose(width, height) : Rect{0, 0, width, height}, width, height);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  const bool inverted = cmyk && cinfo.saw_Adobe_marker;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  const unsigned num =
      ScaleNumerator(region.width, region.height, request.needed_width, request.needed_height);
  cinfo.scale_num = num;
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);
  const ScanlineWindow window = StartWindow(cinfo, region, num);
  const std::size_t row_bytes = window.row_bytes;
  const JDIMENSION out_rows = window.out_rows;
  const JDIMENSION skip_columns = window.skip_columns;
  const JDIMENSION columns = window.columns;
  const int components = cinfo.output_components;
  // Rows go straight to their destination when nothing needs cutting or converting: the
  // caller's output when it is exactly this size, else `rgb`; otherwise through `rows`.
  const bool whole_rows = !cmyk && skip_columns == 0 && columns == cinfo.output_width;
  const bool into_output = whole_rows && request.output.size() == row_bytes * out_rows &&
                           cinfo.output_width == request.needed_width &&
                           out_rows == request.needed_height;
  // Sized before any row is read: no allocation (and nothing to unwind) after this point but
  // inside the vectors, which outlive the longjmp.
  std::uint8_t* destination = nullptr;
  if (into_output) {
    destination = request.output.data();
  } else if (whole_rows) {
    rgb.resize(row_bytes * out_rows);
    destination = rgb.data();
  } else {
    rows.resize(row_bytes * out_rows);
    destination = rows.data();
  }
  ReadScanlines(cinfo, destination, row_bytes, out_rows);
  jpeg_abort_decompress(&cinfo);  // the rows below the region are never decoded

  result->width = columns;
  result->height = out_rows;
  result->image_width = width;
  result->image_height = height;
  result->scale_num = num;
  result->region = region;
  result->in_output = into_output;
  if (!whole_rows) {
    CutColumns(rows, row_bytes, std::size_t{skip_columns} * static_cast<unsigned>(components),
               columns, out_rows, cmyk, inverted, rgb);
  }
  return Status::OK();
}

}  // namespace packrec
