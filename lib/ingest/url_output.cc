#include "ingest/url_output.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"

namespace packrec {
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

Result<nlohmann::json> ParseJson(std::span<const std::byte> bytes, const std::string& what) {
  nlohmann::json parsed = nlohmann::json::parse(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Status::Corruption(what + " is not a JSON object");
  }
  return parsed;
}

// The shards a finished dataset's manifest lists.
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

}  // namespace

Result<std::unique_ptr<UrlOutput>> UrlOutput::Open(const std::string& url,
                                                   const fs::path& staging_root, bool overwrite,
                                                   bool resume, std::string marker) {
  auto output = std::unique_ptr<UrlOutput>(new UrlOutput);
  output->url_ = url;
  output->marker_ = std::move(marker);
  PACKREC_ASSIGN_OR_RETURN(output->uploader_, DatasetUploader::Open(url, RemoteOptions{}));
  output->staging_ = StagingDirFor(url, staging_root);
  // Claimed before the URL is looked at (a second --overwrite must not delete what the first
  // just published). The writer claims the staging path itself.
  PACKREC_ASSIGN_OR_RETURN(output->claim_,
                           OutputLock::Acquire(output->staging_.string() + ".upload"));
  const ObjectStore& store = output->uploader_->store();
  PACKREC_ASSIGN_OR_RETURN(const std::optional<ObjectStore::ObjectHead> manifest,
                           store.Head(output->marker_));
  if (!manifest) return output;
  if (overwrite) {
    PACKREC_RETURN_IF_ERROR(store.Delete(output->marker_));
  } else if (resume) {
    output->whole_at_url_ = true;
  } else {
    return Status::AlreadyExists(url + " already holds a dataset (its " + output->marker_ +
                                 "); overwrite replaces it");
  }
  return output;
}

Result<bool> UrlOutput::StagedWhole() const { return IsRegularFile(staging_ / marker_); }

Status UrlOutput::ClearStaging() const {
  std::error_code error;
  fs::remove_all(staging_, error);
  if (error) return ErrnoStatus("remove", staging_, error.value());
  return Status::OK();
}

void UrlOutput::UploadAsSealed(WriterOptions& options) {
  DatasetUploader* queue = uploader_.get();
  options.shard.on_sealed = [queue](const fs::path& file, std::uint64_t xxh64) {
    queue->Enqueue(file, xxh64);
  };
}

Result<nlohmann::json> UrlOutput::RemoteManifest() const {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, uploader_->store().Get(marker_));
  return ParseJson(text, url_ + "/" + marker_);
}

Result<nlohmann::json> UrlOutput::StagedManifest() const {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(staging_ / marker_));
  return ParseJson(text, (staging_ / marker_).string());
}

Status UrlOutput::PublishShards() {
  PACKREC_RETURN_IF_ERROR(uploader_->Drain());
  PACKREC_ASSIGN_OR_RETURN(const nlohmann::json manifest, StagedManifest());
  PACKREC_ASSIGN_OR_RETURN(const std::vector<DatasetUploader::File> files,
                           ManifestFiles(manifest, staging_ / marker_));
  PACKREC_RETURN_IF_ERROR(uploader_->UploadMissing(staging_, files));
  const ObjectStore& store = uploader_->store();
  PACKREC_ASSIGN_OR_RETURN(const bool has_rejects, IsRegularFile(staging_ / kRejects));
  if (has_rejects) PACKREC_RETURN_IF_ERROR(store.PutFile(kRejects, staging_ / kRejects, {}));
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(staging_ / marker_));
  return store.Put(marker_, text);
}

// An export: every file of the folder (tars, TFRecord and index files, rejects.tsv), in name
// order, then its packrec-export.json.
Status UrlOutput::PublishExport() {
  std::vector<fs::path> files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(staging_, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(error) && name != marker_ && !name.starts_with(".")) {
      files.push_back(entry.path());
    }
  }
  if (error) return ErrnoStatus("list", staging_, error.value());
  std::sort(files.begin(), files.end());
  const ObjectStore& store = uploader_->store();
  for (const fs::path& file : files) {
    PACKREC_RETURN_IF_ERROR(store.PutFile(file.filename().string(), file, {}));
  }
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(staging_ / marker_));
  return store.Put(marker_, text);
}

Status UrlOutput::Publish() {
  const Status published = marker_ == kManifest ? PublishShards() : PublishExport();
  if (!published.ok()) {
    return Status(published.code(), published.message() + " (the dataset is whole in " +
                                        staging_.string() + "; resuming uploads only what " + url_ +
                                        " lacks)");
  }
  std::error_code error;
  fs::remove_all(staging_, error);  // uploaded: the staging copy has served its purpose
  return Status::OK();
}

}  // namespace packrec
