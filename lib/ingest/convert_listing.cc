// The listing engine: an image folder or a list file, listed up front (so it can be hashed,
// shuffled, split into parts and resumed), its files read and prepared on N threads and handed to
// the one writer in listing order. A bounded window between them keeps memory flat on huge inputs.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <system_error>

#include "core/ordered_pipeline.h"
#include "ingest/coco.h"
#include "ingest/convert_internal.h"
#include "ingest/field_routing.h"
#include "ingest/image_folder.h"
#include "ingest/listing_hash.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;

// A list whose first paths are all missing names the wrong root, not bad inputs: skipping them
// (what an error per input would suggest) would reject every one.
Status CheckListRoot(const ConvertOptions& options, const fs::path& root,
                     const SourceListing& listing) {
  const std::size_t checked = std::min<std::size_t>(listing.items.size(), 16);
  for (std::size_t i = 0; i < checked; ++i) {
    std::error_code error;
    if (fs::exists(listing.items[i].path, error) || error) return Status::OK();
  }
  if (checked == 0) return Status::OK();
  const std::string first = listing.items.front().key;
  const std::string where = options.list_root.empty()
                                ? root.string() + " (the list file's folder: --root's default)"
                                : "--root " + root.string();
  return Status::InvalidArgument(options.source.string() + ": none of its first " +
                                 std::to_string(checked) + " paths exists under " + where +
                                 "; the first is " + first +
                                 ". Pass --root with the folder the list's paths start from");
}

// Why a listing holds nothing to convert, in words that point at the fix.
Status NothingToConvert(const ConvertOptions& options, const SourceListing& listing) {
  const std::string source = options.source.string();
  if (!listing.rejects.empty()) {
    return Status::InvalidInput("no image of " + source + " can be converted: all " +
                                std::to_string(listing.rejects.size()) +
                                " were refused; the first, " + listing.rejects.front().path + ": " +
                                listing.rejects.front().reason);
  }
  if (listing.kind != "image-folder") return Status::NotFound("no images found in " + source);
  if (listing.classes.empty()) {
    const std::size_t loose = CountLooseImages(options.source);
    if (loose == 0) {
      return Status::NotFound("no images found in " + source +
                              ": it has no class folders (an image folder is " + source +
                              "/<class>/<image>, as torchvision's ImageFolder reads)");
    }
    return Status::NotFound(
        "no images found in class folders of " + source + ": it holds " + std::to_string(loose) +
        " images directly and no sub-folders. An image folder is " + source +
        "/<class>/<image> (torchvision's ImageFolder): move them into one folder per class (one "
        "folder, e.g. " +
        source + "/all/, for unlabelled images), or name them in a list file with --root");
  }
  return Status::NotFound(
      "no images found in " + source + ": its " + std::to_string(listing.classes.size()) +
      " class folders hold no file named as an image (" + ImageExtensionList() + ")");
}

Result<SourceListing> ListSource(const ConvertOptions& options) {
  std::error_code error;
  const fs::file_status status = fs::status(options.source, error);
  if (!fs::exists(status)) {
    return Status::NotFound("input " + options.source.string() + " does not exist");
  }
  if (!options.annotations.empty() && !fs::is_directory(status)) {
    return Status::InvalidArgument("--annotations annotates a folder of images; " +
                                   options.source.string() + " is not a directory");
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
    if (!options.annotations.empty()) return ListCocoImages(options.source, options.annotations);
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
  fs::path root = options.list_root.empty() ? options.source.parent_path() : options.list_root;
  if (root.empty()) root = ".";
  PACKREC_ASSIGN_OR_RETURN(SourceListing listing,
                           ReadListFile(options.source, root, options.list_kind));
  PACKREC_RETURN_IF_ERROR(CheckListRoot(options, root, listing));
  return listing;
}

// Listing items read and prepared on `threads` workers (core/ordered_pipeline.h), taken by the
// writer in listing order from `first` on. The window of prepared items bounds memory.
class OrderedPrefetch {
 public:
  OrderedPrefetch(const SourceListing& listing, const ConvertOptions& options, unsigned threads,
                  std::size_t first)
      : listing_(listing),
        options_(options),
        next_(first),
        pipeline_([this](Item& item, std::size_t&) { return Claim(item); },
                  [this](Item& item, std::uint64_t, std::uint64_t) {
                    item.prepared =
                        PrepareItem(listing_.items[item.index], options_, listing_.fields);
                    return false;
                  },
                  threads,
                  {std::max<std::size_t>(64, std::size_t{threads} * 8),
                   std::numeric_limits<std::size_t>::max()},
                  "packrec-list", "packrec-order") {}
  // Whether every thread started; when not, the destructor stops those that did.
  const Status& started() const { return pipeline_.started(); }

  // Listing item `index`, prepared. Called for first, first + 1, ... in order, below the
  // listing's size; anything else is a bug, reported as one rather than a record made up.
  Result<Prepared> Take(std::size_t index) {
    Item item;
    PACKREC_ASSIGN_OR_RETURN(const bool more, pipeline_.Take(item));
    if (!more || item.index != index) {
      return Status::Internal("the listing pipeline handed out item " +
                              (more ? std::to_string(item.index) : std::string("none")) +
                              " where item " + std::to_string(index) + " was due");
    }
    return std::move(item.prepared);
  }

 private:
  struct Item {
    std::size_t index = 0;
    Prepared prepared;
  };

  // On the pipeline's maker thread: the next listing index, until the end.
  Result<bool> Claim(Item& item) {
    if (next_ >= listing_.items.size()) return false;
    item.index = next_++;
    return true;
  }

  const SourceListing& listing_;
  const ConvertOptions& options_;
  std::size_t next_;                // the maker thread's alone
  OrderedPipeline<Item> pipeline_;  // last: its threads start once the above exist
};

// Adds listing item `i`, prepared, or rejects it; asks the writer for a resume point whenever one
// is due.
Status AddItem(std::size_t i, const SourceItem& item, std::vector<std::uint64_t>& field_records,
               Prepared& prepared, std::uint64_t listing_offset, DatasetWriter& writer,
               ResumePoints& points, RecordLoop& loop, ConvertStats& stats) {
  const std::uint64_t input_bytes_before = stats.input_bytes;
  stats.input_bytes += prepared.input_bytes;
  if (!prepared.status.ok()) {
    PACKREC_RETURN_IF_ERROR(loop.Reject(
        item.path.string(),
        item.path.string() + " (input " + std::to_string(listing_offset + i) + " of the listing)",
        prepared.status));
    points.Rejected(i);
    return Status::OK();
  }
  points.Adding(i, input_bytes_before, prepared.input_stamp);
  const std::vector<FieldView> fields = prepared.FieldViews(field_records.size());
  const std::string key = prepared.StoredKey(item.key);
  RecordInput record{key, item.label, prepared.bytes, prepared.image};
  record.fields = fields;
  PACKREC_RETURN_IF_ERROR(loop.Add(writer, record));
  for (std::size_t field = 0; field < fields.size(); ++field) {
    field_records[field] += fields[field].present ? 1 : 0;
  }
  points.Added();
  if (!writer.CheckpointDue()) return Status::OK();
  const Status checkpoint = writer.Checkpoint(
      [&](std::uint64_t records) { return points.StateAfter(records, i, stats); });
  if (!checkpoint.ok()) loop.SetWriterFailed();
  return checkpoint;
}

}  // namespace

Result<ConvertStats> ConvertItems(const ConvertOptions& options, const SourceListing& listing,
                                  DatasetMetadata& metadata, const ProgressCallback& progress,
                                  Clock::time_point start, std::uint64_t listing_offset) {
  if (!listing.rejects.empty() && options.on_error == OnBadRecord::kFail) {
    return Status::InvalidInput(listing.rejects.front().path + ": " +
                                listing.rejects.front().reason)
        .WithRemedy(Remedy::kSkipBadInput);
  }
  WriterOptions writer_options = options.writer;
  writer_options.expected_payload_bytes = ExpectedPayloadBytes(listing, options);
  writer_options.classes = listing.classes;
  writer_options.fields = listing.fields;
  writer_options.resumable = true;
  PACKREC_ASSIGN_OR_RETURN(ConvertStart begin,
                           StartConversion(options, writer_options, metadata, listing));
  DatasetWriter& writer = *begin.writer;
  ConvertStats stats;
  stats.empty_classes = listing.empty_classes;
  stats.resumed_records = begin.resumed_records;
  stats.input_bytes = begin.input_bytes;
  stats.rejects = std::move(begin.rejects);
  ResumePoints points(metadata, begin);
  RecordLoop loop(options, progress, start, stats);
  const std::size_t items = listing.items.size();
  std::vector<std::uint64_t> field_records(listing.fields.size(), 0);
  Status failure;
  {
    OrderedPrefetch prefetch(listing, options, ThreadCount(options), begin.next_item);
    // A resumed conversion keeps its resume point (FinishConversion) when no thread can start.
    failure = prefetch.started();
    if (!failure.ok()) loop.SetWriterFailed();
    for (std::size_t i = begin.next_item; failure.ok() && i < items; ++i) {
      Result<Prepared> prepared = prefetch.Take(i);
      failure = prepared.ok() ? AddItem(i, listing.items[i], field_records, *prepared,
                                        listing_offset, writer, points, loop, stats)
                              : prepared.status();
      if (failure.ok())
        failure = loop.Progress(i + 1, items, i == begin.next_item || i + 1 == items);
    }
  }
  if (failure.ok()) failure = loop.CheckSomethingWritten(writer);
  // What listing left out comes first (it is not part of any resume point: every run lists).
  stats.rejects.insert(stats.rejects.begin(), listing.rejects.begin(), listing.rejects.end());
  // A resumed run saw only the records after its resume point.
  if (begin.resumed_records == 0) metadata.field_records = std::move(field_records);
  return FinishConversion(writer, metadata, failure, loop.writer_failed(), std::move(stats), start);
}

Result<ConvertStats> ConvertListing(const ConvertOptions& options, const ProgressCallback& progress,
                                    Clock::time_point start) {
  PACKREC_ASSIGN_OR_RETURN(SourceListing listing, ListSource(options));
  PACKREC_RETURN_IF_ERROR(SelectListingFields(listing, options.source_options));
  if (listing.items.empty()) return NothingToConvert(options, listing);
  DatasetMetadata metadata;
  metadata.listing_hash = ListingHash(listing);
  metadata.classes = listing.classes;
  metadata.source_kind = listing.kind;
  if (options.shuffle_seed) ShuffleListing(listing, *options.shuffle_seed);
  if (options.part_count > 0) return ConvertPart(options, listing, metadata, progress, start);
  metadata.options_json = OptionsJson(options);
  if (!listing.categories_json.empty()) {
    nlohmann::json recorded = nlohmann::json::parse(metadata.options_json);
    recorded["categories"] = nlohmann::json::parse(listing.categories_json);
    metadata.options_json = recorded.dump();
  }
  if (options.resume) {
    // With a journal left, the conversion is not finished, even where its dataset already opens
    // (LMDB's manifest key is committed before its rejects file is written).
    PACKREC_ASSIGN_OR_RETURN(const std::optional<std::string> interrupted,
                             ReadResumeState(options.output, options.writer.format));
    if (!interrupted) {
      const std::optional<FinishedDataset> done = FindFinishedDataset(options.output, metadata);
      if (done && done->same_conversion) {
        ConvertStats stats;
        stats.already_complete = true;
        stats.records_written = done->records;
        return stats;
      }
    }
  }
  return ConvertItems(options, listing, metadata, progress, start);
}

}  // namespace packrec::conversion
