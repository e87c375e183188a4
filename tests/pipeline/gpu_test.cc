// The GPU upload path. Runs where packrec was built with CUDA and a device is present; elsewhere
// each case checks the clear "unavailable" error and says it skipped.
#include "packrec/gpu.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

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

std::unique_ptr<Loader> MakeLoader(const std::filesystem::path& dir) {
  test::WriteDataset(dir / "ds", test::MakeRecords(40));
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  LoaderOptions options;
  options.batch_size = 16;
  options.threads = 2;
  options.output_size = 32;
  options.resize_size = 36;
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

TEST_CASE("gpu: normalisation to float NCHW matches the host computation") {
  if (SkipWithoutDevice()) return;
  test::TempDir dir;
  auto loader = MakeLoader(dir.path());
  GpuUploaderOptions options;
  options.normalize = Normalize{};
  auto uploader = GpuUploader::Create(options);
  REQUIRE(uploader.ok());
  auto batch = loader->Next();
  REQUIRE(batch.ok());
  auto uploaded = (*uploader)->Upload(*batch);
  REQUIRE(uploaded.ok());
  REQUIRE((*uploaded)->Wait().ok());
  const Batch& host = **batch;
  std::vector<float> out(host.images().size());
  REQUIRE((*uploaded)->CopyNormalizedToHost(std::as_writable_bytes(std::span<float>(out))).ok());
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

}  // namespace
}  // namespace packrec
