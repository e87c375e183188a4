// The stream engine: other tools' containers (WebDataset, TFRecord, RecordIO, MDS, Caffe LMDB,
// a packrec dataset), read in their own order by one thread, prepared on N, written by one.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <thread>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/ordered_pipeline.h"
#include "core/threads.h"
#include "ingest/convert_internal.h"
#include "ingest/field_routing.h"
#include "ingest/listing_hash.h"
#include "storage/payload.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;

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
// the work split three ways so no one thread caps the import (core/ordered_pipeline.h):
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
        prefetcher_(source.files()),
        pipeline_([this](PumpedRecord& pumped, std::size_t& bytes) { return Read(pumped, bytes); },
                  [this](PumpedRecord& pumped, std::uint64_t sequence, std::uint64_t rejects) {
                    return Prepare(pumped, sequence, rejects);
                  },
                  workers, {kMaxRecords, kMaxBytes}, "packrec-prep", "packrec-read") {}
  // Whether every thread started; when not, the destructor stops those that did.
  const Status& started() const { return pipeline_.started(); }
  // The next record; false at the end. The source's fatal error once everything before it.
  Result<bool> Take(PumpedRecord& pumped) { return pipeline_.Take(pumped); }

 private:
  static constexpr std::size_t kMaxRecords = 256;
  static constexpr std::size_t kMaxBytes = 64u << 20;

  // On the reading thread: the source's next record, its size as read for the byte limit.
  Result<bool> Read(PumpedRecord& pumped, std::size_t& bytes) {
    Result<bool> more = source_.Next(pumped.record);
    // Sources that cannot say where they are: about there, counting the records' bytes.
    records_bytes_ += pumped.record.bytes.size();
    const std::uint64_t reached = source_.bytes_read();
    prefetcher_.Reached(reached > 0 ? reached : records_bytes_);
    bytes = pumped.record.bytes.size();
    for (const auto& value : pumped.record.fields) bytes += value ? value->size() : 0;
    return more;
  }

  // On a worker: record number `sequence` prepared, with `rejects_before` rejects seen before it.
  // Returns whether it is rejected.
  bool Prepare(PumpedRecord& pumped, std::uint64_t sequence, std::uint64_t rejects_before) {
    if (deferred_checks_) source_.FinishRecord(pumped.record);
    pumped.prepared = pumped.record.status.ok() ? PrepareSourceRecord(pumped.record, options_)
                                                : Prepared{{}, {}, pumped.record.status, 0};
    const Prepared& prepared = pumped.prepared;
    const std::uint64_t index_if_no_more_rejects = sequence - rejects_before;
    // A checksum of bytes the writer will compress would go unused.
    if (prepared.status.ok() &&
        !MayCompress(RecordInput{{}, 0, prepared.bytes, prepared.image}, options_.writer)) {
      pumped.checksum = PrecomputedChecksum{index_if_no_more_rejects,
                                            Xxh64(prepared.bytes, index_if_no_more_rejects)};
    }
    return !prepared.status.ok();
  }

  RecordSource& source_;
  const ConvertOptions& options_;
  const bool deferred_checks_;  // the workers finish each record (RecordSource::DeferChecks)
  FilePrefetcher prefetcher_;
  std::uint64_t records_bytes_ = 0;         // read so far; the reading thread's alone
  OrderedPipeline<PumpedRecord> pipeline_;  // last: its threads start once the above exist
};

// What a streamed source cannot do: everything that needs the whole listing up front.
Status CheckStreamOptions(const ConvertOptions& options, const std::string& name) {
  if (options.shuffle_seed) {
    return Status::InvalidArgument("--shuffle needs the whole listing up front; a " + name +
                                   " source streams in its own order (shuffle at load time: "
                                   "the loader's shuffle is global)");
  }
  if (options.resume) {
    return Status::InvalidArgument("--resume applies to image folders and list files; a " + name +
                                   " import is converted again from the start")
        .WithRemedy(Remedy::kOverwriteToRestart);
  }
  if (options.part_count > 0) {
    return Status::InvalidArgument("--part needs the whole listing up front; a " + name +
                                   " source streams (split its files between tasks instead)");
  }
  return Status::OK();
}

// The dataset-level facts of an import: its classes, the listing's identity (the class names,
// then the digest of the (key, label) pairs in order) and the options, with the source's own.
DatasetMetadata StreamMetadata(const ConvertOptions& options, SourceFormat format,
                               const RecordSource& source, std::uint64_t items_digest) {
  const std::string name(SourceFormatName(format));
  DatasetMetadata metadata;
  metadata.classes = source.classes();
  Xxh64Stream listing;
  HashListingClasses(listing, metadata.classes);
  std::array<std::byte, 8> digest{};
  StoreLE<std::uint64_t>(digest.data(), items_digest);
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
  return metadata;
}

// Takes every record the pump prepared, in source order, through the record loop; hashes the
// (key, label) pairs written into `items_hash`.
Status PumpRecords(SourcePump& pump, DatasetWriter& writer, RecordLoop& loop, ConvertStats& stats,
                   const RecordSource& source, FieldRouter& router, Xxh64Stream& items_hash) {
  const std::uint64_t size_hint = source.size_hint();
  std::uint64_t done = 0;
  std::vector<FieldView> fields;
  for (;;) {
    PumpedRecord pumped;
    PACKREC_ASSIGN_OR_RETURN(const bool more, pump.Take(pumped));
    if (!more) break;
    SourceRecord& record = pumped.record;
    Prepared& prepared = pumped.prepared;
    stats.input_bytes += prepared.input_bytes;
    router.Extend(record.added_fields);
    if (prepared.status.ok() && !record.typed_fields.empty()) {
      prepared.status = router.PlaceTyped(record.typed_fields, prepared.field_values);
    }
    if (prepared.status.ok()) {
      const Status routed = router.Route(prepared.field_values, writer, fields);
      if (!routed.ok()) return routed.WithContext(record.origin);
      const std::string key = prepared.StoredKey(record.key);
      RecordInput input{key, record.label, prepared.bytes, prepared.image, pumped.checksum};
      input.fields = fields;
      // Every source checks its values as it reads them (RecordSource), or reads them from a
      // packrec dataset, which did.
      input.fields_checked = true;
      PACKREC_RETURN_IF_ERROR(loop.Add(writer, input));
      HashListingItem(items_hash, record.key, record.label);
    } else {
      PACKREC_RETURN_IF_ERROR(loop.Reject(record.origin, record.origin, prepared.status));
    }
    ++done;
    PACKREC_RETURN_IF_ERROR(loop.Progress(done, std::max(size_hint, done), done == 1));
  }
  return done > 0 ? loop.Progress(done, done, true) : Status::OK();
}

}  // namespace

Result<ConvertStats> ConvertStream(const ConvertOptions& options, SourceFormat format,
                                   const ProgressCallback& progress, Clock::time_point start) {
  PACKREC_RETURN_IF_ERROR(CheckStreamOptions(options, std::string(SourceFormatName(format))));
  SourceOptions source_options = options.source_options;
  source_options.read_ahead = false;  // the pump's FilePrefetcher reads further ahead
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> source,
                           OpenRecordSource(options.source.string(), format, source_options));
  WriterOptions writer_options = options.writer;
  writer_options.classes = source->classes();
  FieldRouter router(options.source_options);
  writer_options.fields = router.Start(source->fields());
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<DatasetWriter> writer,
                           CreateDatasetWriter(options.output, writer_options));
  ConvertStats stats;
  RecordLoop loop(options, progress, start, stats);
  Xxh64Stream items_hash;
  Status failure;
  {
    // Workers beside the reading and writing threads: on two cores the three kinds of work share
    // them; on more, preparing scales until reading or writing is the limit.
    SourcePump pump(*source, options, std::min(ThreadCount(options), 16u));
    if (!pump.started().ok()) {
      writer->Abort();
      return pump.started();
    }
    failure = PumpRecords(pump, *writer, loop, stats, *source, router, items_hash);
  }
  if (failure.ok()) failure = loop.CheckSomethingWritten(*writer);
  if (failure.ok()) failure = router.CheckKeptFieldsSeen();
  DatasetMetadata metadata = StreamMetadata(options, format, *source, items_hash.Digest());
  metadata.field_records = router.records_per_field();
  return FinishConversion(*writer, metadata, failure, loop.writer_failed(), std::move(stats),
                          start);
}

}  // namespace packrec::conversion
