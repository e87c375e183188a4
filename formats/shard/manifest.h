// manifest.json of a shard dataset: the list of shards and everything dataset-wide.
// Written last, atomically; see docs/formats/shard.md for its fields.
#ifndef PACKREC_FORMATS_SHARD_MANIFEST_H_
#define PACKREC_FORMATS_SHARD_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/status.h"

namespace packrec::shard {

struct ManifestShard {
  std::string file;  // a plain file name inside the dataset directory
  std::uint64_t first_record = 0;
  std::uint64_t record_count = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t xxh64 = 0;  // of the whole file
};

struct Manifest {
  std::uint32_t format_version = 0;
  std::uint64_t record_count = 0;
  std::uint64_t rejected_count = 0;
  std::uint64_t payload_bytes = 0;
  std::vector<std::string> classes;
  std::uint32_t label_count = 0;
  std::string listing_hash;
  std::string source_kind;
  std::string options_json = "{}";
  std::string created_by;
  std::vector<ManifestShard> shards;
};

// Pretty-printed JSON with a "manifest_xxh64" field over the rest. InvalidArgument when
// options_json is not a JSON object or a string is not valid UTF-8.
Result<std::string> SerializeManifest(const Manifest& manifest);

// Checks the checksum, the types and the consistency of every field (shards contiguous, counts
// adding up, file names without '/'). `name` is used in error messages.
Result<Manifest> ParseManifest(std::string_view text, std::string_view name);

}  // namespace packrec::shard

#endif  // PACKREC_FORMATS_SHARD_MANIFEST_H_
