// Fuzz target: what a reader is told by a manifest that lies. The input is a JSON merge patch
// (RFC 7386) applied to the manifest of a real shard dataset with labels and fields (text, json,
// bytes, float32[] of N x 4, int64[]); the checksum is then recomputed, as any tool or bug could
// write it, so that the lie reaches the reader past the checksum: a schema with types, names or
// order changed, counts or classes cut. Every record is then read every way a loader would, each
// field on its own, and verified. Errors are fine; a crash, a sanitizer report, or a field value
// handed out that is not of its declared type, or a label past label_count, is not.
#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "fuzz_util.h"
#include "packrec/dataset_ops.h"
#include "packrec/image.h"
#include "packrec/writer.h"
#include "storage/field_block.h"

namespace {

namespace fs = std::filesystem;
using namespace packrec;

// A 1 x 1 RGB PNG, the smallest image every reader and probe takes.
constexpr std::array<unsigned char, 69> kPng = {
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00,
    0x00, 0x90, 0x77, 0x53, 0xDE, 0x00, 0x00, 0x00, 0x0C, 0x49, 0x44, 0x41, 0x54, 0x08,
    0xD7, 0x63, 0xF8, 0xCF, 0xC0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xDD, 0x8D,
    0xB0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82};

std::vector<std::byte> Bytes(const std::string& text) {
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return {begin, begin + text.size()};
}

template <typename T>
std::vector<std::byte> Numbers(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian hosts
  return bytes;
}

// Six records of three classes, each with every field but a few absent ones; written once per
// process. Returns the dataset's directory.
const fs::path& HonestDataset() {
  static const fs::path dir = [] {
    const fs::path path = fuzz::ScratchDir() / "lies-base";
    std::error_code ignored;
    fs::remove_all(path, ignored);
    WriterOptions options;
    options.fields = {{"caption", FieldType::kText, "txt", {}},
                      {"meta", FieldType::kJson, "json", {}},
                      {"mask", FieldType::kBytes, "mask.bin", {}},
                      {"boxes", FieldType::kFloat32, "", {4}},
                      {"labels", FieldType::kInt64, "", {}}};
    auto writer = CreateDatasetWriter(path, options);
    if (!writer.ok()) std::abort();
    const std::span<const std::byte> image(reinterpret_cast<const std::byte*>(kPng.data()),
                                           kPng.size());
    for (std::uint32_t i = 0; i < 6; ++i) {
      const std::vector<std::vector<std::byte>> values = {
          Bytes("caption " + std::to_string(i) + "!"), Bytes("{\"i\": " + std::to_string(i) + "}"),
          Bytes(std::string(5 + i, '\xff')),
          Numbers<float>({1.0f * static_cast<float>(i), 2, 3, 4}),
          Numbers<std::int64_t>({i, -1, 7})};
      std::vector<FieldView> views;
      for (std::size_t f = 0; f < values.size(); ++f) {
        const bool present = (i + f) % 4 != 3;
        views.push_back({present, present ? std::span<const std::byte>(values[f])
                                          : std::span<const std::byte>()});
      }
      const std::string key = "k/" + std::to_string(i) + ".png";
      RecordInput input{key, i % 3, image, *ProbeImage(image)};
      input.fields = views;
      if (!(*writer)->Add(input).ok()) std::abort();
    }
    DatasetMetadata metadata;
    metadata.classes = {"a", "b", "c"};
    metadata.listing_hash = "0000000000000000";
    if (!(*writer)->Finish(metadata).ok()) std::abort();
    return path;
  }();
  return dir;
}

const nlohmann::json& HonestManifest() {
  static const nlohmann::json manifest = [] {
    const Result<std::vector<std::byte>> text = ReadWholeFile(HonestDataset() / "manifest.json");
    if (!text.ok()) std::abort();
    return nlohmann::json::parse(
        std::string_view(reinterpret_cast<const char*>(text->data()), text->size()));
  }();
  return manifest;
}

// What the readers hand out must be what the manifest they read it under declares.
void ReadAllAndCheck(const fs::path& dir) {
  Result<std::unique_ptr<Reader>> reader = OpenDataset(dir);
  if (!reader.ok()) return;
  const DatasetInfo& info = (*reader)->info();
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < std::min<std::uint64_t>((*reader)->size(), 64); ++i) {
    const Result<RecordView> view = (*reader)->Read(i, scratch);
    if (view.ok()) {
      if (info.label_count != 0 && view->label >= info.label_count) std::abort();
      for (std::size_t f = 0; f < info.fields.size() && f < view->fields.size(); ++f) {
        if (!CheckFieldValue(info.fields[f], view->fields[f]).ok()) std::abort();
      }
    }
    for (std::size_t f = 0; f < info.fields.size(); ++f) {
      const Result<FieldView> value = (*reader)->ReadField(i, f, scratch);
      if (value.ok() && !CheckFieldValue(info.fields[f], *value).ok()) std::abort();
    }
  }
  fuzz::Quiet quiet;
  (void)VerifyDataset(**reader, VerifyOptions{}, quiet);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json patch = nlohmann::json::parse(
      std::string_view(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (patch.is_discarded()) return 0;
  nlohmann::json manifest = HonestManifest();
  manifest.merge_patch(patch);
  if (!manifest.is_object()) return 0;
  manifest.erase("manifest_xxh64");
  manifest["manifest_xxh64"] = Hex64(Xxh64(manifest.dump(2)));
  const fs::path dir = HonestDataset();
  if (!WriteFileAtomically(dir / "manifest.json", AsBytes(manifest.dump(2))).ok()) return 0;
  fuzz::ReadEverything(dir);
  ReadAllAndCheck(dir);
  return 0;
}
