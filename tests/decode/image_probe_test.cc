#include <doctest/doctest.h>

#include "decode/codecs.h"
#include "packrec/image.h"
#include "test_util.h"

namespace packrec {
namespace {

std::vector<std::byte> Text(std::string_view text) {
  std::vector<std::byte> bytes(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<std::byte>(text[i]);
  return bytes;
}

TEST_CASE("probe reads a baseline color JPEG's size, channels and subsampling") {
  const auto jpeg = test::MakeJpeg(321, 123, 1);
  auto info = ProbeImage(jpeg);
  REQUIRE(info.ok());
  CHECK(info->encoding == Encoding::kJpeg);
  CHECK(info->width == 321);
  CHECK(info->height == 123);
  CHECK(info->channels == 3);
  CHECK(info->subsampling == Subsampling::k420);
  CHECK_FALSE(info->progressive);
}

TEST_CASE("probe tells progressive and grayscale JPEGs") {
  auto progressive = ProbeImage(test::MakeJpeg(64, 48, 2, false, true));
  REQUIRE(progressive.ok());
  CHECK(progressive->progressive);
  auto gray = ProbeImage(test::MakeJpeg(64, 48, 3, true));
  REQUIRE(gray.ok());
  CHECK(gray->channels == 1);
  CHECK(gray->subsampling == Subsampling::kGray);
}

TEST_CASE("probe reads a PNG's IHDR") {
  auto info = ProbeImage(test::MakePng(40, 30, 1));
  REQUIRE(info.ok());
  CHECK(info->encoding == Encoding::kPng);
  CHECK(info->width == 40);
  CHECK(info->height == 30);
  CHECK(info->channels == 3);
}

TEST_CASE("probe rejects truncated JPEGs and PNGs, empty files and other encodings by name") {
  auto jpeg = test::MakeJpeg(200, 100, 4);
  jpeg.resize(jpeg.size() / 2);
  auto truncated = ProbeImage(jpeg);
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.status().code() == StatusCode::kInvalidInput);
  CHECK(truncated.status().message().find("truncated JPEG") != std::string::npos);

  auto header_only = test::MakeJpeg(200, 100, 4);
  header_only.resize(100);
  CHECK_FALSE(ProbeImage(header_only).ok());

  auto png = test::MakePng(50, 50, 2);
  png.resize(png.size() - 20);
  auto png_truncated = ProbeImage(png);
  REQUIRE_FALSE(png_truncated.ok());
  CHECK(png_truncated.status().message().find("truncated PNG") != std::string::npos);

  CHECK(ProbeImage({}).status().message().find("empty") != std::string::npos);
  CHECK(ProbeImage(Text("BM\x10\x00\x00\x00")).status().message().find("BMP") != std::string::npos);
  CHECK(ProbeImage(Text("GIF89a......")).status().message().find("GIF") != std::string::npos);
  CHECK(ProbeImage(Text("hello world")).status().message().find("not a JPEG, PNG or WebP") !=
        std::string::npos);
}

TEST_CASE("check-decodes accepts real images and names the decoder's complaint") {
  CHECK(CheckDecodes(test::MakeJpeg(100, 80, 5)).ok());
  CHECK(CheckDecodes(test::MakePng(20, 10, 5)).ok());
  auto jpeg = test::MakeJpeg(300, 300, 6);
  // Damage the entropy-coded data in the middle; the header still parses.
  for (std::size_t i = jpeg.size() / 2; i < jpeg.size() / 2 + 64; ++i) jpeg[i] = std::byte{0x00};
  Status status = CheckDecodes(jpeg);
  CHECK(status.code() == StatusCode::kInvalidInput);
  CHECK(status.message().find("JPEG does not decode") != std::string::npos);
}

TEST_CASE("transcode scales the shorter side down and re-encodes as JPEG") {
  auto small = TranscodeToJpeg(test::MakeJpeg(400, 300, 7), 150, 80);
  REQUIRE(small.ok());
  auto info = ProbeImage(*small);
  REQUIRE(info.ok());
  CHECK(info->height == 150);
  CHECK(info->width == 200);
  // Never upscales; a PNG comes out as JPEG.
  auto from_png = TranscodeToJpeg(test::MakePng(60, 40, 1), 150, 90);
  REQUIRE(from_png.ok());
  auto png_info = ProbeImage(*from_png);
  REQUIRE(png_info.ok());
  CHECK(png_info->encoding == Encoding::kJpeg);
  CHECK(png_info->width == 60);
  CHECK(png_info->height == 40);
  auto gray = TranscodeToJpeg(test::MakeJpeg(100, 400, 8, true), 50, 90);
  REQUIRE(gray.ok());
  auto gray_info = ProbeImage(*gray);
  REQUIRE(gray_info.ok());
  CHECK(gray_info->channels == 1);
  CHECK(gray_info->width == 50);
  CHECK(gray_info->height == 200);
}

TEST_CASE("baseline JPEGs made after a progressive one still decode") {
  // libjpeg-turbo 2.1 corrupts baseline output of a handle that made a progressive JPEG.
  for (int round = 0; round < 3; ++round) {
    CHECK(CheckDecodes(
              test::MakeJpeg(120, 90, 10 + static_cast<std::uint64_t>(round), false, round == 1))
              .ok());
  }
}

}  // namespace
}  // namespace packrec
