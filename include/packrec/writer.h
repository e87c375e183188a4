// The writer interface every storage format implements. Convert drives it; loaders and tools that
// make records themselves may use it directly.
//
// Threading: one thread per writer. Records are stored in the order Add is called.
// Durability: nothing is visible as a dataset until Finish returns OK (the manifest is written
// last, after every data file is fsynced and renamed into place). Replacing an existing dataset
// (overwrite) writes beside it and swaps at Finish: a failed run leaves the old one intact.
// Destroying a writer that was neither finished nor aborted aborts it: every file it created is
// removed (a resumable writer's journal and sealed files too; to keep them for
// ResumeDatasetWriter, call AbortKeepingCheckpoint first).
// What stays on disk after a failure is docs/reliability.md's table, per format.
//
// fork(): a writer belongs to the process that created it; a child must not use one inherited
// from its parent (an LMDB environment and HDF5 file handles cannot cross a fork). Writers in
// several processes at once write different outputs (convert --part), each taking its own lock.
#ifndef PACKREC_WRITER_H_
#define PACKREC_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/record.h"
#include "packrec/status.h"

namespace packrec {

enum class Compression : std::uint8_t {
  kNone = 0,
  kZstd = 1,
  kDeflate = 2,  // hdf5 pixels layout only: HDF5's gzip filter, which h5py reads without plugins
};

// Compression as the CLI, Python and manifests spell it: "none"; "zstd" or "zstd:LEVEL" (1 to 22);
// "deflate" or "deflate:LEVEL" (1 to 9). Without a level, the codec's default: zstd 3, deflate 4
// (and 3 for none, as WriterOptions has it, so that every caller records the same options).
struct CompressionSetting {
  Compression codec = Compression::kNone;
  int level = 3;
};
// InvalidArgument naming the accepted forms for anything else.
Result<CompressionSetting> ParseCompression(std::string_view text);
// "none", "zstd", "deflate".
std::string_view CompressionName(Compression codec);

enum class LmdbValues : std::uint8_t {
  kPackrec,     // packrec's value header, the key, the payload (docs/formats/lmdb.md)
  kCaffeDatum,  // caffe.Datum protobufs (encoded = true), which Caffe and DALI's caffe reader read
};

enum class Hdf5Layout : std::uint8_t {
  kEncoded,  // the encoded images in one contiguous /data dataset (docs/formats/hdf5.md)
  kPixels,   // decoded images in an N x H x W x 3 chunked /images dataset
};

// The options only the shard format takes (docs/formats/shard.md).
struct ShardWriterOptions {
  std::uint32_t align_bytes = 64;  // record alignment; a power of two, <= 1 MiB
  // Called on the writing thread each time a shard file is sealed: fsynced, renamed to its final
  // name `file` and never written again, with the xxh64 of the whole file (the manifest's). For a
  // caller that ships shards as they are done (convert to s3:// uploads them). Not stored.
  std::function<void(const std::filesystem::path& file, std::uint64_t xxh64)> on_sealed;
};

// The options only the LMDB format takes (docs/formats/lmdb.md).
struct LmdbWriterOptions {
  // The initial map size; 0 picks 1 GiB (or the payload total, when known). Either way the map
  // grows (doubling) when full.
  std::uint64_t map_size_bytes = 0;
  // Records per write transaction (a transaction also commits at 4 MiB of values).
  std::uint32_t commit_records = 1000;
  LmdbValues values = LmdbValues::kPackrec;  // the value layout
};

// The options only the HDF5 format takes (docs/formats/hdf5.md).
struct Hdf5WriterOptions {
  // With kPixels every record must be Encoding::kRawRgb of exactly pixel_height x pixel_width
  // (Convert decodes and resizes the inputs to that size).
  Hdf5Layout layout = Hdf5Layout::kEncoded;
  std::uint32_t pixel_height = 0;
  std::uint32_t pixel_width = 0;
};

// What a writer is asked for: the options every format shares, then each format's own, which only
// that format reads (its descriptor records them in the manifest's options and reads them back;
// a layout option of another format, --hdf5-layout pixels or --lmdb-values caffe-datum, is
// refused).
struct WriterOptions {
  // A name from ListFormats() (packrec/format.h). Empty: the first there, packrec's own shard
  // format.
  std::string format;
  // Target size of one data file: a shard, or an export's tar, TFRecord or .rec file.
  std::uint64_t shard_size_bytes = 256ull << 20;
  Compression compression = Compression::kNone;
  int compression_level = 3;
  // Replace an existing dataset at the path (only a packrec dataset or an empty directory).
  bool overwrite = false;
  // Total bytes of the records that will be added, when the caller knows it up front (0: not
  // known). hdf5: payloads go straight to their place in /data when the total matches (otherwise
  // they are copied there at Finish); lmdb: the first map size when map_size_bytes is 0.
  std::uint64_t expected_payload_bytes = 0;
  // Export formats (wds, tfrecord): class names written beside each record's label, when the
  // caller knows them up front (Convert passes the image folder's).
  std::vector<std::string> classes;
  // shard, lmdb, hdf5: keep a resume point (a journal beside the data, written at each
  // Checkpoint) so a conversion that was killed, or failed writing, continues where it stopped
  // (ResumeDatasetWriter). Convert sets it; docs/reliability.md says what each format keeps.
  bool resumable = false;
  // lmdb, hdf5 (resumable): make the records durable and offer a checkpoint every this many
  // payload bytes (0: 64 MiB). Shards offer one whenever a shard file is sealed.
  std::uint64_t checkpoint_bytes = 0;

  // The fields every record may carry (DatasetInfo::fields); RecordInput::fields holds one value
  // per entry. A format that cannot store fields refuses a non-empty schema (NotSupported).
  std::vector<FieldSpec> fields;

  ShardWriterOptions shard;
  LmdbWriterOptions lmdb;
  Hdf5WriterOptions hdf5;
};

// XXH64 of a record's bytes seeded with its record number, as every format stores it.
struct PrecomputedChecksum {
  std::uint64_t index = 0;  // the record number it was computed for
  std::uint64_t xxh64 = 0;
};

// The longest key every packrec format stores (2-byte key sizes in the shard and LMDB layouts).
// A writer refuses a longer one; convert makes it that record's reject, which follows --on-error.
inline constexpr std::size_t kMaxRecordKeyBytes = 65535;

// One record as the writer takes it. `bytes` is only read during Add.
struct RecordInput {
  std::string_view key;
  std::uint32_t label = 0;
  std::span<const std::byte> bytes;
  ImageInfo image;
  // Optional: the checksum, computed ahead by the caller (convert hashes on the thread that
  // reads a container source, sharing the work with the writing thread). A writer uses it only
  // when the record becomes its record number `index` and is stored as `bytes` (not
  // compressed), and does not hash again: a wrong value makes a record that fails verification.
  // (Initialised here so that aggregate inits naming only the fields above stay free of
  // -Wmissing-field-initializers.)
  std::optional<PrecomputedChecksum> checksum = std::nullopt;
  // One value per WriterOptions::fields entry (empty: every field absent). Checked at Add: text
  // must be UTF-8, JSON must parse, numbers must fill whole elements (InvalidArgument naming the
  // record and field).
  std::span<const FieldView> fields = {};
  // The caller has checked every value against its field's type (ValidateFieldValue, as imports
  // do where they read them): Add does not check them again. A value it vouches for wrongly is
  // stored as given.
  bool fields_checked = false;
};

// An input left out of a dataset, and why.
struct Reject {
  std::string path;
  std::string reason;
};

// Dataset-level facts stored with the records.
struct DatasetMetadata {
  std::vector<std::string> classes;
  std::string listing_hash;  // hex; identifies the input listing
  std::string source_kind = "api";
  std::vector<Reject> rejects;      // written to rejects.tsv beside the manifest
  std::string options_json = "{}";  // convert options to record, a JSON object
  // How many records carry each field of the schema as it ended (convert counts them; empty:
  // not counted). Stored in the manifest as field_records; `packrec info` shows it.
  std::vector<std::uint64_t> field_records = {};
};

class DatasetWriter {
 public:
  virtual ~DatasetWriter() = default;
  virtual Status Add(const RecordInput& record) = 0;
  // Seals the last data file and writes the manifest. After an error, call Abort.
  virtual Status Finish(const DatasetMetadata& metadata) = 0;
  // Removes every file this writer created. Safe to call at any time, and more than once.
  virtual void Abort() = 0;
  // Appends `fields` to the schema (WriterOptions::fields) between two Adds: the records added
  // before have them absent, later RecordInput::fields may hold their values. For an import that
  // meets a WebDataset member or tf.Example feature first in a later record. InvalidArgument for
  // a schema ValidateSchema refuses; NotSupported for formats that keep no fields. Readers
  // before field tables could be shorter than the schema refuse a dataset whose schema grew
  // (docs/formats/fields.md).
  virtual Status AddFields(std::span<const FieldSpec> fields) {
    (void)fields;
    return Status::NotSupported("this format does not store record fields");
  }
  virtual std::uint64_t records_written() const = 0;
  virtual std::uint64_t bytes_written() const = 0;

  // Resumable writers (WriterOptions::resumable). True when records just became durable (a shard
  // was sealed, an LMDB or HDF5 sync point passed), so a Checkpoint now costs only its journal.
  virtual bool CheckpointDue() const { return false; }
  // Makes the records added so far durable (shards: the sealed ones), then records a resume point
  // for them in the journal, with `caller_state(records)`: what the caller needs back to continue
  // after that many records (how far into its input it was). Not resumable: does nothing.
  virtual Status Checkpoint(const std::function<std::string(std::uint64_t records)>& caller_state) {
    (void)caller_state;
    return Status::OK();
  }
  // After a failed Add, Checkpoint or Finish: removes what was written after the last resume
  // point and keeps the rest, with its journal, for ResumeDatasetWriter; returns the records
  // kept. With no resume point holding a record, removes everything as Abort does and returns 0.
  virtual std::uint64_t AbortKeepingCheckpoint() {
    Abort();
    return 0;
  }
};

// Creates a writer for `options.format` at directory `path`. Errors: AlreadyExists when `path`
// exists and `overwrite` is false (or it is not a dataset), InvalidArgument for bad options.
Result<std::unique_ptr<DatasetWriter>> CreateDatasetWriter(const std::filesystem::path& path,
                                                           const WriterOptions& options);

// A writer reopened at the last resume point of an interrupted resumable conversion.
struct ResumedWriter {
  std::unique_ptr<DatasetWriter> writer;
  std::uint64_t records = 0;  // the records it already holds; the next Add is record `records`
  std::string caller_state;   // as the last Checkpoint stored it
};

// Reopens the interrupted resumable conversion at `path` (written in place, or staged beside an
// older dataset it replaces) at its last resume point: whatever was written after it is removed.
// `options` must be the interrupted run's (the caller compares its own state to make sure).
// Errors: NotFound (no interrupted conversion there), InvalidArgument (it was of another format),
// Corrupt (its files do not match its journal: start again with overwrite).
Result<ResumedWriter> ResumeDatasetWriter(const std::filesystem::path& path,
                                          const WriterOptions& options);

// The caller state of the last resume point of an interrupted conversion at `path`, without
// touching it; nullopt when there is none. InvalidArgument when it was of another format.
Result<std::optional<std::string>> ReadResumeState(const std::filesystem::path& path,
                                                   const std::string& format);

// The names CreateDatasetWriter accepts.
std::vector<std::string> WritableFormats();

// Where a dataset of `format` at `path` lists its rejected inputs: inside the directory
// (path/rejects.tsv), or, for HDF5, whose dataset is one file, beside it (path.rejects.tsv).
std::filesystem::path RejectsFilePath(const std::filesystem::path& path, const std::string& format);

}  // namespace packrec

#endif  // PACKREC_WRITER_H_
