// The dataset-level fields every format stores (counts, classes, listing hash, options), as one
// JSON document with a checksum over its canonical form. The shard format keeps it in
// manifest.json; the LMDB format under a metadata key.
#ifndef PACKREC_LIB_STORAGE_MANIFEST_JSON_H_
#define PACKREC_LIB_STORAGE_MANIFEST_JSON_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/reader.h"
#include "packrec/status.h"
#include "packrec/writer.h"

namespace packrec {

struct DatasetManifest {
  std::string format;  // "packrec-shard", "packrec-lmdb"
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
  std::vector<FieldSpec> fields;  // the record schema (written only when non-empty)
  // Records carrying each field (written only when there is one count per field).
  std::vector<std::uint64_t> field_records;
  nlohmann::json extra = nlohmann::json::object();  // format-specific top-level fields
};

// The dataset-level fields from what a writer was given and wrote.
DatasetManifest ManifestFromMetadata(const DatasetMetadata& metadata, std::string format,
                                     std::uint32_t format_version, std::uint64_t record_count,
                                     std::uint64_t payload_bytes, std::uint32_t max_label_plus_one);

// Pretty-printed JSON, keys sorted, with "manifest_xxh64" over the rest. InvalidArgument when
// options_json is not a JSON object or a string is not valid UTF-8.
Result<std::string> SerializeManifestJson(const DatasetManifest& manifest);

// Checks the checksum, the format name, the version (NotSupported above `max_version`) and the
// types of the common fields; the other top-level fields are returned in `extra`. `where` names
// the document in errors.
Result<DatasetManifest> ParseManifestJson(std::string_view text, std::string_view where,
                                          std::string_view format, std::uint32_t max_version);

// Writes `rejects` to `file` (path<TAB>reason per line, atomically) when there are any.
Status WriteRejectsFile(const std::filesystem::path& file, const std::vector<Reject>& rejects);

// A record's label checked against the manifest it is read under (a manifest can lie, its
// checksum recomputed): below label_count. Corruption naming the record otherwise, for the
// reader to place (path, key). Readers call it on every Read; verify also checks the class list.
Status CheckLabelAgainstManifest(const DatasetInfo& info, std::uint64_t index, std::uint32_t label);

// DatasetInfo with the common fields filled in; `files` is left to the format.
DatasetInfo InfoFromManifest(const DatasetManifest& manifest, std::string format_short_name);

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_MANIFEST_JSON_H_
