// The one place lib/ reaches the formats: each format's probe, opener and writer factory.
#include <array>
#include <string>
#include <system_error>

#include "lmdb/lmdb_format.h"
#include "packrec/reader.h"
#include "packrec/writer.h"
#include "shard/shard_format.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

struct FormatEntry {
  const char* name;
  bool (*looks_like)(const fs::path&);
  Result<std::unique_ptr<Reader>> (*open)(const fs::path&, const OpenOptions&);
  Result<std::unique_ptr<DatasetWriter>> (*create)(const fs::path&, const WriterOptions&);
};

constexpr std::array<FormatEntry, 2> kFormats = {{
    {"shard", shard::LooksLikeShardDataset, shard::OpenShardDataset, shard::CreateShardWriter},
    {"lmdb", lmdb::LooksLikeLmdbDataset, lmdb::OpenLmdbDataset, lmdb::CreateLmdbWriter},
}};

}  // namespace

Result<std::unique_ptr<Reader>> OpenDataset(const fs::path& path, const OpenOptions& options) {
  std::error_code error;
  if (!fs::exists(path, error)) return Status::NotFound("no such dataset: " + path.string());
  for (const FormatEntry& format : kFormats) {
    if (format.looks_like(path)) return format.open(path, options);
  }
  return Status::NotFound(path.string() +
                          " is not a packrec dataset (no manifest.json; an interrupted convert "
                          "leaves none)");
}

Result<std::unique_ptr<DatasetWriter>> CreateDatasetWriter(const fs::path& path,
                                                           const WriterOptions& options) {
  for (const FormatEntry& format : kFormats) {
    if (options.format == format.name) return format.create(path, options);
  }
  std::string known;
  for (const std::string& name : WritableFormats()) known += (known.empty() ? "" : ", ") + name;
  return Status::InvalidArgument("--format '" + options.format + "' is not one of: " + known);
}

std::vector<std::string> WritableFormats() {
  std::vector<std::string> names;
  for (const FormatEntry& format : kFormats) names.emplace_back(format.name);
  return names;
}

}  // namespace packrec
