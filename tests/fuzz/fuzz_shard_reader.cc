// Fuzz target: the shard reader. The input is one shard file; a manifest that agrees with it (its
// size, whole-file checksum, and the record count its footer claims) is written beside it, so the
// bytes get past the manifest's checks into header, footer, index and record parsing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/checksum.h"
#include "core/file_io.h"
#include "fuzz_util.h"
#include "shard/manifest.h"
#include "shard/shard_layout.h"
#include "storage/manifest_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  using namespace packrec;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const fs::path dir = fuzz::FreshDir("shard");
  if (!WriteWholeFile(dir / "shard-000000.pkr", bytes, true).ok()) return 0;
  std::uint64_t records = 1;
  if (size >= shard::kFooterSize) {
    shard::Footer footer;
    std::array<std::byte, shard::kFooterSize> tail;
    std::memcpy(tail.data(), data + size - shard::kFooterSize, shard::kFooterSize);
    if (shard::DecodeFooter(tail, &footer) == shard::DecodeError::kNone) {
      records = std::min<std::uint64_t>(footer.record_count, 1u << 20);
    }
  }
  shard::Manifest manifest;
  manifest.common.format = shard::kManifestFormatName;
  manifest.common.format_version = shard::kShardFormatVersion;
  manifest.common.record_count = records;
  manifest.common.label_count = 1000;
  manifest.common.listing_hash = "0000000000000000";
  manifest.common.source_kind = "fuzz";
  manifest.shards.push_back({"shard-000000.pkr", 0, records, size, Xxh64(bytes)});
  Result<std::string> text = shard::SerializeManifest(manifest);
  if (!text.ok() || !WriteWholeFile(dir / shard::kManifestName, AsBytes(*text), true).ok()) {
    return 0;
  }
  fuzz::ReadEverything(dir);
  return 0;
}
