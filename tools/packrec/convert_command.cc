#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli_common.h"
#include "packrec/convert.h"
#include "packrec/format.h"
#include "packrec/source.h"

namespace packrec::cli {
namespace {

std::string Duration(double seconds) {
  const auto total = static_cast<long>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  return text;
}

// --format's help: every format in the registry, with what it is.
std::string FormatHelp() {
  std::string help = "Output format:";
  bool in_exports = false;
  for (const FormatInfo& format : ListFormats()) {
    if (!format.readable && !in_exports) {
      help.back() = ';';
      help += " exports, for other tools' readers:";
      in_exports = true;
    }
    help += " " + format.name + " (" + format.summary + "),";
  }
  help.pop_back();
  return help;
}

// Progress on stderr. On a terminal, one line redrawn in place; anywhere else (a Slurm log, CI,
// nohup) a whole line every `interval` seconds, so a log shows the run is alive and how far it is,
// and the last one when it ends. The ETA is shown once it means something: after 3 s and 1% done
// (a first guess from the opening records, page cache warming up, says little).
class ProgressPrinter {
 public:
  ProgressPrinter(bool terminal, double interval_seconds)
      : terminal_(terminal), interval_(interval_seconds), next_line_at_(interval_seconds) {}

  Status operator()(const ConvertProgress& progress) {
    const bool done = progress.records_total > 0 && progress.records_done == progress.records_total;
    if (!terminal_) {
      if (!done && progress.elapsed_seconds < next_line_at_) return Status::OK();
      if (done && lines_ == 0) return Status::OK();  // too short to need one: the summary says it
      next_line_at_ = progress.elapsed_seconds + interval_;
    }
    const double seconds = progress.elapsed_seconds;
    const double rate = seconds > 0 ? static_cast<double>(progress.records_done) / seconds : 0;
    const double mb_per_s =
        seconds > 0 ? static_cast<double>(progress.input_bytes) / 1e6 / seconds : 0;
    std::string where = std::to_string(progress.records_done);
    std::string eta;
    if (progress.records_total > 0) {
      const auto percent = static_cast<int>(100 * progress.records_done / progress.records_total);
      where = "[" + std::to_string(percent) + "%] " + where + "/" +
              std::to_string(progress.records_total);
      const bool meaningful = seconds >= 3 && percent >= 1 && rate > 0;
      eta =
          meaningful
              ? Duration(static_cast<double>(progress.records_total - progress.records_done) / rate)
              : "--:--";
      eta = "  ETA " + eta;
    }
    std::fprintf(stderr, "%s%s records  %.0f rec/s  %.1f MB/s  %s elapsed%s%s",
                 terminal_ ? "\r" : "packrec convert: ", where.c_str(), rate, mb_per_s,
                 Duration(seconds).c_str(), eta.c_str(), terminal_ && !done ? "   " : "\n");
    ++lines_;
    return Status::OK();
  }

 private:
  bool terminal_;
  double interval_;
  double next_line_at_;
  std::uint64_t lines_ = 0;
};

// What the flags set, before they become ConvertOptions.
struct ConvertArgs {
  ConvertOptions options;
  std::string source;
  std::string output;
  std::string compress = "none";
  std::string list_format = "auto";
  std::string on_error = "fail";
  std::string root;
  std::string hdf5_layout = "encoded";
  std::string lmdb_values = "packrec";
  std::string from = "auto";
  std::string caffe_raw = "png";
  std::vector<std::uint32_t> size;
  std::uint64_t seed = 0;
  std::string part;
  bool shuffle = false;
  bool quiet = false;
  bool json = false;
  double progress_interval = 10;
};

// Where and how the output is written.
void AddOutputOptions(CLI::App* command, ConvertArgs* args) {
  // Empty unless given: the output's name then says it (data.h5, data.lmdb), else shard.
  command->add_option("--format", args->options.writer.format, FormatHelp())
      ->check(CLI::IsMember(WritableFormats()));
  command
      ->add_option("--shard-size", args->options.writer.shard_size_bytes,
                   "Target shard size (e.g. 256MiB, 64M, 100000)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 50))
      ->default_str("256MiB");
  command
      ->add_option("--align", args->options.writer.shard.align_bytes,
                   "Record alignment in bytes, a power of two (4096 for O_DIRECT readers)")
      ->check(CLI::Range(1u, 1u << 20))
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            const unsigned long n = std::stoul(value);
            return (n & (n - 1)) == 0 ? "" : "must be a power of two, got " + value;
          },
          "POWER_OF_TWO"))
      ->capture_default_str();
  command
      ->add_option(
          "--compress", args->compress,
          "Per-record compression: none, zstd or zstd:LEVEL (1-22), JPEGs staying as they are; "
          "for --hdf5-layout pixels: deflate or deflate:LEVEL (1-9)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            const Result<CompressionSetting> parsed = ParseCompression(value);
            return parsed.ok() ? std::string() : parsed.status().message();
          },
          "none|zstd[:LEVEL]|deflate[:LEVEL]"))
      ->capture_default_str();
  command
      ->add_option("--map-size", args->options.writer.lmdb.map_size_bytes,
                   "lmdb: initial map size (0: 1 GiB); it doubles when full, so this is only a "
                   "starting point")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 50))
      ->default_str("0");
  command
      ->add_option("--checkpoint-every", args->options.writer.checkpoint_bytes,
                   "lmdb: sync and record a resume point every this many bytes of images (the "
                   "most a kill or a full disk makes --resume redo; 0: 64MiB). Shards record one "
                   "per sealed shard; hdf5 none (a resumed hdf5 conversion starts again)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 50))
      ->default_str("0");
  command
      ->add_option("--lmdb-values", args->lmdb_values,
                   "lmdb: packrec (packrec's value header, key and image) or caffe-datum "
                   "(caffe.Datum protobufs with encoded=true, read by Caffe and DALI's "
                   "fn.readers.caffe; the manifest goes to OUT/packrec-manifest.json)")
      ->check(CLI::IsMember({"packrec", "caffe-datum"}))
      ->capture_default_str();
  command
      ->add_option("--hdf5-layout", args->hdf5_layout,
                   "hdf5: encoded (the images as they are, in one contiguous /data) or pixels "
                   "(decoded, resized to --size, in an N x H x W x 3 /images dataset)")
      ->check(CLI::IsMember({"encoded", "pixels"}))
      ->capture_default_str();
  command
      ->add_option("--size", args->size,
                   "hdf5 pixels layout: output height and width; images are stretched to it")
      ->expected(2)
      ->check(CLI::Range(1u, 65535u));
  command
      ->add_option("--commit-records", args->options.writer.lmdb.commit_records,
                   "lmdb: records per write transaction")
      ->check(CLI::Range(1u, 10000000u))
      ->capture_default_str();
}

// What the source is and how its records are read and prepared.
void AddSourceOptions(CLI::App* command, ConvertArgs* args) {
  command
      ->add_option(
          "--threads", args->options.threads,
          "Threads reading and checking inputs (imports: preparing records; 0: one per core)")
      ->check(CLI::Range(0u, 1024u))
      ->capture_default_str();
  command->add_flag("--shuffle", args->shuffle, "Shuffle the records at convert time");
  command->add_option("--seed", args->seed, "Shuffle seed (implies --shuffle)")
      ->check(Uint64Digits());
  command
      ->add_option("--on-error", args->on_error,
                   "What to do with an input that is not a usable image: fail, or skip it "
                   "and list it in OUT/rejects.tsv")
      ->check(CLI::IsMember({"fail", "skip"}))
      ->capture_default_str();
  command
      ->add_option("--from", args->from,
                   "What SRC is: auto (detected from its names and first bytes), folder, list, "
                   "wds, tfrecord, recordio, mds, caffe-lmdb or packrec")
      ->check(CLI::IsMember(SourceFormatNames()))
      ->capture_default_str();
  command->add_option("--image-field", args->options.source_options.image_field,
                      "Imports: the feature (tfrecord), column (mds) or member extension (wds) "
                      "holding the image (default: the usual names, docs/interop.md)");
  command->add_option("--label-field", args->options.source_options.label_field,
                      "Imports: the feature, column or member holding the integer label");
  command->add_option("--key-field", args->options.source_options.key_field,
                      "Imports: the feature, column or json field holding the record's key");
  command
      ->add_option("--fields", args->options.source_options.keep_fields,
                   "Keep only these fields beside image and label (comma-separated: member "
                   "suffixes, feature or column names, side-file suffixes); default: every field "
                   "the source holds")
      ->delimiter(',');
  command
      ->add_option("--annotations", args->options.annotations,
                   "A COCO instances JSON over the images of SRC (a folder): each image's boxes, "
                   "category ids, crowd flags, areas and segmentations become fields")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--drop-fields", args->options.source_options.drop_fields,
                   "Leave these fields out (comma-separated names, as --fields)")
      ->delimiter(',');
  command
      ->add_option("--caffe-raw", args->caffe_raw,
                   "Caffe LMDB imports: raw-pixel Datums become png (lossless) or raw (RGB "
                   "pixels, as the hdf5 pixels layout stores them)")
      ->check(CLI::IsMember({"png", "raw"}))
      ->capture_default_str();
  command->add_option("--list-format", args->list_format, "List file format")
      ->check(CLI::IsMember({"auto", "caffe", "mxnet"}))
      ->capture_default_str();
  command->add_option("--root", args->root,
                      "Directory list-file paths are relative to (default: the list's folder)");
  command
      ->add_option("--resize-short", args->options.resize_short,
                   "Re-encode images whose shorter side is larger, scaled down to this (0: off)")
      ->check(CLI::Range(0u, 65535u))
      ->capture_default_str();
  command
      ->add_option("--quality", args->options.quality,
                   "Re-encode every image as JPEG at this quality (0: off; 90 with --resize-short)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  AddMaxPixelsOption(command);
}

// Parts, reruns and what is printed.
void AddRunOptions(CLI::App* command, ConvertArgs* args) {
  command
      ->add_option("--part", args->part,
                   "Convert only part I of N (0-based) of the listing, into "
                   "OUT/part-IIIII-of-NNNNN.pkr|.lmdb|.h5; join the parts with packrec merge. A "
                   "finished part is not redone; an interrupted one is")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            const std::size_t slash = value.find('/');
            try {
              // One slash, digits on both sides: "0/2/3" is no part (it read as 0/2).
              if (slash != std::string::npos && slash > 0 && slash + 1 < value.size() &&
                  value.find('/', slash + 1) == std::string::npos &&
                  value.find_first_not_of("0123456789/") == std::string::npos) {
                const unsigned long index = std::stoul(value.substr(0, slash));
                const unsigned long count = std::stoul(value.substr(slash + 1));
                if (count >= 1 && count <= 99999 && index < count) return "";
              }
            } catch (const std::exception&) {
            }
            return "must be I/N with 0 <= I < N <= 99999, got '" + value + "'";
          },
          "I/N"));
  command->add_flag("--overwrite", args->options.writer.overwrite,
                    "Replace OUT if it already holds a packrec dataset (or an interrupted "
                    "conversion)");
  command->add_flag("--resume", args->options.resume,
                    "Continue the conversion into OUT that was killed or stopped by a write "
                    "error, from its last resume point (same SRC and options; a finished one is "
                    "left as it is; nothing to continue: a plain conversion)");
  command->add_option("--staging", args->options.staging_dir,
                      "OUT is an s3:// URL: the local folder the dataset is written to before "
                      "each shard is uploaded (default: $PACKREC_STAGING_DIR, else "
                      "/var/tmp/packrec-upload); needs room for the whole dataset");
  command->add_flag("-q,--quiet", args->quiet,
                    "No progress line and no summary (warnings, rejects and resumed records are "
                    "still printed)");
  command->add_flag("--json", args->json,
                    "Print the summary as JSON on stdout, and an error as {\"error\": {...}}");
  command
      ->add_option("--progress-interval", args->progress_interval,
                   "Seconds between progress lines when stderr is not a terminal (a log, Slurm, "
                   "CI; default 10); a terminal gets one line redrawn in place")
      ->check(CLI::Range(0.0, 86400.0));
}

// The flags as the library's options (their checks have passed).
void ApplyArgs(ConvertArgs* args, const CLI::App* command) {
  ConvertOptions& options = args->options;
  options.source = args->source;
  options.output = args->output;
  options.list_root = args->root;
  options.list_kind = args->list_format == "caffe"   ? ListFileKind::kCaffe
                      : args->list_format == "mxnet" ? ListFileKind::kMxnet
                                                     : ListFileKind::kAuto;
  options.on_error = args->on_error == "skip" ? OnBadRecord::kSkip : OnBadRecord::kFail;
  options.from = ParseSourceFormat(args->from).value();  // the flag's check allows only names
  options.source_options.raw_pixels = args->caffe_raw == "raw" ? RawPixels::kRaw : RawPixels::kPng;
  const CompressionSetting compression = ParseCompression(args->compress).value();  // checked
  options.writer.compression = compression.codec;
  options.writer.compression_level = compression.level;
  if (args->lmdb_values == "caffe-datum") options.writer.lmdb.values = LmdbValues::kCaffeDatum;
  if (args->hdf5_layout == "pixels") {
    options.writer.hdf5.layout = Hdf5Layout::kPixels;
  }
  if (!args->size.empty()) {
    options.writer.hdf5.pixel_height = args->size[0];
    options.writer.hdf5.pixel_width = args->size[1];
  }
  if (args->shuffle || command->count("--seed") > 0) options.shuffle_seed = args->seed;
  if (!args->part.empty()) {
    const std::size_t slash = args->part.find('/');
    options.part_index = static_cast<std::uint32_t>(std::stoul(args->part.substr(0, slash)));
    options.part_count = static_cast<std::uint32_t>(std::stoul(args->part.substr(slash + 1)));
  }
}

// The summary of a finished conversion into `written`, as text.
void PrintSummary(const ConvertArgs* args, const std::string& written,
                  const Result<ConvertStats>& stats) {
  // -q leaves out the summary; what a script may act on (resumed records, warnings, rejects)
  // is still said.
  const double seconds = std::max(stats->elapsed_seconds, 1e-9);
  if (!args->quiet) {
    std::printf("converted %llu images (%s) into %s in %.2f s: %.0f images/s, %.1f MB/s\n",
                static_cast<unsigned long long>(stats->records_written),
                HumanBytes(stats->output_bytes).c_str(), written.c_str(), seconds,
                static_cast<double>(stats->records_written) / seconds,
                static_cast<double>(stats->input_bytes) / 1e6 / seconds);
  }
  if (stats->resumed_records > 0) {
    std::printf("resumed: %llu of these records were kept from the interrupted run\n",
                static_cast<unsigned long long>(stats->resumed_records));
  }
  for (const std::string& name : stats->empty_classes) {
    std::printf("warning: class folder '%s' holds no image files (its label is kept)\n",
                PrintableText(name).c_str());
  }
  if (!stats->rejects.empty()) {
    const std::string listed = RejectsFilePath(written, stats->format).string();
    // A file name may hold a newline: printed escaped, as rejects.tsv holds it.
    std::printf("rejected %zu inputs (listed in %s); the first: %s: %s\n", stats->rejects.size(),
                PrintableText(listed).c_str(), PrintableText(stats->rejects.front().path).c_str(),
                PrintableText(stats->rejects.front().reason).c_str());
  }
}

void RunConvert(ConvertArgs* args, const CLI::App* command, int& exit_code) {
  ApplyArgs(args, command);
  ConvertOptions& options = args->options;
  ProgressCallback progress;
  if (!args->quiet && !args->json) {
    const bool terminal = ::isatty(STDERR_FILENO) != 0;
    // A first line as soon as the interval has passed, not at the start.
    progress = [printer = std::make_shared<ProgressPrinter>(terminal, args->progress_interval)](
                   const ConvertProgress& report) { return (*printer)(report); };
  }
  Result<ConvertStats> stats = Convert(options, progress);
  if (!stats.ok()) {
    exit_code = Fail("convert", stats.status(), args->json);
    return;
  }
  const std::string written = options.part_count > 0 ? stats->part_path.string() : args->output;
  if (stats->already_complete && !args->json) {
    if (options.part_count > 0) {
      std::printf("part %u/%u is already complete in %s (%llu records); nothing to do\n",
                  options.part_index, options.part_count, written.c_str(),
                  static_cast<unsigned long long>(stats->records_written));
    } else {
      std::printf("%s is already complete (%llu records); nothing to do\n", written.c_str(),
                  static_cast<unsigned long long>(stats->records_written));
    }
    return;
  }
  if (args->json) {
    nlohmann::json out;
    out["output"] = written;
    out["format"] = stats->format;
    out["already_complete"] = stats->already_complete;  // nothing was done: it was whole
    out["records"] = stats->records_written;
    out["resumed_records"] = stats->resumed_records;
    out["rejected"] = stats->rejects.size();
    out["input_bytes"] = stats->input_bytes;
    out["output_bytes"] = stats->output_bytes;
    out["seconds"] = stats->elapsed_seconds;
    out["empty_classes"] = stats->empty_classes;
    std::cout << out.dump(2) << "\n";
    return;
  }
  PrintSummary(args, written, stats);
}

}  // namespace

void AddConvertCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "convert",
      "Pack an image folder (SRC/<class>/.../<file>, labels as torchvision's ImageFolder), a "
      "list file (Caffe 'path label' or MXNet .lst), or another tool's container (WebDataset "
      "tars, TFRecord, RecordIO, MDS, a Caffe LMDB, a packrec dataset) into a dataset, or export "
      "to wds, tfrecord or recordio");
  auto args = std::make_shared<ConvertArgs>();
  command
      ->add_option("SRC", args->source,
                   "Image folder, list file, container file, glob ('train-*.tar') or brace "
                   "pattern ('train-{000000..000127}.tar'), MDS or LMDB directory, dataset")
      ->required();
  command->add_option("OUT", args->output, "Dataset directory to create, or an s3:// URL")
      ->required();
  AddOutputOptions(command, args.get());
  AddSourceOptions(command, args.get());
  AddRunOptions(command, args.get());
  command->callback([args, command, &exit_code] { RunConvert(args.get(), command, exit_code); });
}

}  // namespace packrec::cli
