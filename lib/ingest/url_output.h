// A shard dataset written to an s3:// URL through a local staging folder: the writer writes there
// as usual, each sealed shard is uploaded as it is sealed, and Publish uploads what the URL still
// lacks, then rejects.tsv, then manifest.json, so a reader of the URL sees no dataset until the
// last PUT. Used by convert (convert_remote.cc) and merge.
#ifndef PACKREC_LIB_INGEST_URL_OUTPUT_H_
#define PACKREC_LIB_INGEST_URL_OUTPUT_H_

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/output_dir.h"
#include "packrec/status.h"
#include "packrec/writer.h"
#include "storage/dataset_upload.h"

namespace packrec {

class UrlOutput {
 public:
  // Claims `url` on this machine (a lock beside its staging folder, held while this lives) and
  // looks at what is there: a dataset is refused (AlreadyExists) unless `overwrite`, which
  // deletes its manifest first (no reader pairs it with the new shards), or `resume`.
  // `staging_root` empty: $PACKREC_STAGING_DIR, else /var/tmp/packrec-upload.
  // `marker`: the file whose presence makes the folder a dataset, uploaded last: manifest.json
  // for a shard dataset, packrec-export.json for an export (wds, tfrecord, recordio).
  static Result<std::unique_ptr<UrlOutput>> Open(const std::string& url,
                                                 const std::filesystem::path& staging_root,
                                                 bool overwrite, bool resume,
                                                 std::string marker = "manifest.json");

  const std::string& url() const { return url_; }
  // Where the dataset is written before it is uploaded (one folder per URL).
  const std::filesystem::path& staging() const { return staging_; }
  // With resume: a whole dataset is at the URL already.
  bool whole_at_url() const { return whole_at_url_; }
  // The staging folder holds a whole dataset (a run killed while uploading it).
  Result<bool> StagedWhole() const;
  // Removes the staging folder (ours): a fresh start.
  Status ClearStaging() const;
  // Makes `options` upload each shard the moment it is sealed.
  void UploadAsSealed(WriterOptions& options);
  // Uploads the whole staged dataset (what the URL lacks), the marker last; then removes the
  // staging folder. On failure the staging folder stays, and the message says so. A shard
  // dataset's files are the ones its manifest lists (plus rejects.tsv); an export's, every file
  // of the folder.
  Status Publish();
  // The manifest at the URL (with resume, when whole_at_url()).
  Result<nlohmann::json> RemoteManifest() const;
  // The staged dataset's manifest.
  Result<nlohmann::json> StagedManifest() const;

 private:
  UrlOutput() = default;
  std::string url_;
  std::filesystem::path staging_;
  OutputLock claim_;
  Status PublishShards();
  Status PublishExport();
  std::string marker_;
  std::unique_ptr<DatasetUploader> uploader_;
  bool whole_at_url_ = false;
};

}  // namespace packrec

#endif  // PACKREC_LIB_INGEST_URL_OUTPUT_H_
