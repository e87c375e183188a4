// MergeParts: every check first (nothing is written for parts that do not fit together), then one
// sequential pass that copies the records, checksums verified on the way, through the writer.
//
// Why a copy and not a manifest over the parts' own files: shard payload checksums are seeded by
// the global record index and shard headers carry the global first record, so a part can only
// know its final indices when every part before it had no rejects; LMDB and HDF5 are one file per
// dataset, which is what Caffe, DALI and h5py users expect. The copy is sequential I/O at the
// disk's bandwidth, done once; the expensive part of a conversion (listing, reading and checking
// millions of small files, re-encoding) is what the parts spread over machines.
#include "packrec/merge.h"
#include "storage/json_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <system_error>

#include "core/file_io.h"
#include "core/output_dir.h"
#include "dataset/registry.h"
#include "ingest/url_output.h"
#include "packrec/image.h"
#include "packrec/reader.h"
#include "packrec/writer.h"
#include "storage/object_store.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Part {
  fs::path path;
  std::unique_ptr<Reader> reader;
  json options;  // the convert options without "part"
  std::uint32_t index = 0;
  std::uint32_t count = 0;
  std::uint64_t items_begin = 0;
  std::uint64_t items_end = 0;
  std::uint64_t items_total = 0;
};

// part-IIIII-of-NNNNN plus a readable format's first suffix (.pkr, .lmdb, .h5), as PartName
// writes them (and not their .partial).
bool IsPartName(const std::string& name) {
  const auto digits = [&](std::size_t at) {
    return name.size() >= at + 5 && std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at),
                                                name.begin() + static_cast<std::ptrdiff_t>(at + 5),
                                                [](char c) { return c >= '0' && c <= '9'; });
  };
  if (name.rfind("part-", 0) != 0 || !digits(5) || name.compare(10, 4, "-of-") != 0 ||
      !digits(14)) {
    return false;
  }
  const std::string extension = name.substr(19);
  for (const FormatDescriptor* format : FormatDescriptors()) {
    if (format->info.readable && !format->info.suffixes.empty() &&
        extension == format->info.suffixes.front()) {
      return true;
    }
  }
  return false;
}

// The parts inside the S3 "folder" `url` (s3://bucket/parts: every part-*-of-*.pkr/ holding a
// manifest.json), sorted; empty when `url` is a dataset itself, or not on S3.
Result<std::vector<fs::path>> PartsAtUrl(const std::string& url) {
  std::vector<fs::path> parts;
  if (!url.starts_with("s3://")) return parts;
  PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> at,
                           ObjectStore::ForUrl(url, RemoteOptions{}));
  PACKREC_ASSIGN_OR_RETURN(const std::optional<ObjectStore::ObjectHead> manifest,
                           at->Head("manifest.json"));
  if (manifest) return parts;
  PACKREC_ASSIGN_OR_RETURN(const ParsedUrl parsed, ParseUrl(url));
  const std::string bucket = parsed.BucketUrl();
  const std::string prefix = parsed.KeyPrefix();
  PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> store,
                           ObjectStore::ForUrl(bucket, RemoteOptions{}));
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::string> keys, store->ListKeys(prefix));
  for (const std::string& key : keys) {
    const std::string name = key.substr(prefix.size());
    const auto end = name.find('/');
    if (end != std::string::npos && name.substr(end) == "/manifest.json" &&
        IsPartName(name.substr(0, end))) {
      parts.emplace_back(bucket + "/" + prefix + name.substr(0, end));
    }
  }
  std::sort(parts.begin(), parts.end());
  return parts;
}

// The part datasets named by `paths`: each a part, or a directory of parts (local, or an S3
// prefix).
Result<std::vector<fs::path>> ExpandParts(const std::vector<fs::path>& paths) {
  std::vector<fs::path> out;
  for (const fs::path& path : paths) {
    std::vector<fs::path> inside;
    std::error_code error;
    if (IsDatasetUrl(path.string())) {
      PACKREC_ASSIGN_OR_RETURN(inside, PartsAtUrl(path.string()));
    } else if (fs::is_directory(path, error) && !fs::exists(path / "manifest.json", error)) {
      for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
        if (IsPartName(entry.path().filename().string())) {
          inside.push_back(entry.path());
        }
      }
    }
    std::sort(inside.begin(), inside.end());
    if (inside.empty()) {
      out.push_back(path);
    } else {
      out.insert(out.end(), inside.begin(), inside.end());
    }
  }
  return out;
}

Result<Part> OpenPart(const fs::path& path) {
  Part part;
  part.path = path;
  PACKREC_ASSIGN_OR_RETURN(part.reader, OpenDataset(path));
  const DatasetInfo& info = part.reader->info();
  try {
    part.options = json::parse(info.options_json.empty() ? "{}" : info.options_json);
    const auto it = part.options.find("part");
    if (it == part.options.end()) {
      return Status::InvalidInput(path.string() +
                                  " is not a part of a partitioned conversion (its options "
                                  "have no 'part'; convert with --part I/N)");
    }
    part.index = GetUnsigned<std::uint32_t>(it->at("index"));
    part.count = GetUnsigned<std::uint32_t>(it->at("count"));
    part.items_begin = GetUnsigned<std::uint64_t>(it->at("items_begin"));
    part.items_end = GetUnsigned<std::uint64_t>(it->at("items_end"));
    part.items_total = GetUnsigned<std::uint64_t>(it->at("items_total"));
    part.options.erase("part");
  } catch (const json::exception& error) {
    return Status::InvalidInput(path.string() + ": unreadable part options: " + error.what());
  }
  return part;
}

// Every way two parts can disagree, named, before anything is written.
Status CheckParts(std::vector<Part>& parts) {
  if (parts.empty()) return Status::InvalidArgument("no parts to merge");
  std::sort(parts.begin(), parts.end(),
            [](const Part& a, const Part& b) { return a.index < b.index; });
  const Part& first = parts.front();
  const DatasetInfo& want = first.reader->info();
  const auto name = [](const Part& part) {
    return part.path.string() + " (part " + std::to_string(part.index) + " of " +
           std::to_string(part.count) + ")";
  };
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Part& part = parts[i];
    const DatasetInfo& info = part.reader->info();
    const auto differs = [&](const std::string& what) {
      return Status::InvalidInput("parts disagree: " + name(part) + " and " + name(first) +
                                  " have different " + what +
                                  "; they are not parts of one conversion");
    };
    if (part.count != first.count) return differs("part counts");
    if (info.format != want.format)
      return differs("formats (" + info.format + ", " + want.format + ")");
    if (info.listing_hash != want.listing_hash) return differs("input listings (listing hash)");
    if (part.items_total != first.items_total) return differs("input counts");
    if (info.classes != want.classes) return differs("classes");
    if (info.fields != want.fields) return differs("record fields");
    if (info.source_kind != want.source_kind) return differs("source kinds");
    if (part.options != first.options) {
      return differs("convert options (" + part.options.dump() + " vs " + first.options.dump() +
                     ")");
    }
    if (i > 0 && part.index == parts[i - 1].index) {
      return Status::InvalidInput(
          "part " + std::to_string(part.index) + " of " + std::to_string(part.count) +
          " is given twice: " + parts[i - 1].path.string() + " and " + part.path.string());
    }
    const std::uint64_t expected_begin = i == 0 ? 0 : parts[i - 1].items_end;
    if (part.index != i || part.items_begin != expected_begin) {
      return Status::InvalidInput(
          "part " + std::to_string(i) + " of " + std::to_string(first.count) +
          " is missing (no part holds the inputs from " + std::to_string(expected_begin) + " on)");
    }
    if (info.record_count + info.rejected_count != part.items_end - part.items_begin) {
      return Status::Corruption(name(part) + " holds " + std::to_string(info.record_count) +
                                " records and " + std::to_string(info.rejected_count) +
                                " rejects for " +
                                std::to_string(part.items_end - part.items_begin) + " inputs");
    }
  }
  if (parts.size() != first.count) {
    return Status::InvalidInput("part " + std::to_string(parts.size()) + " of " +
                                std::to_string(first.count) + " is missing (got " +
                                std::to_string(parts.size()) + " parts)");
  }
  if (parts.back().items_end != first.items_total) {
    return Status::InvalidInput("the parts cover inputs 0 to " +
                                std::to_string(parts.back().items_end) + " of " +
                                std::to_string(first.items_total));
  }
  return Status::OK();
}

// The writer options the parts were written with (the manifest's "options"), for the format
// `format` the parts' reader reports.
Result<WriterOptions> WriterOptionsOf(const json& options, const std::string& format) {
  WriterOptions writer;
  writer.format = format;
  try {
    writer.format = options.value("format", writer.format);
    const FormatDescriptor* descriptor = FindFormatDescriptor(writer.format);
    if (descriptor == nullptr || !descriptor->info.readable) {
      return Status::InvalidInput("the parts were written as '" + writer.format +
                                  "', which is not a format merge writes");
    }
    const std::string compression = options.value("compression", std::string("none"));
    PACKREC_ASSIGN_OR_RETURN(const CompressionSetting setting, ParseCompression(compression));
    writer.compression = setting.codec;
    writer.compression_level = options.value("compression_level", writer.compression_level);
    if (descriptor->options_from_json != nullptr) descriptor->options_from_json(options, writer);
  } catch (const json::exception& error) {
    return Status::InvalidInput(std::string("unreadable convert options in the parts: ") +
                                error.what());
  }
  return writer;
}

// The file's bytes, local or at a URL (a part in S3).
Result<std::vector<std::byte>> ReadRejectsFile(const fs::path& file, std::uint64_t expected) {
  const std::string missing = file.string() + " is missing (" + std::to_string(expected) +
                              " rejects are recorded in the manifest)";
  if (IsDatasetUrl(file.string())) {
    PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> store,
                             ObjectStore::ForUrl(file.parent_path().string(), RemoteOptions{}));
    Result<std::vector<std::byte>> bytes = store->Get(file.filename().string());
    if (bytes.status().code() == StatusCode::kNotFound) return Status::NotFound(missing);
    return bytes;
  }
  PACKREC_ASSIGN_OR_RETURN(const bool present, IsRegularFile(file));
  if (!present) return Status::NotFound(missing);
  // Read whole: a failed read is an error naming the file, not a list cut short.
  return ReadWholeFile(file);
}

Result<std::vector<Reject>> ReadRejects(const fs::path& file, std::uint64_t expected) {
  std::vector<Reject> rejects;
  if (expected == 0) return rejects;
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadRejectsFile(file, expected));
  const std::string_view text = AsText(bytes);
  for (const std::string_view line : SplitLines(text)) {
    if (line == "# path\treason") continue;  // WriteRejectsFile's header
    const std::size_t tab = line.find('\t');
    rejects.push_back({std::string(line.substr(0, tab)),
                       std::string(tab == std::string_view::npos ? "" : line.substr(tab + 1))});
  }
  if (rejects.size() != expected) {
    return Status::Corruption(file.string() + " lists " + std::to_string(rejects.size()) +
                              " rejects; the manifest says " + std::to_string(expected));
  }
  return rejects;
}

ImageInfo InfoOf(const RecordView& record) {
  if (record.encoding != Encoding::kRawRgb) {
    Result<ImageInfo> probed = ProbeImage(record.bytes);
    if (probed.ok()) return *probed;
  }
  ImageInfo info;
  info.encoding = record.encoding;
  info.width = record.width;
  info.height = record.height;
  info.channels = record.channels;
  return info;
}

// The merged dataset's facts: the first part's, with every part's rejects in order. Adds up the
// parts' payloads into `writer_options` (the writer places its data with the total).
Result<DatasetMetadata> MergedMetadata(const std::vector<Part>& parts,
                                       WriterOptions& writer_options) {
  const DatasetInfo& first = parts.front().reader->info();
  DatasetMetadata metadata;
  metadata.classes = first.classes;
  metadata.listing_hash = first.listing_hash;
  metadata.source_kind = first.source_kind;
  metadata.options_json = parts.front().options.dump();
  for (const Part& part : parts) {
    writer_options.expected_payload_bytes += part.reader->info().payload_bytes;
    PACKREC_ASSIGN_OR_RETURN(std::vector<Reject> rejects,
                             ReadRejects(RejectsFilePath(part.path, writer_options.format),
                                         part.reader->info().rejected_count));
    metadata.rejects.insert(metadata.rejects.end(), rejects.begin(), rejects.end());
  }
  if (writer_options.compression != Compression::kNone) writer_options.expected_payload_bytes = 0;
  return metadata;
}

// Every part's records, in order, into `writer`.
Status CopyRecords(const std::vector<Part>& parts, DatasetWriter& writer) {
  for (const Part& part : parts) {
    // ForEach streams each file with large sequential reads (checksums verified), rather than
    // faulting a mapping in page by page.
    const Status copied = part.reader->ForEach([&](const RecordView& record) {
      RecordInput input{record.key, record.label, record.bytes, InfoOf(record)};
      input.fields = record.fields;
      return writer.Add(input);
    });
    if (!copied.ok()) return copied.WithContext("merging " + part.path.string());
  }
  return Status::OK();
}

// An in-place merge's result, written beside the parts' directory, moved into it; the manifest
// goes last: until it is in place, the directory is not a dataset.
Status MoveIntoPlace(const fs::path& target, const fs::path& output) {
  std::error_code error;
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(target, error)) {
    if (entry.path().filename() != "manifest.json") files.push_back(entry.path());
  }
  files.push_back(target / "manifest.json");
  for (const fs::path& file : files) {
    if (!fs::exists(file, error)) continue;
    PACKREC_RETURN_IF_ERROR(RenamePath(file, output / file.filename()));
  }
  fs::remove(target, error);
  return Status::OK();
}

}  // namespace

namespace {

// The checked parts and what the merged dataset is written with.
struct PreparedMerge {
  std::vector<Part> parts;
  WriterOptions writer_options;
  DatasetMetadata metadata;
};

Result<PreparedMerge> PrepareMerge(const std::vector<fs::path>& paths,
                                   const MergeOptions& options) {
  PreparedMerge merge;
  PACKREC_ASSIGN_OR_RETURN(const std::vector<fs::path> expanded, ExpandParts(paths));
  for (const fs::path& path : expanded) {
    PACKREC_ASSIGN_OR_RETURN(Part part, OpenPart(path));
    merge.parts.push_back(std::move(part));
  }
  PACKREC_RETURN_IF_ERROR(CheckParts(merge.parts));
  const DatasetInfo& first = merge.parts.front().reader->info();
  PACKREC_ASSIGN_OR_RETURN(merge.writer_options,
                           WriterOptionsOf(merge.parts.front().options, first.format));
  merge.writer_options.overwrite = options.overwrite;
  merge.writer_options.fields = first.fields;
  PACKREC_ASSIGN_OR_RETURN(merge.metadata, MergedMetadata(merge.parts, merge.writer_options));
  return merge;
}

// Writes the merged dataset at `target`; on failure nothing is left there.
Result<MergeStats> WriteMerged(PreparedMerge& merge, const fs::path& target) {
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<DatasetWriter> writer,
                           CreateDatasetWriter(target, merge.writer_options));
  Status failure = CopyRecords(merge.parts, *writer);
  if (failure.ok()) failure = writer->Finish(merge.metadata);
  if (!failure.ok()) {
    writer->Abort();
    return failure;
  }
  MergeStats stats;
  stats.parts = static_cast<std::uint32_t>(merge.parts.size());
  stats.records = writer->records_written();
  stats.rejected = merge.metadata.rejects.size();
  stats.output_bytes = writer->bytes_written();
  return stats;
}

// Deletes a part in S3: its manifest first (it stops being a dataset), then every object under
// it.
Status RemovePartAtUrl(const std::string& url) {
  if (!url.starts_with("s3://")) {
    return Status::NotSupported("cannot remove the part " + url + ": plain HTTP has no delete");
  }
  PACKREC_ASSIGN_OR_RETURN(const ParsedUrl parsed, ParseUrl(url));
  if (parsed.key.empty()) {
    // A bucket is no part: its "prefix" would be every object in it.
    return Status::InvalidArgument("cannot remove the part " + url + ": it names a bucket");
  }
  PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> part,
                           ObjectStore::ForUrl(url, RemoteOptions{}));
  PACKREC_RETURN_IF_ERROR(part->Delete("manifest.json"));
  PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> store,
                           ObjectStore::ForUrl(parsed.BucketUrl(), RemoteOptions{}));
  return store->DeletePrefix(parsed.KeyPrefix());
}

Status RemoveParts(std::vector<Part>& parts, const std::string& format) {
  for (Part& part : parts) {
    part.reader.reset();
    if (IsDatasetUrl(part.path.string())) {
      PACKREC_RETURN_IF_ERROR(RemovePartAtUrl(part.path.string()));
      continue;
    }
    std::error_code error;
    fs::remove_all(part.path, error);
    fs::remove(RejectsFilePath(part.path, format), error);
  }
  return Status::OK();
}

// Merge into an s3:// URL: written in the URL's staging folder, shards uploaded as they are
// sealed, the manifest last (UrlOutput).
Result<MergeStats> MergeToUrl(const std::vector<fs::path>& paths, const std::string& url,
                              const MergeOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(PreparedMerge merge, PrepareMerge(paths, options));
  const FormatDescriptor* format = FindFormatDescriptor(merge.writer_options.format);
  if (format == nullptr || format->open_url == nullptr) {
    return Status::NotSupported("cannot merge " + merge.writer_options.format + " parts into " +
                                url + ": packrec writes only its shard format to object storage");
  }
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<UrlOutput> output,
                           UrlOutput::Open(url, {}, options.overwrite, false));
  PACKREC_RETURN_IF_ERROR(output->ClearStaging());  // a merge has no resume point
  merge.writer_options.overwrite = false;
  output->UploadAsSealed(merge.writer_options);
  PACKREC_ASSIGN_OR_RETURN(MergeStats stats, WriteMerged(merge, output->staging()));
  PACKREC_RETURN_IF_ERROR(output->Publish());
  if (options.remove_parts) {
    PACKREC_RETURN_IF_ERROR(RemoveParts(merge.parts, merge.writer_options.format));
  }
  return stats;
}

}  // namespace

Result<MergeStats> MergeParts(const std::vector<fs::path>& paths, const fs::path& output,
                              const MergeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (IsDatasetUrl(output.string())) {
    PACKREC_ASSIGN_OR_RETURN(MergeStats stats, MergeToUrl(paths, output.string(), options));
    stats.elapsed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
  }
  // Held to the end: a second merge (or a convert) into the same output is refused.
  PACKREC_ASSIGN_OR_RETURN(const OutputLock lock, OutputLock::Acquire(output));
  PACKREC_ASSIGN_OR_RETURN(PreparedMerge merge, PrepareMerge(paths, options));
  WriterOptions& writer_options = merge.writer_options;
  // In place (the parts directory is also the output): written beside it first, moved in once
  // complete, so an interrupted merge leaves the parts as they were.
  std::error_code error;
  const bool in_place = paths.size() == 1 && fs::is_directory(output, error) &&
                        fs::equivalent(paths.front(), output, error);
  if (in_place && FindFormatDescriptor(writer_options.format)->info.single_file) {
    return Status::InvalidArgument(
        "an HDF5 dataset is one file, so it cannot take the place of "
        "its parts' directory: merge into a file (packrec merge OUT.h5 " +
        output.string() + ")");
  }
  const fs::path target = in_place ? fs::path(output.string() + ".packrec-merging") : output;
  if (in_place) {
    fs::remove_all(target, error);  // ours by name: a leftover of an interrupted merge
    writer_options.overwrite = false;
  }
  PACKREC_ASSIGN_OR_RETURN(MergeStats stats, WriteMerged(merge, target));
  if (options.remove_parts || in_place) {
    PACKREC_RETURN_IF_ERROR(RemoveParts(merge.parts, writer_options.format));
  }
  if (in_place) PACKREC_RETURN_IF_ERROR(MoveIntoPlace(target, output));
  stats.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace packrec
