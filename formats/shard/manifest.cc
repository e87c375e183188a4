#include "shard/manifest.h"
#include "storage/json_util.h"

#include <nlohmann/json.hpp>

#include "core/checksum.h"
#include "shard/shard_layout.h"

namespace packrec::shard {

using nlohmann::json;

Result<std::string> SerializeManifest(const Manifest& manifest) {
  DatasetManifest common = manifest.common;
  common.format = kManifestFormatName;
  json shards = json::array();
  for (const ManifestShard& shard : manifest.shards) {
    shards.push_back({{"file", shard.file},
                      {"first_record", shard.first_record},
                      {"record_count", shard.record_count},
                      {"size_bytes", shard.size_bytes},
                      {"xxh64", Hex64(shard.xxh64)}});
  }
  common.extra["shards"] = std::move(shards);
  return SerializeManifestJson(common);
}

Result<Manifest> ParseManifest(std::string_view text, std::string_view name) {
  const std::string where(name);
  Manifest manifest;
  PACKREC_ASSIGN_OR_RETURN(
      manifest.common, ParseManifestJson(text, name, kManifestFormatName, kShardVersionWithWebp));
  try {
    std::uint64_t next_record = 0;
    for (const json& item : manifest.common.extra.at("shards")) {
      ManifestShard shard;
      shard.file = item.at("file").get<std::string>();
      shard.first_record = GetUnsigned<std::uint64_t>(item.at("first_record"));
      shard.record_count = GetUnsigned<std::uint64_t>(item.at("record_count"));
      shard.size_bytes = GetUnsigned<std::uint64_t>(item.at("size_bytes"));
      if (!ParseHex64(item.at("xxh64").get<std::string>(), &shard.xxh64)) {
        return Status::Corruption(where + ": shard " + shard.file + ": malformed xxh64");
      }
      if (shard.file.empty() || shard.file.find('/') != std::string::npos || shard.file == "." ||
          shard.file == "..") {
        return Status::Corruption(where + ": shard file name '" + shard.file +
                                  "' is not a plain file name");
      }
      if (shard.first_record != next_record || shard.record_count == 0) {
        return Status::Corruption(where + ": shard " + shard.file + " starts at record " +
                                  std::to_string(shard.first_record) + ", expected " +
                                  std::to_string(next_record) + " and at least one record");
      }
      next_record += shard.record_count;
      manifest.shards.push_back(std::move(shard));
    }
    if (next_record != manifest.common.record_count) {
      return Status::Corruption(where + ": shards hold " + std::to_string(next_record) +
                                " records, record_count says " +
                                std::to_string(manifest.common.record_count));
    }
  } catch (const json::exception& error) {
    return Status::Corruption(where + ": malformed shard list (" + error.what() + ")");
  }
  return manifest;
}

}  // namespace packrec::shard
