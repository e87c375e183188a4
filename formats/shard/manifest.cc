#include "shard/manifest.h"

#include <nlohmann/json.hpp>

#include "core/checksum.h"
#include "shard/shard_layout.h"

namespace packrec::shard {
namespace {

using nlohmann::json;

constexpr char kChecksumField[] = "manifest_xxh64";

// The checksum covers the canonical serialisation of every other field (keys sorted, 2-space
// indent), so it does not depend on how a reader re-serialises numbers or whitespace.
std::uint64_t BodyChecksum(const json& body) { return Xxh64(body.dump(2)); }

}  // namespace

Result<std::string> SerializeManifest(const Manifest& manifest) {
  json options = json::parse(manifest.options_json, nullptr, /*allow_exceptions=*/false);
  if (options.is_discarded() || !options.is_object()) {
    return Status::InvalidArgument("dataset options are not a JSON object: " +
                                   manifest.options_json);
  }
  json body;
  body["format"] = kManifestFormatName;
  body["format_version"] = manifest.format_version;
  body["record_count"] = manifest.record_count;
  body["rejected_count"] = manifest.rejected_count;
  body["payload_bytes"] = manifest.payload_bytes;
  body["classes"] = manifest.classes;
  body["label_count"] = manifest.label_count;
  body["listing_hash"] = manifest.listing_hash;
  body["source_kind"] = manifest.source_kind;
  body["options"] = std::move(options);
  body["created_by"] = manifest.created_by;
  json shards = json::array();
  for (const ManifestShard& shard : manifest.shards) {
    shards.push_back({{"file", shard.file},
                      {"first_record", shard.first_record},
                      {"record_count", shard.record_count},
                      {"size_bytes", shard.size_bytes},
                      {"xxh64", Hex64(shard.xxh64)}});
  }
  body["shards"] = std::move(shards);
  try {
    body[kChecksumField] = Hex64(BodyChecksum(body));
    return body.dump(2) + "\n";
  } catch (const json::exception& error) {  // a class name or key that is not UTF-8
    return Status::InvalidArgument(std::string("manifest cannot be written: ") + error.what());
  }
}

Result<Manifest> ParseManifest(std::string_view text, std::string_view name) {
  const std::string where(name);
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return Status::Corruption(where + ": not a valid JSON object");
  }
  try {
    if (!body.contains(kChecksumField) || !body[kChecksumField].is_string()) {
      return Status::Corruption(where + ": no " + std::string(kChecksumField) + " field");
    }
    std::uint64_t stored = 0;
    if (!ParseHex64(body[kChecksumField].get<std::string>(), &stored)) {
      return Status::Corruption(where + ": malformed " + std::string(kChecksumField));
    }
    body.erase(kChecksumField);
    const std::uint64_t computed = BodyChecksum(body);
    if (stored != computed) {
      return Status::Corruption(where + ": checksum mismatch (stored " + Hex64(stored) +
                                ", computed " + Hex64(computed) + ")");
    }
    if (body.at("format").get<std::string>() != kManifestFormatName) {
      return Status::Corruption(where + ": format is not " + std::string(kManifestFormatName));
    }
    Manifest manifest;
    manifest.format_version = body.at("format_version").get<std::uint32_t>();
    if (manifest.format_version > kShardFormatVersion) {
      return Status::NotSupported(
          where + ": format version " + std::to_string(manifest.format_version) +
          " is newer than this packrec supports (" + std::to_string(kShardFormatVersion) + ")");
    }
    if (manifest.format_version == 0) return Status::Corruption(where + ": format version 0");
    manifest.record_count = body.at("record_count").get<std::uint64_t>();
    manifest.rejected_count = body.at("rejected_count").get<std::uint64_t>();
    manifest.payload_bytes = body.at("payload_bytes").get<std::uint64_t>();
    manifest.classes = body.at("classes").get<std::vector<std::string>>();
    manifest.label_count = body.at("label_count").get<std::uint32_t>();
    manifest.listing_hash = body.at("listing_hash").get<std::string>();
    manifest.source_kind = body.at("source_kind").get<std::string>();
    manifest.options_json = body.at("options").dump();
    manifest.created_by = body.at("created_by").get<std::string>();
    std::uint64_t next_record = 0;
    for (const json& item : body.at("shards")) {
      ManifestShard shard;
      shard.file = item.at("file").get<std::string>();
      shard.first_record = item.at("first_record").get<std::uint64_t>();
      shard.record_count = item.at("record_count").get<std::uint64_t>();
      shard.size_bytes = item.at("size_bytes").get<std::uint64_t>();
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
    if (next_record != manifest.record_count) {
      return Status::Corruption(where + ": shards hold " + std::to_string(next_record) +
                                " records, record_count says " +
                                std::to_string(manifest.record_count));
    }
    return manifest;
  } catch (const json::exception& error) {
    return Status::Corruption(where + ": missing or mistyped field (" + error.what() + ")");
  }
}

}  // namespace packrec::shard
