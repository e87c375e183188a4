// What the pieces of Convert share. Convert is split along its seams:
//   convert.cc          the entry point, option checks and identity, the shared record loop
//   record_prep.cc      one input made ready for the writer: key rule, probe, transcode, decode
//   convert_listing.cc  image folders and list files: files read on N threads, in listing order
//   convert_stream.cc   other tools' containers: one reading thread, N preparing, in source order
//   convert_resume.cc   resume points: what a journal records and how a run continues from it
//   convert_parts.cc    --part I/N: one slice of the listing into its own part dataset
//   convert_remote.cc   an s3:// output: converted into the URL's staging folder, then published
//                       (url_output.h)
//   field_routing.cc    which of a record's values go to which field (--fields, --drop-fields)
//   image_folder.cc, list_file.cc, listing.cc, metadata_table.cc, coco.cc: the listings and the
//                       metadata the listing engine reads
// Both engines run their threads through core/ordered_pipeline.h and their records through one
// RecordLoop (below), so they add, reject, fail and report progress alike.
#ifndef PACKREC_LIB_INGEST_CONVERT_INTERNAL_H_
#define PACKREC_LIB_INGEST_CONVERT_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_io.h"
#include "packrec/convert.h"
#include "packrec/ingest.h"
#include "packrec/source.h"
#include "packrec/writer.h"

namespace packrec::conversion {

using Clock = std::chrono::steady_clock;

// One input, read and made ready for the writer (record_prep.cc).
struct Prepared {
  std::vector<std::byte> bytes;
  ImageInfo image;
  Status status;  // not OK: the input is rejected for this reason
  std::uint64_t input_bytes = 0;
  std::uint64_t input_stamp = 0;  // listing inputs: InputStamp of the file as it was read
  // (field index, value) of each field value the input carries: its side files, its metadata
  // row, a container record's fields.
  std::vector<std::pair<std::size_t, std::vector<std::byte>>> field_values = {};
  // A BMP, GIF, TIFF or PPM/PGM stored transcoded: the extension its key takes (".png", ".jpg");
  // empty: the key stays the input's.
  std::string stored_extension = {};

  // The key the record is stored under: `key`, its extension replaced by stored_extension.
  std::string StoredKey(std::string_view key) const;

  // One view per field of a schema of `field_count` fields, for RecordInput::fields: the values
  // above, absent where the input has none. Valid while this Prepared is.
  std::vector<FieldView> FieldViews(std::size_t field_count) const {
    std::vector<FieldView> views(field_count);
    for (const auto& [field, value] : field_values) {
      if (field < field_count) views[field] = {true, value};
    }
    return views;
  }
};

// One listing input's key, size and modification time as one number; a resume point keeps the
// sum over the records before it (the order does not matter), so that --resume notices an input
// changed since the interrupted run.
std::uint64_t InputStamp(std::string_view key, const FileStamp& stamp);
// Reads a listing input and prepares it (probe; re-encode or decode when asked), with its side
// files, each checked against its field of `fields` (the listing's schema).
Prepared PrepareItem(const SourceItem& item, const ConvertOptions& options,
                     const std::vector<FieldSpec>& fields);
// Prepares a record a container source read (its bytes are moved out).
Prepared PrepareSourceRecord(SourceRecord& record, const ConvertOptions& options);

// --threads, 0 meaning one per core.
unsigned ThreadCount(const ConvertOptions& options);
// The options a dataset records (its identity for --resume and merge): the format's own through
// its descriptor, and for a part, its place in the whole conversion.
std::string OptionsJson(const ConvertOptions& options, std::uint64_t part_begin = 0,
                        std::uint64_t part_end = 0, std::uint64_t items_total = 0);
// The stored payload total when every input is stored as it is (0: not known, or not used).
std::uint64_t ExpectedPayloadBytes(const SourceListing& listing, const ConvertOptions& options);
// Seals the dataset when everything went well (else removes what was written, or keeps the last
// resume point after a failure of the writer itself) and completes the stats.
Result<ConvertStats> FinishConversion(DatasetWriter& writer, DatasetMetadata& metadata,
                                      Status failure, bool writer_failed, ConvertStats stats,
                                      Clock::time_point start);

// What both engines do with each input once it is prepared, so that they add, reject, fail and
// report progress alike: the record loop. Not thread-safe: the writing thread's.
class RecordLoop {
 public:
  RecordLoop(const ConvertOptions& options, const ProgressCallback& progress,
             Clock::time_point start, ConvertStats& stats)
      : options_(options), progress_(progress), start_(start), last_report_(start), stats_(stats) {}

  // Adds a prepared record. A writer error is the conversion's failure, and the writer's own
  // (FinishConversion keeps its last resume point).
  Status Add(DatasetWriter& writer, const RecordInput& record);
  // Input `where` could not be made a record for `problem`: under --on-error skip, listed as a
  // reject (`path`, the reason) and OK; else the failure, naming it.
  Status Reject(const std::string& path, const std::string& where, const Status& problem);
  // Reports `done` of `total` inputs to the progress callback: now when `now`, else at most
  // every 200 ms. The callback's error (a cancel) stops the conversion.
  Status Progress(std::uint64_t done, std::uint64_t total, bool now);
  // Once every input went through: NotFound when there were none, InvalidInput when every one
  // was rejected (naming the first), else OK.
  Status CheckSomethingWritten(const DatasetWriter& writer) const;

  // Marks the failure as the writer's (a conversion that could not start its threads keeps its
  // resume point).
  void SetWriterFailed() { writer_failed_ = true; }
  bool writer_failed() const { return writer_failed_; }

 private:
  const ConvertOptions& options_;
  const ProgressCallback& progress_;
  const Clock::time_point start_;
  Clock::time_point last_report_;
  ConvertStats& stats_;
  bool writer_failed_ = false;
};

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

Result<ConvertStart> StartConversion(const ConvertOptions& options,
                                     const WriterOptions& writer_options,
                                     const DatasetMetadata& metadata, const SourceListing& listing);

// The listing conversion's records since its last resume point, so that a resume point covering
// some of them knows how far into the listing it reaches (convert_resume.cc).
class ResumePoints {
 public:
  ResumePoints(const DatasetMetadata& metadata, ConvertStart& start)
      : metadata_(metadata),
        added_(start.resumed_records),
        input_stamps_(start.input_stamps),
        reject_items_(std::move(start.reject_items)) {}

  // Listing item `item` is about to become record added(); `input_bytes_before`: the input bytes
  // read before it.
  void Adding(std::uint64_t item, std::uint64_t input_bytes_before, std::uint64_t input_stamp);
  void Added() { ++added_; }
  void Rejected(std::uint64_t item) { reject_items_.push_back(item); }
  std::uint64_t added() const { return added_; }
  // What the resume point after `records` records keeps (DatasetWriter::Checkpoint's caller
  // state), with the conversion now at listing item `current_item` and `stats` so far.
  std::string StateAfter(std::uint64_t records, std::uint64_t current_item,
                         const ConvertStats& stats);

 private:
  struct Entry {
    std::uint64_t record;
    std::uint64_t item;
    std::uint64_t input_bytes_before;
    std::uint64_t input_stamps_before;
  };
  const DatasetMetadata& metadata_;
  std::deque<Entry> since_checkpoint_;
  std::uint64_t added_;
  std::uint64_t input_stamps_;  // of the records added so far
  std::vector<std::uint64_t> reject_items_;
};

// A dataset that opens at an output: a conversion run again after it finished (--resume with no
// journal left, a --part already done), or another conversion's.
struct FinishedDataset {
  std::uint64_t records = 0;
  bool same_conversion = false;  // the same listing and the same options (metadata's)
};
// The finished dataset at `path`; nullopt when none opens there.
std::optional<FinishedDataset> FindFinishedDataset(const std::filesystem::path& path,
                                                   const DatasetMetadata& metadata);

// The listing engine: converts `listing` (of which item 0 is input `listing_offset` of the
// whole listing) into options.output.
Result<ConvertStats> ConvertItems(const ConvertOptions& options, const SourceListing& listing,
                                  DatasetMetadata& metadata, const ProgressCallback& progress,
                                  Clock::time_point start, std::uint64_t listing_offset = 0);
// An image folder or list file: lists it, then converts it whole or, with --part, one part.
Result<ConvertStats> ConvertListing(const ConvertOptions& options, const ProgressCallback& progress,
                                    Clock::time_point start);
// --part I/N of a listing (already listed, hashed and shuffled) into its part dataset.
Result<ConvertStats> ConvertPart(const ConvertOptions& options, SourceListing& listing,
                                 DatasetMetadata& metadata, const ProgressCallback& progress,
                                 Clock::time_point start);
// The stream engine: a container source of `format`.
// Convert with an s3:// URL as the output (convert_remote.cc).
Result<ConvertStats> ConvertToUrl(const ConvertOptions& options, const ProgressCallback& progress);

Result<ConvertStats> ConvertStream(const ConvertOptions& options, SourceFormat format,
                                   const ProgressCallback& progress, Clock::time_point start);

}  // namespace packrec::conversion

#endif  // PACKREC_LIB_INGEST_CONVERT_INTERNAL_H_
