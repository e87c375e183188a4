// Convert: an image folder or list file in, a packed dataset out.
#ifndef PACKREC_CONVERT_H_
#define PACKREC_CONVERT_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "packrec/ingest.h"
#include "packrec/source.h"
#include "packrec/status.h"
#include "packrec/writer.h"

namespace packrec {

struct ConvertOptions {
  // An image folder, a list file, or a container source (source.h): a WebDataset tar, glob or
  // brace pattern, TFRecord or RecordIO files, an MDS or Caffe LMDB directory, a packrec dataset.
  std::filesystem::path source;
  SourceFormat from = SourceFormat::kAuto;  // kAuto: DetectSourceFormat
  SourceOptions source_options;             // container sources: fields, raw pixels
  // The dataset directory to create, or an s3:// URL (shard format only): the dataset is then
  // written to `staging_dir` and each shard uploaded as soon as it is sealed (multipart), the
  // manifest last, so the URL shows no dataset until it is whole. An existing dataset there needs
  // writer.overwrite (its manifest is deleted first); a killed run is continued by `resume`,
  // which uploads only the shards the URL does not already hold. docs/remote.md.
  std::filesystem::path output;
  // s3:// output: where the dataset is written before it is uploaded (removed once uploaded).
  // Empty: $PACKREC_STAGING_DIR, else /var/tmp/packrec-upload, in a folder named after the URL.
  // It needs room for the whole dataset.
  std::filesystem::path staging_dir;
  WriterOptions writer;
  ListFileKind list_kind = ListFileKind::kAuto;
  std::filesystem::path list_root;  // list files: paths are relative to this (default: its dir)
  // A COCO instances JSON annotating the images of the `source` folder: one record per entry of
  // its "images", with boxes, category ids, crowd flags, areas, annotation ids and segmentations
  // as fields (docs/formats/fields.md). Image folders only.
  std::filesystem::path annotations;
  std::optional<std::uint64_t> shuffle_seed;  // shuffle the listing at convert time
  unsigned threads = 0;  // readers/validators (imports: workers preparing records); 0: one per core
  OnBadRecord on_error = OnBadRecord::kFail;
  std::uint32_t resize_short = 0;  // > 0: re-encode with the shorter side at most this
  int quality = 0;                 // > 0: re-encode at this JPEG quality
  // Partitioned conversion (--part I/N): part_count > 0 converts only part part_index of the
  // (shuffled, when shuffle_seed is set) listing cut into part_count contiguous ranges, into
  // `output / PartName(...)`, so N tasks given one output directory never collide. MergeParts
  // (merge.h) joins the parts into the dataset one conversion would have written.
  std::uint32_t part_index = 0;
  std::uint32_t part_count = 0;
  // Continue the interrupted conversion at `output` (killed, or stopped by a full disk or a failed
  // fsync) from its last resume point: same source and options, else refused. Nothing to
  // continue: a plain conversion; a finished one: nothing to do (stats.already_complete). Image
  // folders and list files into shard, lmdb or hdf5 (which starts its file again); see
  // docs/reliability.md.
  bool resume = false;
};

// The name of part `index` of `count` inside a parts directory: part-00002-of-00004.pkr (shard),
// .lmdb or .h5.
std::string PartName(std::uint32_t index, std::uint32_t count, const std::string& format);

struct ConvertProgress {
  std::uint64_t records_done = 0;  // written or rejected
  std::uint64_t records_total = 0;
  std::uint64_t input_bytes = 0;
  double elapsed_seconds = 0;
};

struct ConvertStats {
  // The format written: the one asked for, or the one OUT's name says (ChooseOutputFormat).
  std::string format;
  std::uint64_t records_written = 0;
  std::uint64_t input_bytes = 0;
  std::uint64_t output_bytes = 0;
  std::vector<Reject> rejects;  // also written to OUTPUT/rejects.tsv
  std::vector<std::string> empty_classes;
  double elapsed_seconds = 0;
  // Partitioned conversion: where the part went.
  std::filesystem::path part_path;
  // Nothing was done: a re-run of a finished part, or --resume of a finished conversion.
  bool already_complete = false;
  // --resume: the records kept from the interrupted run (records_written counts them too).
  std::uint64_t resumed_records = 0;
};

// Called from the writing thread after the first record, about every 200 ms, and after the last. A
// non-OK status stops the conversion (Python's Ctrl-C, a callback that raised): Convert removes
// what it wrote and returns that status.
using ProgressCallback = std::function<Status(const ConvertProgress&)>;

// Container sources stream in source order on one reading thread (records are probed, and
// re-encoded when asked, beside it): --shuffle and --part, which need the whole listing first,
// are refused for them. A damaged source record follows on_error like an unreadable file.
// Errors: InvalidArgument (bad option; the message names it), NotFound (missing input, no images
// found), AlreadyExists (output exists without overwrite), InvalidInput (an input that is not an
// image, with on_error=kFail; names the file, its listing index and why), IOError (names the path).
// On error nothing is left at the output path, except after a failure to write the output (a
// full disk, a failed fsync): then the records up to the last resume point stay, for --resume (the
// message says how many). With part_count > 0, a part interrupted earlier is redone from scratch
// (its leftovers, PART.partial, are only ever its own), or continued with resume.
Result<ConvertStats> Convert(const ConvertOptions& options, const ProgressCallback& progress = {});

}  // namespace packrec

#endif  // PACKREC_CONVERT_H_
