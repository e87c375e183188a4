// Fuzz target: the shard manifest parser (manifest.json). Each input is parsed as it is, and, when
// it is a JSON object, again with its checksum made right, so mutations reach the field checks
// behind the checksum.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/checksum.h"
#include "shard/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)packrec::shard::ParseManifest(text, "fuzz");
  nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return 0;
  body.erase("manifest_xxh64");
  body["manifest_xxh64"] = packrec::Hex64(packrec::Xxh64(body.dump(2)));
  (void)packrec::shard::ParseManifest(body.dump(2), "fuzz");
  return 0;
}
