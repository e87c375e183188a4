// The GPU upload path. Runs where packrec was built with CUDA and a device is present; elsewhere
// each case checks the clear "unavailable" error and says it skipped.
#include "packrec/gpu.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "formats/shard_test_util.h"

namespace packrec {
namespace {

bool SkipWithoutDevice() {
  std::string why;
  if (GpuUploader::Available(&why)) return false;
  MESSAGE("skipped: no CUDA device (" << why << ")");
  auto uploader = GpuUploader::Create({});
  CHECK(uploader.status().code() == StatusCode::kNotSupported);
  CHECK(uploader.status().message() == why);
  return true;
}

std::unique_ptr<Loader> MakeLoader(const std::filesystem::path& dir, std::uint32_t size = 32,
                                   std::uint32_t batch_size = 16, bool pin_memory = true) {
  if (!std::filesystem::exists(dir / "ds")) test::WriteDataset(dir / "ds", test::MakeRecords(40));
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  LoaderOptions options;
  options.batch_size = batch_size;
  options.threads = 2;
  options.output_size = size;
  options.resize_size = size + size / 8;
  options.pin_memory = pin_memory;
  auto loader = Loader::Create(std::shared_ptr<const Reader>(std::move(*reader)), options);
  REQUIRE(loader.ok());
  return std::move(*loader);
}

TEST_CASE("gpu: pinned batches arrive on the device byte for byte") {
  if (SkipWithoutDevice()) return;
  test::TempDir dir;
  auto loader = MakeLoader(dir.path());
  auto uploader = GpuUploader::Create({});
  REQUIRE_MESSAGE(uploader.ok(), uploader.status().ToString());
  std::vector<std::shared_ptr<GpuBatch>> in_flight;
  for (;;) {
    auto batch = loader->Next();
    REQUIRE(batch.ok());
    if (*batch == nullptr) break;
    CHECK((*batch)->pinned());
    auto uploaded = (*uploader)->Upload(*batch);
    REQUIRE_MESSAGE(uploaded.ok(), uploaded.status().ToString());
    in_flight.push_back(*uploaded);  // several uploads outstanding at once
  }
  REQUIRE(in_flight.size() == 3);
  for (const auto& uploaded : in_flight) {
    REQUIRE(uploaded->Wait().ok());
    std::vector<std::uint8_t> back(uploaded->host().images().size());
    REQUIRE(uploaded->CopyImagesToHost(back).ok());
    CHECK(std::memcmp(back.data(), uploaded->host().images().data(), back.size()) == 0);
  }
}

// The loader's first batch, uploaded by an uploader that normalises (to float16 when `half`).
struct NormalizedUpload {
  std::unique_ptr<Loader> loader;
  std::unique_ptr<GpuUploader> uploader;
  std::shared_ptr<const Batch> host;
  std::shared_ptr<GpuBatch> device;
};

NormalizedUpload UploadFirstNormalized(const std::filesystem::path& dir, bool half) {
  NormalizedUpload upload;
  upload.loader = MakeLoader(dir);
  GpuUploaderOptions options;
  options.normalize = Normalize{};
  options.normalize->half = half;
  auto uploader = GpuUploader::Create(options);
  REQUIRE(uploader.ok());
  upload.uploader = std::move(*uploader);
  auto batch = upload.loader->Next();
  REQUIRE(batch.ok());
  upload.host = *batch;
  auto uploaded = upload.uploader->Upload(upload.host);
  REQUIRE(uploaded.ok());
  REQUIRE((*uploaded)->Wait().ok());
  upload.device = *uploaded;
  return upload;
}

TEST_CASE("gpu: normalisation to float NCHW matches the host computation") {
  if (SkipWithoutDevice()) return;
  test::TempDir dir;
  const NormalizedUpload upload = UploadFirstNormalized(dir.path(), false);
  const auto& uploaded = upload.device;
  const Batch& host = *upload.host;
  std::vector<float> out(host.images().size());
  REQUIRE(uploaded->CopyNormalizedToHost(std::as_writable_bytes(std::span<float>(out))).ok());
  const Normalize n;
  const std::size_t pixels = std::size_t{host.height()} * host.width();
  for (std::uint32_t i = 0; i < host.size(); ++i) {
    for (int c = 0; c < 3; ++c) {
      for (std::size_t p = 0; p < pixels; p += 37) {
        const float x = host.image(i)[p * 3 + static_cast<std::size_t>(c)] / 255.0f;
        const float expected =
            (x - n.mean[static_cast<std::size_t>(c)]) / n.std[static_cast<std::size_t>(c)];
        CHECK(std::abs(out[(i * 3 + static_cast<std::size_t>(c)) * pixels + p] - expected) < 1e-4f);
      }
    }
  }
}

float HalfToFloat(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float magnitude = 0;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

TEST_CASE("gpu: float16 normalisation matches the host computation to half precision") {
  if (SkipWithoutDevice()) return;
  test::TempDir dir;
  const NormalizedUpload upload = UploadFirstNormalized(dir.path(), true);
  const auto& uploaded = upload.device;
  const Batch& host = *upload.host;
  std::vector<std::uint16_t> out(host.images().size());
  // A float32-sized buffer is refused: the output is half the size.
  std::vector<float> wrong(host.images().size());
  CHECK(uploaded->CopyNormalizedToHost(std::as_writable_bytes(std::span<float>(wrong))).code() ==
        StatusCode::kInvalidArgument);
  REQUIRE(
      uploaded->CopyNormalizedToHost(std::as_writable_bytes(std::span<std::uint16_t>(out))).ok());
  const Normalize n;
  const std::size_t pixels = std::size_t{host.height()} * host.width();
  std::size_t checked = 0;
  for (std::uint32_t i = 0; i < host.size(); ++i) {
    for (std::size_t c = 0; c < 3; ++c) {
      for (std::size_t p = 0; p < pixels; p += 11) {
        const float x = host.image(i)[p * 3 + c] / 255.0f;
        const float expected = (x - n.mean[c]) / n.std[c];
        const float got = HalfToFloat(out[(i * 3 + c) * pixels + p]);
        CHECK(std::abs(got - expected) <= 2e-3f * std::max(1.0f, std::abs(expected)));
        ++checked;
      }
    }
  }
  CHECK(checked > 1000);
}

// Device buffers are reused once a GpuBatch is dropped; a reused one must hold the new batch and
// only it, whether the new batch is larger (the buffer grows) or smaller (the last short batch).
TEST_CASE("gpu: reused device buffers hold each new batch, larger or smaller") {
  if (SkipWithoutDevice()) return;
  test::TempDir dir;
  GpuUploaderOptions options;
  options.normalize = Normalize{};
  auto uploader = GpuUploader::Create(options);
  REQUIRE(uploader.ok());
  std::size_t batches = 0;
  for (const std::uint32_t size : {24u, 56u, 16u}) {
    for (const bool pinned : {true, false}) {
      auto loader = MakeLoader(dir.path(), size, 12, pinned);
      for (;;) {
        auto batch = loader->Next();
        REQUIRE(batch.ok());
        if (*batch == nullptr) break;
        CHECK((*batch)->pinned() == pinned);
        auto uploaded = (*uploader)->Upload(*batch);
        REQUIRE_MESSAGE(uploaded.ok(), uploaded.status().ToString());
        // The consumer's stream (here the legacy default stream) waits on the device, then the
        // host waits for that stream's copy back.
        REQUIRE((*uploaded)->MakeStreamWait(nullptr).ok());
        std::vector<std::uint8_t> back((*batch)->images().size());
        REQUIRE((*uploaded)->CopyImagesToHost(back).ok());
        CHECK(std::memcmp(back.data(), (*batch)->images().data(), back.size()) == 0);
        std::vector<float> normalized(back.size());
        REQUIRE((*uploaded)
                    ->CopyNormalizedToHost(std::as_writable_bytes(std::span<float>(normalized)))
                    .ok());
        const std::size_t last = back.size() - 1;  // the last image's last blue value
        const Normalize n;
        CHECK(std::abs(normalized[last] - (back[last] / 255.0f - n.mean[2]) / n.std[2]) < 1e-4f);
        ++batches;
      }
    }
  }
  CHECK(batches == 6 * 4);  // 40 records in batches of 12: 12, 12, 12, 4
}

TEST_CASE("gpu: a device that does not exist is refused by number") {
  if (SkipWithoutDevice()) return;
  GpuUploaderOptions options;
  options.device = 4096;
  auto uploader = GpuUploader::Create(options);
  REQUIRE_FALSE(uploader.ok());
  CHECK(uploader.status().code() == StatusCode::kInvalidArgument);
  CHECK(uploader.status().message().find("CUDA device 4096 does not exist") != std::string::npos);
  CHECK((*GpuUploader::Create({}))->Upload(nullptr).status().code() ==
        StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace packrec
