// manifest.json of a shard dataset: the common dataset fields plus the list of shards.
// Written last, atomically; see docs/formats/shard.md for its fields.
#ifndef PACKREC_FORMATS_SHARD_MANIFEST_H_
#define PACKREC_FORMATS_SHARD_MANIFEST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/status.h"
#include "storage/manifest_json.h"

namespace packrec::shard {

struct ManifestShard {
  std::string file;  // a plain file name inside the dataset directory
  std::uint64_t first_record = 0;
  std::uint64_t record_count = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t xxh64 = 0;  // of the whole file
};

struct Manifest {
  DatasetManifest common;
  std::vector<ManifestShard> shards;
};

Result<std::string> SerializeManifest(const Manifest& manifest);

// Checks the common fields (SerializeManifestJson) and the shard list: shards contiguous,
// counts adding up, file names without '/'. `name` is used in error messages.
Result<Manifest> ParseManifest(std::string_view text, std::string_view name);

}  // namespace packrec::shard

#endif  // PACKREC_FORMATS_SHARD_MANIFEST_H_
