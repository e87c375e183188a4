// Convert to an s3:// URL: the conversion runs as usual into a local staging directory (with its
// lock, resume journal and checks), each sealed shard is handed to a DatasetUploader as it is
// sealed, and once the local dataset is whole the shards the URL still lacks are uploaded, then
// rejects.tsv, then manifest.json. A reader of the URL sees no dataset until that last PUT.
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/output_dir.h"
#include "dataset/registry.h"
#include "ingest/convert_internal.h"
#include "packrec/convert.h"
#include "packrec/format.h"
#include "storage/dataset_upload.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;
constexpr char kManifest[] = "manifest.json";
constexpr char kRejects[] = "rejects.tsv";

// The staging folder of `url`: one per URL (its readable part, and a hash of it, so two URLs
// never share one), under `root`.
fs::path StagingDirFor(const std::string& url, const fs::path& root) {
  fs::path base = root;
  if (base.empty()) {
    const char* env = std::getenv("PACKREC_STAGING_DIR");
    base = env != nullptr && *env != '\0' ? fs::path(env) : fs::path("/var/tmp/packrec-upload");
  }
  std::string name;
  for (const char c : url.substr(url.find("://") + 3)) {
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  }
  if (name.size() > 100) name.resize(100);
  return base / (name + "-" + Hex64(Xxh64(url)).substr(0, 8));
}

Result<nlohmann::json> ReadJsonFile(const fs::path& path) {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadWholeFile(path));
  nlohmann::json parsed = nlohmann::json::parse(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Status::Corruption(path.string() + " is not a JSON object");
  }
  return parsed;
}

// The shards a finished local dataset's manifest lists.
Result<std::vector<DatasetUploader::File>> ManifestFiles(const nlohmann::json& manifest,
                                                         const fs::path& path) {
  std::vector<DatasetUploader::File> files;
  try {
    for (const nlohmann::json& shard : manifest.at("shards")) {
      DatasetUploader::File& file = files.emplace_back();
      file.name = shard.at("file").get<std::string>();
      file.size_bytes = shard.at("size_bytes").get<std::uint64_t>();
      if (!ParseHex64(shard.at("xxh64").get<std::string>(), &file.xxh64)) {
        return Status::Corruption(path.string() + ": shard " + file.name + " has a bad xxh64");
      }
    }
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(path.string() + ": " + error.what());
  }
  return files;
}

// Uploads what the URL lacks of the whole local dataset in `dir`, the manifest last.
Status Publish(DatasetUploader& uploader, const fs::path& dir) {
  PACKREC_RETURN_IF_ERROR(uploader.Drain());
  PACKREC_ASSIGN_OR_RETURN(const nlohmann::json manifest, ReadJsonFile(dir / kManifest));
  PACKREC_ASSIGN_OR_RETURN(const std::vector<DatasetUploader::File> files,
                           ManifestFiles(manifest, dir / kManifest));
  PACKREC_RETURN_IF_ERROR(uploader.UploadMissing(dir, files));
  const ObjectStore& store = uploader.store();
  PACKREC_ASSIGN_OR_RETURN(const bool has_rejects, IsRegularFile(dir / kRejects));
  if (has_rejects) PACKREC_RETURN_IF_ERROR(store.PutFile(kRejects, dir / kRejects, {}));
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(dir / kManifest));
  return store.Put(kManifest, text);
}

// The remote dataset at the URL, before anything is written: refused without overwrite or
// resume; with overwrite its manifest is deleted first, so that no reader ever pairs it with the
// new shards that replace its own. Returns whether a whole dataset is there.
Result<bool> ClaimUrl(const ConvertOptions& options, const ObjectStore& store,
                      const std::string& url) {
  PACKREC_ASSIGN_OR_RETURN(const std::optional<ObjectStore::ObjectHead> manifest,
                           store.Head(kManifest));
  if (!manifest) return false;
  if (options.writer.overwrite) {
    PACKREC_RETURN_IF_ERROR(store.Delete(kManifest));
    return false;
  }
  if (!options.resume) {
    return Status::AlreadyExists(url + " already holds a dataset (its " + kManifest +
                                 "); overwrite replaces it");
  }
  return true;
}

Result<ConvertStats> StatsOfFinished(const nlohmann::json& manifest, const std::string& format) {
  ConvertStats stats;
  stats.format = format;
  stats.records_written = manifest.value("record_count", std::uint64_t{0});
  for (const nlohmann::json& shard : manifest.value("shards", nlohmann::json::array())) {
    stats.output_bytes += shard.value("size_bytes", std::uint64_t{0});
  }
  return stats;
}

// What can go to a URL: a format read from URLs (the registry says which), no --part.
Status CheckUrlOutput(const ConvertOptions& options, const std::string& url,
                      const std::string& format) {
  const FormatDescriptor* descriptor = FindFormatDescriptor(format);
  if (descriptor == nullptr || descriptor->open_url == nullptr) {
    return Status::NotSupported("cannot write " + format + " to " + url +
                                ": packrec writes only its shard format to object storage");
  }
  if (options.part_count > 0) {
    return Status::NotSupported("--part into " + url +
                                " is not supported: convert the parts locally, merge them, and " +
                                "convert the merged dataset to the URL");
  }
  return Status::OK();
}

// The local conversion into `staging`, each sealed shard queued for upload as it is sealed; a
// run killed while uploading a whole local dataset continues with the upload alone.
Result<ConvertStats> ConvertToStaging(const ConvertOptions& requested, const std::string& format,
                                      const fs::path& staging, DatasetUploader& uploader,
                                      const ProgressCallback& progress) {
  PACKREC_ASSIGN_OR_RETURN(const bool staged_whole, IsRegularFile(staging / kManifest));
  if (staged_whole && requested.resume) {
    PACKREC_ASSIGN_OR_RETURN(const nlohmann::json manifest, ReadJsonFile(staging / kManifest));
    PACKREC_ASSIGN_OR_RETURN(ConvertStats stats, StatsOfFinished(manifest, format));
    stats.resumed_records = stats.records_written;
    return stats;
  }
  if (staged_whole) {
    // Staged by a run that died uploading, and not resumed: converted again from scratch.
    std::error_code error;
    fs::remove_all(staging, error);
    if (error) return ErrnoStatus("remove", staging, error.value());
  }
  ConvertOptions local = requested;
  local.output = staging;
  local.writer.format = format;
  DatasetUploader* queue = &uploader;
  local.writer.shard.on_sealed = [queue](const fs::path& file, std::uint64_t xxh64) {
    queue->Enqueue(file, xxh64);
  };
  Result<ConvertStats> converted = Convert(local, progress);
  if (converted.status().code() == StatusCode::kAlreadyExists) {
    // The staging folder holds an interrupted conversion: say which URL it was for.
    return Status(converted.status().code(),
                  "an interrupted conversion to " + requested.output.string() + " is staged in " +
                      staging.string() + ": " + converted.status().message());
  }
  return converted;
}

}  // namespace

Result<ConvertStats> ConvertToUrl(const ConvertOptions& requested,
                                  const ProgressCallback& progress) {
  const auto start = std::chrono::steady_clock::now();
  const std::string url = requested.output.string();
  PACKREC_ASSIGN_OR_RETURN(const std::string format,
                           ChooseOutputFormat(requested.output, requested.writer.format));
  PACKREC_RETURN_IF_ERROR(CheckUrlOutput(requested, url, format));
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<DatasetUploader> uploader,
                           DatasetUploader::Open(url, RemoteOptions{}));
  const fs::path staging = StagingDirFor(url, requested.staging_dir);
  // One run per URL at a time, claimed before the URL is looked at (a second --overwrite must not
  // delete what the first just published). The local conversion claims the staging path itself.
  PACKREC_ASSIGN_OR_RETURN(const OutputLock claim,
                           OutputLock::Acquire(staging.string() + ".upload"));
  PACKREC_ASSIGN_OR_RETURN(const bool whole_there, ClaimUrl(requested, uploader->store(), url));
  PACKREC_ASSIGN_OR_RETURN(const bool staged_whole, IsRegularFile(staging / kManifest));
  if (whole_there && !staged_whole) {
    // --resume of a conversion that finished: nothing to do.
    PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, uploader->store().Get(kManifest));
    nlohmann::json manifest = nlohmann::json::parse(
        std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), nullptr, false);
    PACKREC_ASSIGN_OR_RETURN(ConvertStats stats, StatsOfFinished(manifest, format));
    stats.already_complete = true;
    return stats;
  }
  PACKREC_ASSIGN_OR_RETURN(ConvertStats stats,
                           ConvertToStaging(requested, format, staging, *uploader, progress));
  const Status published = Publish(*uploader, staging);
  if (!published.ok()) {
    return Status(published.code(), published.message() + " (the dataset is whole in " +
                                        staging.string() + "; resuming uploads only what " + url +
                                        " lacks)");
  }
  std::error_code error;
  fs::remove_all(staging, error);  // uploaded: the staging copy has served its purpose
  stats.elapsed_seconds =          // the upload included
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace packrec::conversion
