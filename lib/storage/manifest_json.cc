#include "storage/manifest_json.h"
#include "storage/json_util.h"

#include <algorithm>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/keys.h"
#include "packrec/version.h"
#include "storage/field_block.h"

namespace packrec {
namespace {

using nlohmann::json;

constexpr char kChecksumField[] = "manifest_xxh64";

// The checksum covers the canonical serialisation of every other field (keys sorted, 2-space
// indent), so it does not depend on how a reader re-serialises numbers or whitespace.
std::uint64_t BodyChecksum(const json& body) { return Xxh64(body.dump(2)); }

constexpr const char* kCommonFields[] = {
    "format",     "format_version", "record_count",  "rejected_count", "payload_bytes",
    "classes",    "label_count",    "listing_hash",  "source_kind",    "options",
    "created_by", "fields",         "field_records", kChecksumField};

}  // namespace

DatasetManifest ManifestFromMetadata(const DatasetMetadata& metadata, std::string format,
                                     std::uint32_t format_version, std::uint64_t record_count,
                                     std::uint64_t payload_bytes,
                                     std::uint32_t max_label_plus_one) {
  DatasetManifest manifest;
  manifest.format = std::move(format);
  manifest.format_version = format_version;
  manifest.record_count = record_count;
  manifest.rejected_count = metadata.rejects.size();
  manifest.payload_bytes = payload_bytes;
  manifest.classes = metadata.classes;
  manifest.label_count =
      std::max(max_label_plus_one, static_cast<std::uint32_t>(metadata.classes.size()));
  manifest.listing_hash = metadata.listing_hash;
  manifest.source_kind = metadata.source_kind;
  manifest.options_json = metadata.options_json;
  manifest.created_by = std::string("packrec ") + Version();
  manifest.field_records = metadata.field_records;
  return manifest;
}

Result<std::string> SerializeManifestJson(const DatasetManifest& manifest) {
  json options = json::parse(manifest.options_json, nullptr, /*allow_exceptions=*/false);
  if (options.is_discarded() || !options.is_object()) {
    return Status::InvalidArgument("dataset options are not a JSON object: " +
                                   manifest.options_json);
  }
  json body = manifest.extra.is_object() ? manifest.extra : json::object();
  body["format"] = manifest.format;
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
  // Only datasets with fields have the key, so a dataset without is byte-identical to before.
  if (!manifest.fields.empty()) body["fields"] = SchemaToJson(manifest.fields);
  if (!manifest.fields.empty() && manifest.field_records.size() == manifest.fields.size()) {
    body["field_records"] = manifest.field_records;
  }
  try {
    body[kChecksumField] = Hex64(BodyChecksum(body));
    return body.dump(2) + "\n";
  } catch (const json::exception& error) {  // a class name or key that is not UTF-8
    return Status::InvalidArgument(std::string("manifest cannot be written: ") + error.what());
  }
}

Result<DatasetManifest> ParseManifestJson(std::string_view text, std::string_view where_view,
                                          std::string_view format, std::uint32_t max_version) {
  const std::string where(where_view);
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
    DatasetManifest manifest;
    manifest.format = body.at("format").get<std::string>();
    if (manifest.format != format) {
      return Status::Corruption(where + ": format is '" + manifest.format + "', expected '" +
                                std::string(format) + "'");
    }
    manifest.format_version = GetUnsigned<std::uint32_t>(body.at("format_version"));
    if (manifest.format_version > max_version) {
      return Status::NotSupported(
          where + ": format version " + std::to_string(manifest.format_version) +
          " is newer than this packrec supports (" + std::to_string(max_version) + ")");
    }
    if (manifest.format_version == 0) return Status::Corruption(where + ": format version 0");
    manifest.record_count = GetUnsigned<std::uint64_t>(body.at("record_count"));
    manifest.rejected_count = GetUnsigned<std::uint64_t>(body.at("rejected_count"));
    manifest.payload_bytes = GetUnsigned<std::uint64_t>(body.at("payload_bytes"));
    manifest.classes = body.at("classes").get<std::vector<std::string>>();
    manifest.label_count = GetUnsigned<std::uint32_t>(body.at("label_count"));
    manifest.listing_hash = body.at("listing_hash").get<std::string>();
    manifest.source_kind = body.at("source_kind").get<std::string>();
    manifest.options_json = body.at("options").dump();
    manifest.created_by = body.at("created_by").get<std::string>();
    if (body.contains("fields")) {
      PACKREC_ASSIGN_OR_RETURN(manifest.fields, SchemaFromJson(body["fields"], where));
    }
    if (body.contains("field_records")) {
      for (const json& count : body.at("field_records")) {
        manifest.field_records.push_back(GetUnsigned<std::uint64_t>(count));
      }
      const bool fits = manifest.field_records.size() == manifest.fields.size() &&
                        std::ranges::all_of(manifest.field_records, [&](std::uint64_t count) {
                          return count <= manifest.record_count;
                        });
      if (!fits) {
        return Status::Corruption(where + ": field_records does not hold one count of at most " +
                                  "record_count per field");
      }
    }
    for (const char* field : kCommonFields) body.erase(field);
    manifest.extra = std::move(body);
    return manifest;
  } catch (const json::exception& error) {
    return Status::Corruption(where + ": missing or mistyped field (" + error.what() + ")");
  }
}

Status WriteRejectsFile(const std::filesystem::path& file, const std::vector<Reject>& rejects) {
  if (rejects.empty()) return Status::OK();
  std::string text = "# path\treason\n";
  // A tab or newline in a path (a file name may hold them) or a reason would split or forge a
  // line: control characters are written as \xNN.
  for (const Reject& reject : rejects) {
    text += PrintableKey(reject.path) + "\t" + PrintableKey(reject.reason) + "\n";
  }
  return WriteFileAtomically(file, AsBytes(text));
}

Status CheckLabelAgainstManifest(const DatasetInfo& info, std::uint64_t index,
                                 std::uint32_t label) {
  // label_count 0 with records: a writer's max label + 1 wrapped (a label of 2^32 - 1).
  if (label < info.label_count || info.label_count == 0) return Status::OK();
  return Status::Corruption("record " + std::to_string(index) + " has label " +
                            std::to_string(label) + ", but the manifest says label_count " +
                            std::to_string(info.label_count))
      .WithRecordIndex(index);
}

DatasetInfo InfoFromManifest(const DatasetManifest& manifest, std::string format_short_name) {
  DatasetInfo info;
  info.format = std::move(format_short_name);
  info.format_version = manifest.format_version;
  info.record_count = manifest.record_count;
  info.rejected_count = manifest.rejected_count;
  info.classes = manifest.classes;
  info.label_count = manifest.label_count;
  info.listing_hash = manifest.listing_hash;
  info.source_kind = manifest.source_kind;
  info.payload_bytes = manifest.payload_bytes;
  info.options_json = manifest.options_json;
  info.created_by = manifest.created_by;
  info.fields = manifest.fields;
  info.field_records = manifest.field_records;
  return info;
}

}  // namespace packrec
