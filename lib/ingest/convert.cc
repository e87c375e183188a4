// Convert: list the input, read and check files on N threads, hand them to one writer in listing
// order. A bounded window between readers and the writer keeps memory flat on huge inputs.
#include "packrec/convert.h"
#include "dataset/json_util.h"

#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/keys.h"
#include "core/output_dir.h"
#include "core/threads.h"
#include "dataset/payload.h"
#include "ingest/listing_hash.h"
#include "packrec/image.h"
#include "packrec/reader.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Prepared {
  std::vector<std::byte> bytes;
  ImageInfo image;
  Status status;  // not OK: the input is rejected for this reason
  std::uint64_t input_bytes = 0;
  std::uint64_t input_stamp = 0;  // listing inputs: InputStamp of the file as it was read
};

// One listing input's key, size and modification time as one number; a resume point keeps the
// sum over the records before it (the order does not matter), so that --resume notices an input
// changed since the interrupted run.
std::uint64_t InputStamp(std::string_view key, const FileStamp& stamp) {
  std::array<std::byte, 16> fields{};
  StoreLE<std::uint64_t>(&fields[0], stamp.size);
  StoreLE<std::int64_t>(&fields[8], stamp.mtime_ns);
  return Xxh64(fields, Xxh64(key));
}

Prepared PrepareBytes(Result<std::vector<std::byte>> bytes, const ConvertOptions& options);

// Why `key` cannot be a record's key, for that record's reject (which follows --on-error); empty
// when it can. Decided once, at convert time: too long for any format (it used to stop a whole
// import, even under --on-error skip), or against the key rule (core/keys.h: a file name with a
// newline, an import's `a//b` or `../x`), which extract would otherwise refuse whole. A key too
// long to store is not quoted.
std::string KeyRejection(std::string_view key) {
  if (key.size() > kMaxRecordKeyBytes) {
    return "its key is " + std::to_string(key.size()) + " bytes, over the " +
           std::to_string(kMaxRecordKeyBytes) + " a key may have";
  }
  const std::string problem = KeyProblem(key);
  return problem.empty() ? problem : "its key '" + PrintableKey(key) + "' " + problem;
}

// A record rejected before its bytes are looked at, for `why`.
Prepared Rejected(const std::string& why, std::uint64_t input_bytes) {
  Prepared prepared;
  prepared.input_bytes = input_bytes;
  prepared.status = Status::InvalidInput(why);
  return prepared;
}

Prepared PrepareItem(const SourceItem& item, const ConvertOptions& options) {
  if (const std::string why = KeyRejection(item.key); !why.empty()) return Rejected(why, 0);
  FileStamp stamp;
  Prepared prepared = PrepareBytes(ReadWholeFile(item.path, &stamp), options);
  prepared.input_stamp = InputStamp(item.key, stamp);
  return prepared;
}

// Probes (and, when asked, re-encodes or decodes) one input's bytes.
Prepared PrepareBytes(Result<std::vector<std::byte>> bytes, const ConvertOptions& options) {
  Prepared prepared;
  if (!bytes.ok()) {
    prepared.status = bytes.status();
    return prepared;
  }
  prepared.input_bytes = bytes->size();
  Result<ImageInfo> image = ProbeImage(*bytes);
  if (!image.ok()) {
    prepared.status = image.status();
    return prepared;
  }
  if (options.writer.hdf5_layout == Hdf5Layout::kPixels) {
    Result<std::vector<std::byte>> pixels =
        DecodeResizedRgb(*bytes, options.writer.pixel_width, options.writer.pixel_height);
    if (!pixels.ok()) {
      prepared.status = pixels.status();
      return prepared;
    }
    prepared.bytes = std::move(pixels).value();
    prepared.image = ImageInfo{Encoding::kRawRgb,           options.writer.pixel_width,
                               options.writer.pixel_height, 3,
                               Subsampling::kNone,          false};
    return prepared;
  }
  if (options.resize_short > 0 || options.quality > 0) {
    Result<std::vector<std::byte>> transcoded =
        TranscodeToJpeg(*bytes, options.resize_short, options.quality);
    if (!transcoded.ok()) {
      prepared.status = transcoded.status();
      return prepared;
    }
    image = ProbeImage(*transcoded);
    if (!image.ok()) {
      prepared.status = image.status().WithContext("after re-encoding");
      return prepared;
    }
    bytes = std::move(transcoded);
  }
  prepared.bytes = std::move(bytes).value();
  prepared.image = *image;
  return prepared;
}

// --threads, 0 meaning one per core.
unsigned ThreadCount(const ConvertOptions& options) {
  return options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
}

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
  if (options.threads > 1024) {
    return Status::InvalidArgument("--threads must be 1 to 1024, got " +
                                   std::to_string(options.threads));
  }
  if (options.quality < 0 || options.quality > 100) {
    return Status::InvalidArgument("--quality must be 1 to 100, got " +
                                   std::to_string(options.quality));
  }
  if (options.writer.hdf5_layout == Hdf5Layout::kPixels &&
      (options.resize_short > 0 || options.quality > 0)) {
    return Status::InvalidArgument(
        "--resize-short and --quality re-encode JPEGs; the pixels layout stores decoded images "
        "(--size sets their size)");
  }
  if (options.writer.hdf5_layout == Hdf5Layout::kPixels &&
      std::uint64_t{options.writer.pixel_height} * options.writer.pixel_width > MaxImagePixels()) {
    // Refused here, naming the flag, rather than as every input's reject (or an HDF5 error).
    return Status::InvalidArgument(
        "--size " + std::to_string(options.writer.pixel_height) + " " +
        std::to_string(options.writer.pixel_width) + ": " +
        std::to_string(std::uint64_t{options.writer.pixel_height} * options.writer.pixel_width) +
        " pixels per image, over the " + std::to_string(MaxImagePixels()) +
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
    return Status::InvalidArgument(
        "OUT " + options.output.string() + " lies inside SRC " + options.source.string() +
        ": the next conversion would list it as input; choose an output path outside SRC");
  }
  if (options.resume && options.writer.overwrite) {
    return Status::InvalidArgument(
        "--resume continues an interrupted conversion and --overwrite starts again: pass one");
  }
  const std::string& format = options.writer.format;
  if (options.resume && format != "shard" && format != "lmdb" && format != "hdf5") {
    return Status::InvalidArgument("--resume applies to the shard, lmdb and hdf5 formats, not " +
                                   format + " (an export is rewritten from the start)");
  }
  return Status::OK();
}

Result<SourceListing> ListSource(const ConvertOptions& options) {
  std::error_code error;
  const fs::file_status status = fs::status(options.source, error);
  if (!fs::exists(status)) {
    return Status::NotFound("input " + options.source.string() + " does not exist");
  }
  if (fs::is_directory(status)) {
    if (options.from == SourceFormat::kListFile) {
      return Status::InvalidArgument("--from list reads a list file; " + options.source.string() +
                                     " is a directory (--from folder, or name the list file)");
    }
    if (!options.list_root.empty()) {
      return Status::InvalidArgument("--root applies to list files only; " +
                                     options.source.string() + " is a directory");
    }
    return ListImageFolder(options.source);
  }
  if (!fs::is_regular_file(status)) {
    return Status::InvalidInput("input " + options.source.string() +
                                " is not a directory (an image folder) or a list file");
  }
  if (options.from == SourceFormat::kImageFolder) {
    return Status::InvalidArgument("--from folder reads a directory; " + options.source.string() +
                                   " is a file (--from list for a list file)");
  }
  const fs::path root =
      options.list_root.empty() ? options.source.parent_path() : options.list_root;
  return ReadListFile(options.source, root.empty() ? fs::path(".") : root, options.list_kind);
}

std::string OptionsJson(const ConvertOptions& options, std::uint64_t part_begin = 0,
                        std::uint64_t part_end = 0, std::uint64_t items_total = 0) {
  nlohmann::json json;
  json["format"] = options.writer.format;
  if (options.writer.format == "shard") {
    json["shard_size_bytes"] = options.writer.shard_size_bytes;
    json["align_bytes"] = options.writer.align_bytes;
  }
  json["compression"] = options.writer.compression == Compression::kZstd      ? "zstd"
                        : options.writer.compression == Compression::kDeflate ? "deflate"
                                                                              : "none";
  json["compression_level"] = options.writer.compression_level;
  json["shuffle_seed"] = options.shuffle_seed ? nlohmann::json(*options.shuffle_seed) : nullptr;
  json["resize_short"] = options.resize_short;
  json["quality"] = options.quality;
  json["on_error"] = options.on_error == OnError::kSkip ? "skip" : "fail";
  // The part's place in the whole conversion ("part" is what merge checks and removes; every
  // other option is the same in every part and in the merged manifest).
  if (options.part_count > 0) {
    json["part"] = {{"index", options.part_index},
                    {"count", options.part_count},
                    {"items_begin", part_begin},
                    {"items_end", part_end},
                    {"items_total", items_total}};
  }
  if (options.writer.format == "lmdb") {
    json["lmdb_values"] =
        options.writer.lmdb_values == LmdbValues::kCaffeDatum ? "caffe-datum" : "packrec";
  }
  if (options.writer.format == "hdf5") {
    const bool pixels = options.writer.hdf5_layout == Hdf5Layout::kPixels;
    json["hdf5_layout"] = pixels ? "pixels" : "encoded";
    if (pixels) json["size"] = {options.writer.pixel_height, options.writer.pixel_width};
  }
  return json.dump();
}

// The stored payload total when every input is stored as it is: the input files' sizes. LMDB
// sizes its map from it and HDF5 writes /data in place when it comes out exact. Shards do not need
// it, and when images are re-encoded or decoded it is unknown (0).
std::uint64_t ExpectedPayloadBytes(const SourceListing& listing, const ConvertOptions& options) {
  if (options.writer.format == "shard" || options.resize_short > 0 || options.quality > 0 ||
      options.writer.hdf5_layout == Hdf5Layout::kPixels) {
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

// Readers fill slots in a ring of `window` entries; the writer empties them in index order.
class OrderedPrefetch {
 public:
  // Prepares items first, first + 1, ...
  OrderedPrefetch(const SourceListing& listing, const ConvertOptions& options, unsigned threads,
                  std::size_t first = 0)
      : listing_(listing),
        options_(options),
        window_(std::max<std::size_t>(64, threads * 8)),
        ring_(window_),
        next_claim_(first),
        next_take_(first) {
    started_ = StartThreads(workers_, threads, "packrec-list", [this] { Work(); });
  }
  // Whether every thread started; when not, the destructor stops those that did.
  const Status& started() const { return started_; }

  ~OrderedPrefetch() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  // REQUIRES: called for first, first + 1, ... in order.
  Prepared Take(std::size_t index) {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return ring_[index % window_].has_value(); });
    Prepared prepared = std::move(*ring_[index % window_]);
    ring_[index % window_].reset();
    ++next_take_;
    lock.unlock();
    space_.notify_all();
    return prepared;
  }

 private:
  void Work() {
    for (;;) {
      std::size_t index;
      {
        std::unique_lock lock(mutex_);
        space_.wait(lock, [&] { return stop_ || next_claim_ < next_take_ + window_; });
        if (stop_ || next_claim_ >= listing_.items.size()) return;
        index = next_claim_++;
      }
      Prepared prepared = PrepareItem(listing_.items[index], options_);
      {
        std::lock_guard lock(mutex_);
        ring_[index % window_] = std::move(prepared);
      }
      ready_.notify_all();
    }
  }

  const SourceListing& listing_;
  const ConvertOptions& options_;
  const std::size_t window_;
  std::vector<std::optional<Prepared>> ring_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable space_;
  std::size_t next_claim_;
  std::size_t next_take_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
  Status started_;
};

// Part `index` of `count` of `total` items: [total x index / count, total x (index+1) / count).
std::pair<std::uint64_t, std::uint64_t> PartRange(std::uint64_t total, std::uint32_t index,
                                                  std::uint32_t count) {
  return {total * index / count, total * (index + 1) / count};
}

// The record count of a finished part at `path` of the same conversion (same listing, same
// options); nullopt when there is none.
Result<std::optional<std::uint64_t>> FinishedPartRecords(const fs::path& path,
                                                         const std::string& listing_hash,
                                                         const std::string& options_json) {
  Result<std::unique_ptr<Reader>> existing = OpenDataset(path);
  if (!existing.ok()) return std::optional<std::uint64_t>();
  const DatasetInfo& info = (*existing)->info();
  // Without exceptions: unreadable options are "other options".
  const nlohmann::json theirs = nlohmann::json::parse(info.options_json, nullptr, false);
  if (info.listing_hash == listing_hash && !theirs.is_discarded() &&
      theirs == nlohmann::json::parse(options_json)) {
    return std::optional<std::uint64_t>((*existing)->size());
  }
  return Status::AlreadyExists(path.string() +
                               " holds this part of another conversion (another listing or other "
                               "options); pass --overwrite to convert it again");
}

// Moves a dataset, and its rejects file when that lies beside it (HDF5) rather than inside.
Status MovePart(const fs::path& from, const fs::path& to, const std::string& format) {
  const fs::path rejects = RejectsFilePath(from, format);
  const bool beside = rejects.parent_path() != from;
  std::error_code error;
  fs::remove_all(to, error);
  if (beside) fs::remove(RejectsFilePath(to, format), error);
  PACKREC_RETURN_IF_ERROR(RenamePath(from, to));
  if (beside && fs::exists(rejects, error)) {
    PACKREC_RETURN_IF_ERROR(RenamePath(rejects, RejectsFilePath(to, format)));
  }
  return Status::OK();
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
    return Status(failure.code(), failure.message() + "; the first " + std::to_string(kept) +
                                      " records are kept: once that is fixed, run the same "
                                      "command with --resume to continue");
  }
  stats.records_written = writer.records_written();
  stats.output_bytes = writer.bytes_written();
  stats.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

// Where a listing conversion starts: item 0 with a new writer, or, with --resume, the interrupted
// run's writer reopened at its last resume point and the listing position that point recorded.
struct ConvertStart {
  std::unique_ptr<DatasetWriter> writer;
  std::uint64_t next_item = 0;
  std::uint64_t input_bytes = 0;
  std::vector<Reject> rejects;
  std::vector<std::uint64_t> reject_items;  // each reject's listing index
  std::uint64_t resumed_records = 0;
  std::uint64_t input_stamps = 0;  // sum of the records' InputStamp before next_item
  bool has_input_stamps = false;   // journals written before packrec kept them have none
};

// What a resume point records of the conversion (the writer's journal carries it): the listing
// and options it is of, and how far into the listing its records reach.
std::string CallerState(const DatasetMetadata& metadata, std::uint64_t next_item,
                        std::uint64_t input_bytes, std::uint64_t input_stamps,
                        const std::vector<Reject>& rejects,
                        const std::vector<std::uint64_t>& reject_items) {
  nlohmann::json json;
  json["input_stamps"] = input_stamps;
  json["listing_hash"] = metadata.listing_hash;
  json["options"] = nlohmann::json::parse(metadata.options_json);
  json["next_item"] = next_item;
  json["input_bytes"] = input_bytes;
  nlohmann::json kept = nlohmann::json::array();
  for (std::size_t i = 0; i < rejects.size() && reject_items[i] < next_item; ++i) {
    kept.push_back(
        {{"item", reject_items[i]}, {"path", rejects[i].path}, {"reason", rejects[i].reason}});
  }
  json["rejects"] = std::move(kept);
  return json.dump();
}

// Reads a resume point's caller state into `start`, after checking it is of this conversion.
// `check_counts`: also that its records and rejects add up to its position (known only once the
// writer is reopened and says how many records it holds).
Status RestoreCallerState(const std::string& text, const DatasetMetadata& metadata,
                          const ConvertOptions& options, std::uint64_t items, bool check_counts,
                          ConvertStart& start) {
  if (text.empty()) return Status::OK();  // the first journal: nothing written yet
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  const std::string where = options.output.string();
  const auto refuse = [&](const std::string& why) {
    return Status::AlreadyExists(where + " holds an interrupted conversion " + why +
                                 "; pass --overwrite to start again");
  };
  if (json.is_discarded() || !json.is_object()) return refuse("with a damaged resume journal");
  try {
    if (json.at("listing_hash").get<std::string>() != metadata.listing_hash) {
      return refuse("of another listing (the input changed since)");
    }
    if (json.at("options") != nlohmann::json::parse(metadata.options_json)) {
      return refuse("with other options (" + json.at("options").dump() + ")");
    }
    start.next_item = GetUnsigned<std::uint64_t>(json.at("next_item"));
    start.input_bytes = GetUnsigned<std::uint64_t>(json.at("input_bytes"));
    if (json.contains("input_stamps")) {
      start.input_stamps = GetUnsigned<std::uint64_t>(json.at("input_stamps"));
      start.has_input_stamps = true;
    }
    for (const nlohmann::json& reject : json.at("rejects")) {
      start.reject_items.push_back(GetUnsigned<std::uint64_t>(reject.at("item")));
      start.rejects.push_back(
          {reject.at("path").get<std::string>(), reject.at("reason").get<std::string>()});
    }
  } catch (const nlohmann::json::exception&) {
    return refuse("with a damaged resume journal");
  }
  if (start.next_item > items ||
      (check_counts && start.next_item - start.rejects.size() != start.resumed_records)) {
    return refuse("whose journal does not add up (" + std::to_string(start.resumed_records) +
                  " records and " + std::to_string(start.rejects.size()) + " rejects before item " +
                  std::to_string(start.next_item) + ")");
  }
  return Status::OK();
}

// Whether the inputs before a resume point are as the interrupted run read them (same size and
// modification time: an input replaced or edited since would leave its old record kept).
Status CheckInputsUnchanged(const ConvertStart& check, const SourceListing& listing,
                            const ConvertOptions& options) {
  if (!check.has_input_stamps) return Status::OK();
  std::uint64_t stamps = 0;
  std::size_t next_reject = 0;
  for (std::uint64_t item = 0; item < check.next_item; ++item) {
    if (next_reject < check.reject_items.size() && check.reject_items[next_reject] == item) {
      ++next_reject;  // rejected: no record, no stamp
      continue;
    }
    const SourceItem& input = listing.items[item];
    const Result<FileStamp> stamp = StampOf(input.path);
    if (!stamp.ok()) {
      return Status::AlreadyExists(options.output.string() +
                                   " holds an interrupted conversion whose input " +
                                   input.path.string() + " is gone since (" +
                                   stamp.status().message() + "); pass --overwrite to start again");
    }
    stamps += InputStamp(input.key, *stamp);
  }
  if (stamps != check.input_stamps) {
    return Status::AlreadyExists(
        options.output.string() +
        " holds an interrupted conversion some of whose inputs before its resume point changed "
        "since (a file's size or modification time differs): its records of them would be the "
        "old ones; pass --overwrite to start again");
  }
  return Status::OK();
}

Result<ConvertStart> StartConversion(const ConvertOptions& options,
                                     const WriterOptions& writer_options,
                                     const DatasetMetadata& metadata,
                                     const SourceListing& listing) {
  const std::uint64_t items = listing.items.size();
  ConvertStart start;
  if (options.resume) {
    PACKREC_ASSIGN_OR_RETURN(const std::optional<std::string> state,
                             ReadResumeState(options.output, writer_options.format));
    if (state) {
      // Checked before the writer is reopened: reopening drops what came after the resume point.
      ConvertStart check;
      PACKREC_RETURN_IF_ERROR(RestoreCallerState(*state, metadata, options, items, false, check));
      PACKREC_RETURN_IF_ERROR(CheckInputsUnchanged(check, listing, options));
      PACKREC_ASSIGN_OR_RETURN(ResumedWriter resumed,
                               ResumeDatasetWriter(options.output, writer_options));
      start.resumed_records = resumed.records;
      PACKREC_RETURN_IF_ERROR(
          RestoreCallerState(resumed.caller_state, metadata, options, items, true, start));
      start.writer = std::move(resumed.writer);
      return start;
    }
  }
  PACKREC_ASSIGN_OR_RETURN(start.writer, CreateDatasetWriter(options.output, writer_options));
  return start;
}

Result<ConvertStats> ConvertItems(const ConvertOptions& options, const SourceListing& listing,
                                  DatasetMetadata& metadata, const ProgressCallback& progress,
                                  Clock::time_point start, std::uint64_t listing_offset = 0) {
  if (!listing.rejects.empty() && options.on_error == OnError::kFail) {
    return Status::InvalidInput(listing.rejects.front().path + ": " +
                                listing.rejects.front().reason +
                                " (pass --on-error skip to leave it out)");
  }
  WriterOptions writer_options = options.writer;
  writer_options.expected_payload_bytes = ExpectedPayloadBytes(listing, options);
  writer_options.classes = listing.classes;
  writer_options.resumable = true;
  PACKREC_ASSIGN_OR_RETURN(ConvertStart begin,
                           StartConversion(options, writer_options, metadata, listing));
  DatasetWriter* writer = begin.writer.get();
  ConvertStats stats;
  stats.empty_classes = listing.empty_classes;
  stats.resumed_records = begin.resumed_records;
  stats.input_bytes = begin.input_bytes;
  stats.rejects = std::move(begin.rejects);
  std::vector<std::uint64_t> reject_items = std::move(begin.reject_items);
  ConvertProgress report;
  report.records_total = listing.items.size();
  Clock::time_point last_report = start;
  const unsigned threads = ThreadCount(options);
  // The records added since the last resume point: record number, listing index, input bytes
  // before it. A resume point covering `records` records then knows where in the listing it is.
  struct Added {
    std::uint64_t record;
    std::uint64_t item;
    std::uint64_t input_bytes_before;
    std::uint64_t input_stamps_before;
  };
  std::deque<Added> since_checkpoint;
  std::uint64_t added = begin.resumed_records;
  std::uint64_t input_stamps = begin.input_stamps;  // of the records added so far
  std::size_t i = begin.next_item;
  const auto caller_state = [&](std::uint64_t records) {
    while (!since_checkpoint.empty() && since_checkpoint.front().record < records) {
      since_checkpoint.pop_front();
    }
    const std::uint64_t next_item =
        since_checkpoint.empty() ? i + 1 : since_checkpoint.front().item;
    const std::uint64_t input_bytes =
        since_checkpoint.empty() ? stats.input_bytes : since_checkpoint.front().input_bytes_before;
    const std::uint64_t stamps =
        since_checkpoint.empty() ? input_stamps : since_checkpoint.front().input_stamps_before;
    return CallerState(metadata, next_item, input_bytes, stamps, stats.rejects, reject_items);
  };
  Status failure;
  bool writer_failed = false;
  {
    OrderedPrefetch prefetch(listing, options, threads, i);
    // A resumed conversion keeps its resume point (FinishConversion) when no thread can start.
    failure = prefetch.started();
    writer_failed = !failure.ok();
    for (; failure.ok() && i < listing.items.size(); ++i) {
      Prepared prepared = prefetch.Take(i);
      const SourceItem& item = listing.items[i];
      const std::uint64_t input_bytes_before = stats.input_bytes;
      stats.input_bytes += prepared.input_bytes;
      if (prepared.status.ok()) {
        RecordInput record{item.key, item.label, prepared.bytes, prepared.image};
        since_checkpoint.push_back({added, i, input_bytes_before, input_stamps});
        input_stamps += prepared.input_stamp;
        failure = writer->Add(record);
        if (failure.ok()) {
          ++added;
          if (writer->CheckpointDue()) failure = writer->Checkpoint(caller_state);
        }
        if (!failure.ok()) {
          writer_failed = true;
          break;
        }
      } else if (options.on_error == OnError::kSkip) {
        stats.rejects.push_back({item.path.string(), prepared.status.message()});
        reject_items.push_back(i);
      } else {
        failure = Status::InvalidInput(item.path.string() + " (input " +
                                       std::to_string(listing_offset + i) +
                                       " of the listing): " + prepared.status.message() +
                                       " (pass --on-error skip to leave it out)");
        break;
      }
      report.records_done = i + 1;
      report.input_bytes = stats.input_bytes;
      const Clock::time_point now = Clock::now();
      if (progress && (i == begin.next_item || now - last_report > std::chrono::milliseconds(200) ||
                       i + 1 == listing.items.size())) {
        report.elapsed_seconds = std::chrono::duration<double>(now - start).count();
        failure = progress(report);
        last_report = now;
        if (!failure.ok()) break;
      }
    }
  }
  if (failure.ok() && writer->records_written() == 0) {
    failure = Status::InvalidInput("all " + std::to_string(listing.items.size()) + " inputs in " +
                                   options.source.string() +
                                   " were rejected; the first: " + stats.rejects.front().path +
                                   ": " + stats.rejects.front().reason);
  }
  // What listing left out comes first (it is not part of any resume point: every run lists).
  stats.rejects.insert(stats.rejects.begin(), listing.rejects.begin(), listing.rejects.end());
  return FinishConversion(*writer, metadata, failure, writer_failed, std::move(stats), start);
}

// With --resume and no journal: a dataset at `path` that is this conversion, finished (resumed
// again after it completed). Its record count; nullopt when there is none.
std::optional<std::uint64_t> FinishedConversionRecords(const fs::path& path,
                                                       const DatasetMetadata& metadata) {
  Result<std::unique_ptr<Reader>> existing = OpenDataset(path);
  if (!existing.ok()) return std::nullopt;
  const DatasetInfo& info = (*existing)->info();
  const nlohmann::json theirs = nlohmann::json::parse(info.options_json, nullptr, false);
  if (info.listing_hash != metadata.listing_hash || theirs.is_discarded() ||
      theirs != nlohmann::json::parse(metadata.options_json)) {
    return std::nullopt;
  }
  return (*existing)->size();
}

Result<ConvertStats> ConvertListing(const ConvertOptions& options, const ProgressCallback& progress,
                                    Clock::time_point start) {
  PACKREC_ASSIGN_OR_RETURN(SourceListing listing, ListSource(options));
  if (listing.items.empty()) {
    return Status::NotFound("no images found in " + options.source.string());
  }
  DatasetMetadata metadata;
  metadata.listing_hash = ListingHash(listing);
  metadata.classes = listing.classes;
  metadata.source_kind = listing.kind;
  if (options.shuffle_seed) ShuffleListing(listing, *options.shuffle_seed);
  ConvertOptions write = options;
  if (options.part_count > 0) {
    const std::uint64_t total = listing.items.size();
    if (options.part_count > total) {
      return Status::InvalidArgument("--part " + std::to_string(options.part_index) + "/" +
                                     std::to_string(options.part_count) + ": " +
                                     std::to_string(total) + " inputs cannot fill " +
                                     std::to_string(options.part_count) + " parts");
    }
    const auto [begin, end] = PartRange(total, options.part_index, options.part_count);
    metadata.options_json = OptionsJson(options, begin, end, total);
    listing.items.erase(listing.items.begin() + static_cast<std::ptrdiff_t>(end),
                        listing.items.end());
    listing.items.erase(listing.items.begin(),
                        listing.items.begin() + static_cast<std::ptrdiff_t>(begin));
    const fs::path final_path =
        options.output / PartName(options.part_index, options.part_count, options.writer.format);
    if (!options.writer.overwrite) {
      PACKREC_ASSIGN_OR_RETURN(
          const std::optional<std::uint64_t> done,
          FinishedPartRecords(final_path, metadata.listing_hash, metadata.options_json));
      if (done) {
        ConvertStats stats;
        stats.part_path = final_path;
        stats.already_complete = true;
        stats.records_written = *done;
        return stats;
      }
      std::error_code error;
      if (fs::exists(final_path, error)) {
        return Status::AlreadyExists(final_path.string() +
                                     " exists and is not a finished part; pass --overwrite");
      }
    }
    // Written under a name only this part uses, so a re-run may clear what a killed run left.
    write.output = final_path.string() + ".partial";
    std::error_code error;
    fs::create_directories(options.output, error);
    if (error) return ErrnoStatus("create directory", options.output, error.value());
    if (!options.resume) {
      fs::remove_all(write.output, error);
      fs::remove(fs::path(write.output.string() + ".tmp"), error);
      fs::remove(fs::path(write.output.string() + ".payloads.tmp"), error);
      fs::remove(fs::path(write.output.string() + kResumeJournalSuffix), error);
    }
    write.writer.overwrite = false;
    Result<ConvertStats> stats = ConvertItems(write, listing, metadata, progress, start, begin);
    if (!stats.ok()) return stats;
    PACKREC_RETURN_IF_ERROR(MovePart(write.output, final_path, options.writer.format));
    stats->part_path = final_path;
    return stats;
  }
  metadata.options_json = OptionsJson(options);
  if (options.resume) {
    // With a journal left, the conversion is not finished, even where its dataset already opens
    // (LMDB's manifest key is committed before its rejects file is written).
    PACKREC_ASSIGN_OR_RETURN(const std::optional<std::string> interrupted,
                             ReadResumeState(options.output, options.writer.format));
    const std::optional<std::uint64_t> done =
        interrupted ? std::nullopt : FinishedConversionRecords(options.output, metadata);
    if (done) {
      ConvertStats stats;
      stats.already_complete = true;
      stats.records_written = *done;
      return stats;
    }
  }
  return ConvertItems(options, listing, metadata, progress, start);
}

Prepared PrepareSourceRecord(SourceRecord& record, const ConvertOptions& options) {
  if (const std::string why = KeyRejection(record.key); !why.empty()) {
    return Rejected(why, record.bytes.size());
  }
  if (record.image.encoding != Encoding::kRawRgb) {
    return PrepareBytes(std::move(record.bytes), options);
  }
  Prepared prepared;
  prepared.input_bytes = record.bytes.size();
  if (options.writer.hdf5_layout == Hdf5Layout::kPixels || options.resize_short > 0 ||
      options.quality > 0) {
    prepared.status = Status::InvalidInput(
        "a raw-pixel record cannot be resized or re-encoded; import it as PNG (--caffe-raw png)");
    return prepared;
  }
  prepared.bytes = std::move(record.bytes);
  prepared.image = record.image;
  return prepared;
}

// Keeps the kernel reading a source's files ahead of the import, from a thread of its own: the
// reading thread's own read-ahead (ReadAhead) asks the kernel for the next 32 MiB itself, and
// that call allocates and queues every page before it returns, so the reading thread stalled on
// it and then on the reads it had just queued. This thread walks the files in order, 8 MiB at a
// time, up to kAhead bytes beyond what the import has read; the pages it asks for are page cache
// (the kernel may drop them), not the import's memory.
class FilePrefetcher {
 public:
  explicit FilePrefetcher(const std::vector<fs::path>& files) : files_(files) {
    // Only advice to the kernel: without the thread (the system refused one) the import reads
    // as it would on warm storage.
    Result<std::thread> thread = StartThread("packrec-fetch", [this] { Run(); });
    if (thread.ok()) thread_ = std::move(*thread);
  }
  ~FilePrefetcher() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }
  // The reading thread's place in the files, as bytes of them in order (RecordSource::bytes_read).
  void Reached(std::uint64_t bytes) { reached_.store(bytes, std::memory_order_relaxed); }

 private:
  static constexpr std::uint64_t kStep = 8ull << 20;
  static constexpr std::uint64_t kAhead = 128ull << 20;

  void Run() {
    std::uint64_t requested = 0;  // bytes of the files, in order, asked for so far
    for (const fs::path& path : files_) {
      Result<std::unique_ptr<RandomAccessFile>> file = RandomAccessFile::Open(path);
      if (!file.ok()) continue;  // the source reports it when it gets there
      Result<std::uint64_t> size = (*file)->RegularFileSize();
      if (!size.ok()) continue;
      for (std::uint64_t offset = 0; offset < *size; offset += kStep) {
        // Polled: a few wakeups a second while ahead cost less than a handshake per record.
        while (requested >= reached_.load(std::memory_order_relaxed) + kAhead) {
          if (stop_.load(std::memory_order_relaxed)) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (stop_.load(std::memory_order_relaxed)) return;
        const std::uint64_t length = std::min(kStep, *size - offset);
        (*file)->AdviseWillNeed(offset, length);
        requested += length;
      }
    }
  }

  const std::vector<fs::path>& files_;
  std::atomic<std::uint64_t> reached_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once everything above exists
};

// A record read from a container source and prepared: probed (and transcoded when asked), its
// checksum computed.
struct PumpedRecord {
  SourceRecord record;
  Prepared prepared;
  std::optional<PrecomputedChecksum> checksum;
};

// Feeds the writing thread a container source's records in source order, in bounded memory, with
// the work split three ways so no one thread caps the import:
// - one reading thread runs the source (the I/O and the format's own framing, which must go in
//   order; the checks too, unless the source can leave them to the workers: DeferChecks);
// - `workers` threads prepare the records it has read, each taking the oldest not yet taken: the
//   source's deferred checks, the probe (a pass over every JPEG's entropy-coded bytes), a
//   transcode when asked, and the record's checksum, while the bytes are in that thread's cache;
// - the writing thread (the caller of Take) lays the records out and hashes each output file,
//   which writes its buffers on a thread of its own (WritableFile::EnableWriteBehind).
// With one thread reading and preparing, the reader was the slower side and the writer waited on
// it (docs/benchmarks.md, import).
//
// A record's checksum is seeded with its number in the output, which is final only once every
// record before it has prepared (rejects are not written). A worker computes it for the number the
// record gets when nothing before it is rejected but the rejects already seen; the writer checks
// that number and computes it again when it differs (StoredChecksum), so a guess costs time, never
// correctness.
class SourcePump {
 public:
  SourcePump(RecordSource& source, const ConvertOptions& options, unsigned workers)
      : source_(source),
        options_(options),
        deferred_checks_(source.DeferChecks()),
        prefetcher_(source.files()) {
    started_ = StartThreads(workers_, workers, "packrec-prep", [this] { Prepare(); });
    if (!started_.ok()) return;
    Result<std::thread> reader = StartThread("packrec-read", [this] { Read(); });
    if (reader.ok()) {
      reader_ = std::move(*reader);
    } else {
      started_ = reader.status();
    }
  }
  // Whether every thread started; when not, the destructor stops those that did.
  const Status& started() const { return started_; }
  ~SourcePump() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    work_.notify_all();
    if (reader_.joinable()) reader_.join();
    for (std::thread& worker : workers_) worker.join();
  }

  // The next record; false at the end. The source's fatal error once everything before it.
  Result<bool> Take(PumpedRecord& pumped) {
    std::unique_lock lock(mutex_);
    if (!FrontReady() && !(read_done_ && slots_.empty())) {
      writer_waiting_ = true;
      ready_.wait(lock, [&] { return FrontReady() || (read_done_ && slots_.empty()); });
      writer_waiting_ = false;
    }
    if (slots_.empty()) {
      if (!final_.ok()) return final_;
      return false;
    }
    pumped = std::move(slots_.front().pumped);
    queued_bytes_ -= slots_.front().counted_bytes;
    slots_.pop_front();
    ++front_sequence_;
    --ready_count_;
    // A full queue is refilled from half: waking the reader for every record taken cost a context
    // switch per record (about a tenth of a warm import's time).
    const bool wake = reader_waiting_ && HalfEmpty();
    lock.unlock();
    if (wake) space_.notify_one();
    return true;
  }

 private:
  static constexpr std::size_t kMaxRecords = 256;
  static constexpr std::size_t kMaxBytes = 64u << 20;
  // Sleeping threads are woken for a batch, not for each record: when the other side is the
  // slower one, waking per record made the threads trade a context switch per record.
  static constexpr std::size_t kWakeRecords = 16;

  struct Slot {
    PumpedRecord pumped;            // moved out while a worker prepares it
    std::size_t counted_bytes = 0;  // what it added to queued_bytes_ (its size as read)
    bool ready = false;
  };

  bool Full() const { return slots_.size() >= kMaxRecords || queued_bytes_ >= kMaxBytes; }
  bool HalfEmpty() const {
    return slots_.size() <= kMaxRecords / 2 && queued_bytes_ <= kMaxBytes / 2;
  }
  bool FrontReady() const { return !slots_.empty() && slots_.front().ready; }
  std::size_t Unclaimed() const { return front_sequence_ + slots_.size() - claim_sequence_; }
  // Worth waking the writer for: its next record is ready, and a batch with it, or the queue is
  // full (the reader waits for space), or the source is done and everything prepared.
  bool WriterBatchReady() const {
    return FrontReady() && (ready_count_ >= kWakeRecords || Full() ||
                            (read_done_ && ready_count_ == slots_.size()));
  }
  // Worth waking a worker for: a batch to take, or the last records (the reader is waiting for
  // space or done).
  bool WorkerBatchReady() const {
    return Unclaimed() >= kWakeRecords || (Unclaimed() > 0 && (Full() || read_done_));
  }

  void Read() {
    for (;;) {
      PumpedRecord pumped;
      Result<bool> more = source_.Next(pumped.record);
      // Sources that cannot say where they are: about there, counting the records' bytes.
      records_bytes_ += pumped.record.bytes.size();
      const std::uint64_t reached = source_.bytes_read();
      prefetcher_.Reached(reached > 0 ? reached : records_bytes_);
      std::unique_lock lock(mutex_);
      if (!more.ok() || !*more) {
        if (!more.ok()) final_ = more.status();
        read_done_ = true;
        lock.unlock();
        ready_.notify_all();
        work_.notify_all();
        return;
      }
      if (Full()) {
        reader_waiting_ = true;
        space_.wait(lock, [&] { return stop_ || HalfEmpty(); });
        reader_waiting_ = false;
      }
      if (stop_) return;
      const std::size_t size = pumped.record.bytes.size();
      queued_bytes_ += size;
      slots_.push_back(Slot{std::move(pumped), size, false});
      const bool wake = idle_workers_ > 0 && WorkerBatchReady();
      lock.unlock();
      if (wake) work_.notify_one();
    }
  }

  void Prepare() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!stop_ && Unclaimed() == 0 && !read_done_) {
        ++idle_workers_;
        work_.wait(lock, [&] { return stop_ || WorkerBatchReady() || read_done_; });
        --idle_workers_;
      }
      // Nothing left to take now means the source is done (or the pump stops): the wait above
      // returns only with a record to take, at the end, or at stop.
      if (stop_ || Unclaimed() == 0) return;
      const std::uint64_t sequence = claim_sequence_++;
      PumpedRecord pumped = std::move(slots_[sequence - front_sequence_].pumped);
      const std::uint64_t index_if_no_more_rejects = sequence - rejects_;
      lock.unlock();

      if (deferred_checks_) source_.FinishRecord(pumped.record);
      pumped.prepared = pumped.record.status.ok() ? PrepareSourceRecord(pumped.record, options_)
                                                  : Prepared{{}, {}, pumped.record.status, 0};
      const Prepared& prepared = pumped.prepared;
      // A checksum of bytes the writer will compress would go unused.
      if (prepared.status.ok() &&
          !MayCompress(RecordInput{{}, 0, prepared.bytes, prepared.image}, options_.writer)) {
        pumped.checksum = PrecomputedChecksum{index_if_no_more_rejects,
                                              Xxh64(prepared.bytes, index_if_no_more_rejects)};
      }

      lock.lock();
      if (!prepared.status.ok()) ++rejects_;
      Slot& slot = slots_[sequence - front_sequence_];
      slot.pumped = std::move(pumped);
      slot.ready = true;
      ++ready_count_;
      if (writer_waiting_ && WriterBatchReady()) {
        lock.unlock();
        ready_.notify_one();
        lock.lock();
      }
    }
  }

  RecordSource& source_;
  const ConvertOptions& options_;
  const bool deferred_checks_;  // the workers finish each record (RecordSource::DeferChecks)
  FilePrefetcher prefetcher_;
  std::uint64_t records_bytes_ = 0;  // read so far; the reading thread's alone
  std::mutex mutex_;
  std::condition_variable ready_;  // the writer waits here for its next record
  std::condition_variable space_;  // the reader waits here for room
  std::condition_variable work_;   // workers wait here for records to prepare
  // Records read and not yet taken, in source order; slots_[i] is number front_sequence_ + i.
  std::deque<Slot> slots_;
  std::uint64_t front_sequence_ = 0;
  std::uint64_t claim_sequence_ = 0;  // the next record a worker takes
  std::size_t queued_bytes_ = 0;
  std::size_t ready_count_ = 0;  // slots prepared
  std::uint64_t rejects_ = 0;    // records seen to fail preparing so far
  unsigned idle_workers_ = 0;
  bool read_done_ = false;
  bool stop_ = false;
  bool reader_waiting_ = false;
  bool writer_waiting_ = false;
  Status final_;
  std::vector<std::thread> workers_;
  std::thread reader_;  // started last, once everything above exists
  Status started_;
};

Result<ConvertStats> ConvertStream(const ConvertOptions& options, SourceFormat format,
                                   const ProgressCallback& progress, Clock::time_point start) {
  const std::string name(SourceFormatName(format));
  if (options.shuffle_seed) {
    return Status::InvalidArgument("--shuffle needs the whole listing up front; a " + name +
                                   " source streams in its own order (shuffle at load time: "
                                   "the loader's shuffle is global)");
  }
  if (options.resume) {
    return Status::InvalidArgument("--resume applies to image folders and list files; a " + name +
                                   " import is converted again from the start (pass --overwrite)");
  }
  if (options.part_count > 0) {
    return Status::InvalidArgument("--part needs the whole listing up front; a " + name +
                                   " source streams (split its files between tasks instead)");
  }
  SourceOptions source_options = options.source_options;
  source_options.read_ahead = false;  // the pump's FilePrefetcher reads further ahead
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> source,
                           OpenRecordSource(options.source.string(), format, source_options));
  WriterOptions writer_options = options.writer;
  writer_options.classes = source->classes();
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<DatasetWriter> writer,
                           CreateDatasetWriter(options.output, writer_options));
  ConvertStats stats;
  ConvertProgress report;
  report.records_total = source->size_hint();
  Clock::time_point last_report = start;
  Xxh64Stream items_hash;
  Status failure;
  bool writer_failed = false;
  std::uint64_t done = 0;
  {
    // Workers beside the reading and writing threads: on two cores the three kinds of work share
    // them; on more, preparing scales until reading or writing is the limit.
    SourcePump pump(*source, options, std::min(ThreadCount(options), 16u));
    if (!pump.started().ok()) {
      writer->Abort();
      return pump.started();
    }
    for (;;) {
      PumpedRecord pumped;
      Result<bool> more = pump.Take(pumped);
      if (!more.ok()) {
        failure = more.status();
        break;
      }
      if (!*more) break;
      const SourceRecord& record = pumped.record;
      const Prepared& prepared = pumped.prepared;
      stats.input_bytes += prepared.input_bytes;
      if (prepared.status.ok()) {
        RecordInput input{record.key, record.label, prepared.bytes, prepared.image,
                          pumped.checksum};
        failure = writer->Add(input);
        if (!failure.ok()) {
          writer_failed = true;
          break;
        }
        HashListingItem(items_hash, record.key, record.label);
      } else if (options.on_error == OnError::kSkip) {
        stats.rejects.push_back({record.origin, prepared.status.message()});
      } else {
        failure = Status::InvalidInput(record.origin + ": " + prepared.status.message() +
                                       " (pass --on-error skip to leave it out)");
        break;
      }
      report.records_done = ++done;
      report.records_total = std::max(report.records_total, done);
      report.input_bytes = stats.input_bytes;
      const Clock::time_point now = Clock::now();
      if (progress && (done == 1 || now - last_report > std::chrono::milliseconds(200))) {
        report.elapsed_seconds = std::chrono::duration<double>(now - start).count();
        failure = progress(report);
        last_report = now;
        if (!failure.ok()) break;
      }
    }
  }
  if (failure.ok() && progress && done > 0) {
    report.records_total = done;
    report.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    failure = progress(report);
  }
  if (failure.ok() && writer->records_written() == 0) {
    failure =
        stats.rejects.empty()
            ? Status::NotFound("no records in " + options.source.string())
            : Status::InvalidInput("all " + std::to_string(stats.rejects.size()) + " records of " +
                                   options.source.string() +
                                   " were rejected; the first: " + stats.rejects.front().path +
                                   ": " + stats.rejects.front().reason);
  }
  DatasetMetadata metadata;
  metadata.classes = source->classes();
  // The listing's identity: the class names, then the digest of the (key, label) pairs in order.
  Xxh64Stream listing;
  HashListingClasses(listing, metadata.classes);
  std::array<std::byte, 8> digest{};
  StoreLE<std::uint64_t>(digest.data(), items_hash.Digest());
  listing.Update(digest);
  metadata.listing_hash = Hex64(listing.Digest());
  metadata.source_kind = name;
  nlohmann::json options_json = nlohmann::json::parse(OptionsJson(options));
  options_json["from"] = name;
  for (const auto& [field, value] : {std::pair{"image_field", &options.source_options.image_field},
                                     std::pair{"label_field", &options.source_options.label_field},
                                     std::pair{"key_field", &options.source_options.key_field}}) {
    if (!value->empty()) options_json[field] = *value;
  }
  if (format == SourceFormat::kCaffeLmdb) {
    options_json["caffe_raw"] =
        options.source_options.raw_pixels == RawPixels::kRaw ? "raw" : "png";
  }
  metadata.options_json = options_json.dump();
  return FinishConversion(*writer, metadata, failure, writer_failed, std::move(stats), start);
}

}  // namespace

std::string PartName(std::uint32_t index, std::uint32_t count, const std::string& format) {
  char name[48];
  std::snprintf(name, sizeof name, "part-%05u-of-%05u", index, count);
  return name + std::string(format == "hdf5" ? ".h5" : format == "lmdb" ? ".lmdb" : ".pkr");
}

Result<ConvertStats> Convert(const ConvertOptions& options, const ProgressCallback& progress) {
  const Clock::time_point start = Clock::now();
  PACKREC_RETURN_IF_ERROR(ValidateOptions(options));
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
  if (format == SourceFormat::kImageFolder || format == SourceFormat::kListFile) {
    return ConvertListing(options, progress, start);
  }
  return ConvertStream(options, format, progress, start);
}

}  // namespace packrec
