// Convert: the entry point (checks the options, takes the output's lock, picks the engine for the
// source), what both engines share (the options a dataset records, the record loop, sealing or
// giving up the output), and part names. The engines and their pieces: convert_internal.h.
#include "packrec/convert.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>

#include "core/output_dir.h"
#include "dataset/registry.h"
#include "ingest/convert_internal.h"
#include "ingest/field_routing.h"
#include "packrec/format.h"
#include "packrec/image.h"
#include "packrec/reader.h"

namespace packrec {
namespace conversion {
namespace {

namespace fs = std::filesystem;

// True when SRC is a directory and OUT is it or lies under it (symlinks resolved).
bool OutputInsideSource(const ConvertOptions& options) {
  std::error_code error;
  if (!fs::is_directory(options.source, error)) return false;
  const fs::path source = fs::canonical(options.source, error);
  if (error) return false;
  const fs::path output = fs::weakly_canonical(fs::absolute(options.output, error), error);
  if (error) return false;
  auto out = output.begin();
  for (auto it = source.begin(); it != source.end(); ++it, ++out) {
    if (out == output.end() || *out != *it) return false;
  }
  return true;
}

Status ValidateOptions(const ConvertOptions& options) {
  PACKREC_RETURN_IF_ERROR(CheckFieldSelection(options.source_options));
  if (options.threads > 1024) {
    return Status::InvalidArgument("--threads must be 1 to 1024, got " +
                                   std::to_string(options.threads));
  }
  if (options.quality < 0 || options.quality > 100) {
    return Status::InvalidArgument("--quality must be 1 to 100, got " +
                                   std::to_string(options.quality));
  }
  if (options.writer.hdf5.layout == Hdf5Layout::kPixels &&
      (options.resize_short > 0 || options.quality > 0)) {
    return Status::InvalidArgument(
        "--resize-short and --quality re-encode JPEGs; the pixels layout stores decoded images "
        "(--size sets their size)");
  }
  if (options.writer.hdf5.layout == Hdf5Layout::kPixels &&
      std::uint64_t{options.writer.hdf5.pixel_height} * options.writer.hdf5.pixel_width >
          MaxImagePixels()) {
    // Refused here, naming the flag, rather than as every input's reject (or an HDF5 error).
    return Status::InvalidArgument("--size " + std::to_string(options.writer.hdf5.pixel_height) +
                                   " " + std::to_string(options.writer.hdf5.pixel_width) + ": " +
                                   std::to_string(std::uint64_t{options.writer.hdf5.pixel_height} *
                                                  options.writer.hdf5.pixel_width) +
                                   " pixels per image, over the " +
                                   std::to_string(MaxImagePixels()) +
                                   " an image may have (PACKREC_MAX_IMAGE_PIXELS)");
  }
  if (options.part_count > 0 && options.part_index >= options.part_count) {
    return Status::InvalidArgument(
        "--part " + std::to_string(options.part_index) + "/" + std::to_string(options.part_count) +
        ": parts are numbered 0 to " + std::to_string(options.part_count - 1));
  }
  if (options.resize_short > 65535) {
    return Status::InvalidArgument("--resize-short must be at most 65535, got " +
                                   std::to_string(options.resize_short));
  }
  if (OutputInsideSource(options)) {
    if (std::error_code error; fs::equivalent(options.source, options.output, error)) {
      return Status::InvalidArgument("OUT and SRC are the same directory (" +
                                     options.output.string() +
                                     "): a conversion writes a new dataset, never into its "
                                     "input; name another OUT");
    }
    return Status::InvalidArgument(
        "OUT " + options.output.string() + " lies inside SRC " + options.source.string() +
        ": the next conversion would list it as input; choose an output path outside SRC");
  }
  if (options.resume && options.writer.overwrite) {
    return Status::InvalidArgument(
        "--resume continues an interrupted conversion and --overwrite starts again: pass one");
  }
  const std::string& format = options.writer.format;
  const FormatDescriptor* descriptor = FindFormatDescriptor(format);
  if (descriptor == nullptr) return FindFormat(format).status();
  if (options.part_count > 0 && !descriptor->info.readable) {
    return Status::InvalidArgument("--part writes datasets that merge reads back: the " +
                                   JoinFormatNames(&FormatInfo::readable) + " formats, not " +
                                   format);
  }
  if (options.resume && !descriptor->info.resumable) {
    return Status::InvalidArgument("--resume applies to the " +
                                   JoinFormatNames(&FormatInfo::resumable) + " formats, not " +
                                   format + " (an export is rewritten from the start)");
  }
  return Status::OK();
}

}  // namespace

// --threads, 0 meaning one per core.
unsigned ThreadCount(const ConvertOptions& options) {
  return options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
}

std::string OptionsJson(const ConvertOptions& options, std::uint64_t part_begin,
                        std::uint64_t part_end, std::uint64_t items_total) {
  nlohmann::json json;
  json["format"] = options.writer.format;
  const FormatDescriptor* format = FindFormatDescriptor(options.writer.format);
  if (format != nullptr && format->options_to_json != nullptr) {
    format->options_to_json(options.writer, json);
  }
  json["compression"] = CompressionName(options.writer.compression);
  json["compression_level"] = options.writer.compression_level;
  json["shuffle_seed"] = options.shuffle_seed ? nlohmann::json(*options.shuffle_seed) : nullptr;
  json["resize_short"] = options.resize_short;
  json["quality"] = options.quality;
  json["on_error"] = options.on_error == OnBadRecord::kSkip ? "skip" : "fail";
  if (!options.annotations.empty()) json["annotations"] = options.annotations.filename().string();
  if (!options.source_options.keep_fields.empty()) {
    json["fields"] = options.source_options.keep_fields;
  }
  if (!options.source_options.drop_fields.empty()) {
    json["drop_fields"] = options.source_options.drop_fields;
  }
  // The part's place in the whole conversion ("part" is what merge checks and removes; every
  // other option is the same in every part and in the merged manifest).
  if (options.part_count > 0) {
    json["part"] = {{"index", options.part_index},
                    {"count", options.part_count},
                    {"items_begin", part_begin},
                    {"items_end", part_end},
                    {"items_total", items_total}};
  }
  return json.dump();
}

// The stored payload total when every input is stored as it is: the input files' sizes. LMDB
// sizes its map from it and HDF5 writes /data in place when it comes out exact. Shards do not need
// it, and when images are re-encoded or decoded it is unknown (0).
std::uint64_t ExpectedPayloadBytes(const SourceListing& listing, const ConvertOptions& options) {
  const FormatDescriptor* format = FindFormatDescriptor(options.writer.format);
  if (format == nullptr || !format->uses_payload_total || options.resize_short > 0 ||
      options.quality > 0 || options.writer.hdf5.layout == Hdf5Layout::kPixels) {
    return 0;
  }
  std::uint64_t total = 0;
  for (const SourceItem& item : listing.items) {
    std::error_code error;
    const std::uint64_t size = fs::file_size(item.path, error);
    if (!error) total += size;  // an unreadable input is reported when it is read
  }
  return total;
}

// Seals the dataset when everything went well (else removes what was written) and completes the
// stats; the rejects go into the metadata first.
// A failure of the writer itself (a full disk, a failed fsync) keeps the writer's last resume
// point, so the same command with --resume continues from it once the cause is fixed; any other
// failure (a bad input, a cancel) removes everything.
Result<ConvertStats> FinishConversion(DatasetWriter& writer, DatasetMetadata& metadata,
                                      Status failure, bool writer_failed, ConvertStats stats,
                                      Clock::time_point start) {
  metadata.rejects = stats.rejects;
  if (failure.ok()) {
    failure = writer.Finish(metadata);
    writer_failed = true;
  }
  if (!failure.ok()) {
    const std::uint64_t kept = writer_failed ? writer.AbortKeepingCheckpoint() : 0;
    if (kept == 0) {
      writer.Abort();
      return failure;
    }
    return failure.WithSuffix("; the first " + std::to_string(kept) + " records are kept")
        .WithRemedy(Remedy::kResumeOnceFixed);
  }
  stats.records_written = writer.records_written();
  stats.output_bytes = writer.bytes_written();
  stats.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

Status RecordLoop::Add(DatasetWriter& writer, const RecordInput& record) {
  Status added = writer.Add(record);
  if (!added.ok()) writer_failed_ = true;
  return added;
}

Status RecordLoop::Reject(const std::string& path, const std::string& where,
                          const Status& problem) {
  if (options_.on_error == OnBadRecord::kSkip) {
    stats_.rejects.push_back({path, problem.message()});
    return Status::OK();
  }
  return Status::InvalidInput(where + ": " + problem.message()).WithRemedy(Remedy::kSkipBadInput);
}

Status RecordLoop::Progress(std::uint64_t done, std::uint64_t total, bool now) {
  if (!progress_) return Status::OK();
  const Clock::time_point at = Clock::now();
  if (!now && at - last_report_ <= std::chrono::milliseconds(200)) return Status::OK();
  last_report_ = at;
  ConvertProgress report;
  report.records_done = done;
  report.records_total = total;
  report.input_bytes = stats_.input_bytes;
  report.elapsed_seconds = std::chrono::duration<double>(at - start_).count();
  return progress_(report);
}

Status RecordLoop::CheckSomethingWritten(const DatasetWriter& writer) const {
  if (writer.records_written() > 0) return Status::OK();
  if (stats_.rejects.empty()) {
    return Status::NotFound("no records in " + options_.source.string());
  }
  return Status::InvalidInput("all " + std::to_string(stats_.rejects.size()) + " inputs in " +
                              options_.source.string() + " were rejected; the first: " +
                              stats_.rejects.front().path + ": " + stats_.rejects.front().reason);
}

}  // namespace conversion

using conversion::Clock;
namespace fs = std::filesystem;

std::string PartName(std::uint32_t index, std::uint32_t count, const std::string& format) {
  char name[48];
  std::snprintf(name, sizeof name, "part-%05u-of-%05u", index, count);
  // A part is a dataset of a format packrec reads (merge reads it back); ValidateOptions refuses
  // --part with an export.
  const FormatDescriptor* descriptor = FindFormatDescriptor(format);
  const bool named = descriptor != nullptr && !descriptor->info.suffixes.empty();
  return name + (named ? descriptor->info.suffixes.front() : std::string());
}

Result<ConvertStats> Convert(const ConvertOptions& requested, const ProgressCallback& progress) {
  if (IsDatasetUrl(requested.output.string())) return conversion::ConvertToUrl(requested, progress);
  const Clock::time_point start = Clock::now();
  ConvertOptions options = requested;  // the format named: it is recorded and compared
  PACKREC_ASSIGN_OR_RETURN(options.writer.format,
                           ChooseOutputFormat(options.output, requested.writer.format));
  PACKREC_RETURN_IF_ERROR(conversion::ValidateOptions(options));
  // Held until the output is committed, kept for --resume or removed: a second run on the same
  // output is refused before it reads or touches anything there.
  const fs::path claimed =
      options.part_count > 0
          ? options.output / PartName(options.part_index, options.part_count, options.writer.format)
          : options.output;
  PACKREC_ASSIGN_OR_RETURN(const OutputLock lock, OutputLock::Acquire(claimed));
  SourceFormat format = options.from;
  if (format == SourceFormat::kAuto) {
    PACKREC_ASSIGN_OR_RETURN(format, DetectSourceFormat(options.source.string()));
  }
  Result<ConvertStats> stats =
      format == SourceFormat::kImageFolder || format == SourceFormat::kListFile
          ? conversion::ConvertListing(options, progress, start)
          : conversion::ConvertStream(options, format, progress, start);
  if (stats.ok()) stats->format = options.writer.format;
  return stats;
}

}  // namespace packrec
