// Convert to an s3:// URL (UrlOutput): the conversion runs as usual into the URL's local staging
// folder (with its lock, resume journal and checks), each sealed shard uploaded as it is sealed,
// and once the local dataset is whole the rest is published, the manifest last.
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "dataset/registry.h"
#include "ingest/convert_internal.h"
#include "ingest/url_output.h"
#include "packrec/convert.h"
#include "packrec/format.h"
#include "storage/export_writer.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;

// A finished dataset's counts, from its manifest (a shard dataset's or an export's).
ConvertStats StatsOfFinished(const nlohmann::json& manifest, const std::string& format) {
  ConvertStats stats;
  stats.format = format;
  stats.records_written =
      manifest.value("record_count", manifest.value("records", std::uint64_t{0}));
  for (const nlohmann::json& shard : manifest.value("shards", nlohmann::json::array())) {
    stats.output_bytes += shard.value("size_bytes", std::uint64_t{0});
  }
  for (const nlohmann::json& file : manifest.value("files", nlohmann::json::array())) {
    if (file.is_object()) stats.output_bytes += file.value("bytes", std::uint64_t{0});
  }
  return stats;
}

// What can go to a URL: packrec's shard format (read from URLs; the registry says which) or an
// export (wds, tfrecord, recordio), not --part.
Status CheckUrlOutput(const ConvertOptions& options, const std::string& url,
                      const std::string& format) {
  const FormatDescriptor* descriptor = FindFormatDescriptor(format);
  if (descriptor == nullptr || (descriptor->open_url == nullptr && descriptor->info.readable)) {
    return Status::NotSupported("cannot write " + format + " to " + url +
                                ": packrec writes its shard format and its exports (wds, " +
                                "tfrecord, recordio) to object storage");
  }
  if (options.part_count > 0) {
    return Status::NotSupported("--part into " + url +
                                " is not supported: convert the parts locally, merge them, and " +
                                "convert the merged dataset to the URL");
  }
  return Status::OK();
}

// The local conversion into the staging folder, each sealed shard queued for upload as it is
// sealed; a run killed while uploading a whole local dataset continues with the upload alone.
// The staging folder is packrec's own (named by the URL's hash, claimed by this run), so
// overwrite always clears it, and resume restarts from scratch when what a killed run left there
// cannot be continued (a kill inside overwrite's clean-up leaves shards without a journal).
Result<ConvertStats> ConvertToStaging(const ConvertOptions& requested, const std::string& format,
                                      UrlOutput& output, const ProgressCallback& progress) {
  PACKREC_ASSIGN_OR_RETURN(const bool staged_whole, output.StagedWhole());
  if (staged_whole && requested.resume) {
    PACKREC_ASSIGN_OR_RETURN(const nlohmann::json manifest, output.StagedManifest());
    ConvertStats stats = StatsOfFinished(manifest, format);
    stats.resumed_records = stats.records_written;
    return stats;
  }
  ConvertOptions local = requested;
  // Staged by a run that died uploading, and not resumed, or an export (which has no resume
  // point), or overwrite: converted again from scratch.
  const bool resumable = FindFormatDescriptor(format)->info.resumable;
  if (!resumable) local.resume = false;
  if (staged_whole || !resumable || requested.writer.overwrite) {
    PACKREC_RETURN_IF_ERROR(output.ClearStaging());
  }
  local.output = output.staging();
  local.writer.format = format;
  output.UploadAsSealed(local.writer);
  Result<ConvertStats> converted = Convert(local, progress);
  if (converted.status().code() == StatusCode::kAlreadyExists && local.resume) {
    // Nothing there that a resume can continue: start again in a cleared folder.
    PACKREC_RETURN_IF_ERROR(output.ClearStaging());
    local.resume = false;
    converted = Convert(local, progress);
  }
  if (converted.status().code() == StatusCode::kAlreadyExists) {
    // The staging folder holds an interrupted conversion: say which URL it was for, and that
    // resume continues it or overwrite starts again.
    return Status(converted.status().code(), "an interrupted conversion to " + output.url() +
                                                 " is staged in " + output.staging().string() +
                                                 " (packrec's staging folder for that URL)")
        .WithRemedy(Remedy::kResumeOrOverwrite);
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
  const bool is_export = !FindFormatDescriptor(format)->info.readable;
  PACKREC_ASSIGN_OR_RETURN(
      std::unique_ptr<UrlOutput> output,
      UrlOutput::Open(url, requested.staging_dir, requested.writer.overwrite, requested.resume,
                      is_export ? kExportManifestName : "manifest.json"));
  PACKREC_ASSIGN_OR_RETURN(const bool staged_whole, output->StagedWhole());
  if (output->whole_at_url() && !staged_whole) {
    // --resume of a conversion that finished: nothing to do but remove what a run killed while
    // removing its staging folder left there.
    PACKREC_ASSIGN_OR_RETURN(const nlohmann::json manifest, output->RemoteManifest());
    PACKREC_RETURN_IF_ERROR(output->ClearStaging());
    ConvertStats stats = StatsOfFinished(manifest, format);
    stats.already_complete = true;
    return stats;
  }
  PACKREC_ASSIGN_OR_RETURN(ConvertStats stats,
                           ConvertToStaging(requested, format, *output, progress));
  PACKREC_RETURN_IF_ERROR(output->Publish());
  stats.elapsed_seconds =  // the upload included
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace packrec::conversion
