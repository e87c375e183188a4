// DecodeInto: region decoding, DCT scaling, flips, color conversion and the limits against
// hostile files, checked against full decodes by TurboJPEG and libpng.
#include "packrec/decode.h"

#include <doctest/doctest.h>
#include <sys/resource.h>

#include <chrono>

#include <algorithm>
#include <cstdlib>

#include "decode/codecs.h"
#include "test_util.h"

namespace packrec {
namespace {

std::vector<std::uint8_t> Decode(std::span<const std::byte> bytes, DecodeRequest request) {
  std::vector<std::uint8_t> out(std::size_t{request.out_width} * request.out_height * 3);
  DecodeScratch scratch;
  const Status status = DecodeInto(bytes, request, out, scratch);
  REQUIRE_MESSAGE(status.ok(), status.ToString());
  return out;
}

// The region of a full-size RGB decode, as the reference for region decodes.
std::vector<std::uint8_t> Crop(const Pixels& full, Rect r) {
  std::vector<std::uint8_t> out;
  for (std::uint32_t y = r.y; y < r.y + r.height; ++y) {
    for (std::uint32_t x = r.x; x < r.x + r.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        out.push_back(full.channels == 3 ? full.data[(std::size_t{y} * full.width + x) * 3 + c]
                                         : full.data[std::size_t{y} * full.width + x]);
      }
    }
  }
  return out;
}

int MaxDifference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  int worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

TEST_CASE("decode: the whole image at its own size is TurboJPEG's decode, byte for byte") {
  for (const bool progressive : {false, true}) {
    const auto jpeg = test::MakeJpeg(123, 77, 5, /*gray=*/false, progressive);
    auto full = DecodeJpeg(jpeg);
    REQUIRE(full.ok());
    const auto ours = Decode(jpeg, {123, 77, {}, false, {}});
    CHECK(ours == full->data);
  }
}

TEST_CASE("decode: a region is the same pixels as the region of a full decode") {
  const auto jpeg = test::MakeJpeg(256, 192, 8);
  auto full = DecodeJpeg(jpeg);
  REQUIRE(full.ok());
  for (const Rect region : {Rect{0, 0, 256, 192}, Rect{64, 32, 100, 80}, Rect{17, 93, 51, 40},
                            Rect{200, 150, 56, 42}, Rect{0, 100, 256, 1}}) {
    CAPTURE(region.x);
    CAPTURE(region.y);
    DecodeRequest request{region.width,
                          region.height,
                          [region](std::uint32_t, std::uint32_t) { return region; },
                          false,
                          {}};
    const auto ours = Decode(jpeg, request);
    // Rows are skipped and columns cut at iMCU boundaries; the chroma upsampler then lacks the
    // neighbours outside the cut, which may move an edge pixel by a level or two, never more.
    CHECK(MaxDifference(ours, Crop(*full, region)) <= 3);
  }
}

TEST_CASE("decode: DCT scaling picks the smallest scale that covers the output") {
  const auto jpeg = test::MakeJpeg(800, 600, 3);
  std::vector<std::uint8_t> rgb, rows;
  JpegRegion region;
  JpegRegionRequest request;
  request.needed_width = 200;
  request.needed_height = 150;
  REQUIRE(DecodeJpegRegion(jpeg, request, &region, rgb, rows).ok());
  CHECK(region.scale_num == 2);  // 800x600 at 2/8 = 200x150
  CHECK(region.width == 200);
  CHECK(region.height == 150);
  request.needed_width = 201;
  REQUIRE(DecodeJpegRegion(jpeg, request, &region, rgb, rows).ok());
  CHECK(region.scale_num == 3);
  // A small crop of a big image: scaled by the crop, not the image.
  request.choose = [](std::uint32_t, std::uint32_t) { return Rect{100, 100, 100, 100}; };
  request.needed_width = 50;
  request.needed_height = 50;
  REQUIRE(DecodeJpegRegion(jpeg, request, &region, rgb, rows).ok());
  CHECK(region.scale_num == 4);
  CHECK(region.width == 50);
  CHECK(region.height == 50);
}

TEST_CASE("decode: horizontal flip mirrors every row") {
  const auto jpeg = test::MakeJpeg(64, 48, 2);
  const auto plain = Decode(jpeg, {40, 30, {}, false, {}});
  const auto flipped = Decode(jpeg, {40, 30, {}, true, {}});
  for (std::uint32_t y = 0; y < 30; ++y) {
    for (std::uint32_t x = 0; x < 40; ++x) {
      for (int c = 0; c < 3; ++c) {
        REQUIRE(flipped[(y * 40 + x) * 3 + c] == plain[(y * 40 + (39 - x)) * 3 + c]);
      }
    }
  }
}

TEST_CASE("decode: gray JPEG and PNG come out as RGB") {
  const auto gray = test::MakeJpeg(50, 40, 1, /*gray=*/true);
  auto full = DecodeJpeg(gray);
  REQUIRE(full.ok());
  REQUIRE(full->channels == 1);
  const auto rgb = Decode(gray, {50, 40, {}, false, {}});
  CHECK(rgb == Crop(*full, {0, 0, 50, 40}));

  const auto png = test::MakePng(60, 30, 4);
  auto png_full = DecodePng(png);
  REQUIRE(png_full.ok());
  const Rect region{10, 5, 20, 10};
  const auto png_region =
      Decode(png, {20, 10, [region](std::uint32_t, std::uint32_t) { return region; }, false, {}});
  CHECK(png_region == Crop(*png_full, region));
}

TEST_CASE("decode: hostile files are errors, never gray or half images") {
  std::vector<std::uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  DecodeRequest request{32, 32, {}, false, {}};
  auto jpeg = test::MakeJpeg(200, 150, 6);
  auto truncated = jpeg;
  truncated.resize(truncated.size() / 2);
  Status status = DecodeInto(truncated, request, out, scratch);
  CHECK(status.code() == StatusCode::kInvalidInput);
  CHECK_MESSAGE(status.message().find("Premature end") != std::string::npos, status.ToString());

  auto progressive = test::MakeJpeg(200, 150, 6, false, /*progressive=*/true);
  request.limits.max_scans = 2;
  status = DecodeInto(progressive, request, out, scratch);
  CHECK(status.code() == StatusCode::kInvalidInput);
  CHECK(status.message().find("scans") != std::string::npos);

  request.limits = {};
  request.limits.max_pixels = 100 * 100;
  status = DecodeInto(jpeg, request, out, scratch);
  CHECK(status.message().find("pixel limit") != std::string::npos);

  const std::byte junk[] = {std::byte{'G'}, std::byte{'I'}, std::byte{'F'}, std::byte{'8'}};
  CHECK(DecodeInto(junk, {32, 32, {}, false, {}}, out, scratch).code() ==
        StatusCode::kInvalidInput);
  // A request that cannot be met is the caller's error.
  CHECK(DecodeInto(jpeg, {33, 32, {}, false, {}}, out, scratch).code() ==
        StatusCode::kInvalidArgument);
}

// The same JPEG with its frame header (SOF) declaring width x height.
std::vector<std::byte> WithDeclaredSize(std::vector<std::byte> jpeg, std::uint16_t width,
                                        std::uint16_t height) {
  for (std::size_t i = 2; i + 9 < jpeg.size(); ++i) {
    const auto marker = static_cast<std::uint8_t>(jpeg[i + 1]);
    if (jpeg[i] == std::byte{0xFF} && (marker == 0xC0 || marker == 0xC2)) {
      jpeg[i + 5] = std::byte(height >> 8);
      jpeg[i + 6] = std::byte(height & 0xFF);
      jpeg[i + 7] = std::byte(width >> 8);
      jpeg[i + 8] = std::byte(width & 0xFF);
      return jpeg;
    }
  }
  FAIL("no SOF marker");
  return jpeg;
}

long PeakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST_CASE("decode: a decompression bomb is refused from its header, in bounded memory and time") {
  // A couple of KB declaring 65,500 x 65,500 (12.9 GB of RGB): refused before any allocation.
  const auto bomb = WithDeclaredSize(test::MakeJpeg(64, 48, 3), 65500, 65500);
  REQUIRE(bomb.size() < 4096);
  const long rss_before = PeakRssKiB();
  const auto start = std::chrono::steady_clock::now();
  Result<ImageInfo> probed = ProbeImage(bomb);  // what convert checks every input with
  REQUIRE_FALSE(probed.ok());
  CHECK(probed.status().code() == StatusCode::kInvalidInput);
  std::vector<std::uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  for (const bool flip : {false, true}) {
    Status status = DecodeInto(bomb, {32, 32, {}, flip, {}}, out, scratch);
    CHECK(status.code() == StatusCode::kInvalidInput);
    CHECK_MESSAGE(status.message().find("pixel limit") != std::string::npos, status.ToString());
  }
  auto full = DecodeJpeg(bomb);
  REQUIRE_FALSE(full.ok());
  CHECK(full.status().message().find("pixel limit") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(PeakRssKiB() - rss_before < 64 * 1024);  // nothing near the 12.9 GB it asks for
}

// The scan count walks the markers, skipping entropy-coded data (stuffed 0xFF00 included) to the
// next 0xFF: a baseline JPEG is one scan, libjpeg's standard progression of a colour one ten.
TEST_CASE("decode: the scan count of baseline and progressive JPEGs is exact") {
  const auto baseline = test::MakeJpeg(640, 480, 3);
  CHECK(CheckJpegScanCount(baseline, 1).ok());
  const auto progressive = test::MakeJpeg(640, 480, 3, false, /*progressive=*/true);
  CHECK(CheckJpegScanCount(progressive, 10).ok());
  CHECK(CheckJpegScanCount(progressive, 9).code() == StatusCode::kInvalidInput);
}

TEST_CASE("decode: a progressive JPEG with thousands of scans is refused, in bounded time") {
  // A real progressive JPEG whose last scan is repeated 3,000 times: each scan is valid, and
  // libjpeg would refine the whole image 3,000 times over.
  const auto progressive = test::MakeJpeg(200, 150, 6, false, /*progressive=*/true);
  REQUIRE(ProbeImage(progressive).ok());
  std::size_t last_scan = 0;
  for (std::size_t i = 0; i + 1 < progressive.size(); ++i) {
    if (progressive[i] == std::byte{0xFF} && progressive[i + 1] == std::byte{0xDA}) last_scan = i;
  }
  const std::size_t end = progressive.size() - 2;  // the end-of-image marker
  REQUIRE(progressive[end + 1] == std::byte{0xD9});
  std::vector<std::byte> spinning(progressive.begin(),
                                  progressive.begin() + static_cast<std::ptrdiff_t>(end));
  for (int copy = 0; copy < 3000; ++copy) {
    spinning.insert(spinning.end(), progressive.begin() + static_cast<std::ptrdiff_t>(last_scan),
                    progressive.begin() + static_cast<std::ptrdiff_t>(end));
  }
  spinning.push_back(std::byte{0xFF});
  spinning.push_back(std::byte{0xD9});
  const long rss_before = PeakRssKiB();
  const auto start = std::chrono::steady_clock::now();
  Result<ImageInfo> probed = ProbeImage(spinning);  // convert rejects it up front
  REQUIRE_FALSE(probed.ok());
  CHECK_MESSAGE(probed.status().message().find("scans") != std::string::npos,
                probed.status().ToString());
  std::vector<std::uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  // The repeated scans are a bogus progression, which libjpeg warns about: refused as a warning,
  // and by the scan limit when warnings are let through.
  CHECK(DecodeInto(spinning, {32, 32, {}, false, {}}, out, scratch).code() ==
        StatusCode::kInvalidInput);
  DecodeRequest lenient{32, 32, {}, false, {}};
  lenient.limits.stop_on_warning = false;
  const Status region = DecodeInto(spinning, lenient, out, scratch);
  CHECK(region.code() == StatusCode::kInvalidInput);
  CHECK_MESSAGE(region.message().find("scans") != std::string::npos, region.ToString());
  auto full = DecodeJpeg(spinning);
  REQUIRE_FALSE(full.ok());
  CHECK(full.status().message().find("scans") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(PeakRssKiB() - rss_before < 64 * 1024);
}

TEST_CASE("decode: a JPEG truncated at every 10% is an error, never a partial image") {
  const auto jpeg = test::MakeJpeg(320, 240, 8);
  std::vector<std::uint8_t> out(64 * 64 * 3);
  DecodeScratch scratch;
  for (int tenth = 0; tenth < 10; ++tenth) {
    CAPTURE(tenth);
    const std::vector<std::byte> cut(
        jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() * tenth / 10));
    CHECK(DecodeInto(cut, {64, 64, {}, false, {}}, out, scratch).code() ==
          StatusCode::kInvalidInput);
    CHECK_FALSE(DecodeJpeg(cut).ok());
  }
}

}  // namespace
}  // namespace packrec
