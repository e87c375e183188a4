// The one reader interface every storage format implements, and OpenDataset, which detects the
// format of a path and opens it.
//
// Threading: a Reader is immutable after OpenDataset returns. Read, ForEach and Verify may be
// called from any number of threads at once, each thread with its own ReadScratch.
//
// Lifetime: a RecordView's spans stay valid while the Reader is alive, except when the record had
// to be copied or decompressed (compressed records, formats without a mapping): then they point
// into the ReadScratch passed to Read and stay valid until that scratch is next used or destroyed.
// Copy what you keep.
//
// fork(): every format may be opened and read in a child process, whatever other threads of the
// parent were doing at the fork. The shard reader holds only read-only mappings and no locks, so a
// child may also keep using a Reader opened by its parent. An LMDB Reader inherited by a child
// opens a fresh environment there on first use (LMDB forbids using the parent's), leaving the
// parent's handle alone. HDF5 is used only at open, under a process-wide lock that packrec holds
// across fork() (pthread_atfork), so a child never inherits it taken; an HDF5 Reader reads through
// its mapping and may be used in a child. The same does not hold for HDF5 calls that other code in
// the process makes (h5py): fork only while those are idle.
//
// Files changing under an open reader: datasets are immutable once written. The shard reader
// copies each shard's index into memory at open and streams ForEach with pread, so a shard
// truncated while open makes those calls return errors; but Read's zero-copy views point into
// the mapping, and touching a page past the new end of the file raises SIGBUS, as with any mmap
// (LMDB has the same rule). Do not truncate or rewrite a dataset that a reader has open.
#ifndef PACKREC_READER_H_
#define PACKREC_READER_H_

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

// How datasets at URLs (https://, http://, s3://) are read. See docs/remote.md. The environment
// variables PACKREC_REMOTE_TIMEOUT (seconds), PACKREC_REMOTE_TRIES, PACKREC_REMOTE_IN_FLIGHT,
// PACKREC_CACHE_DIR, PACKREC_CACHE_SIZE and PACKREC_CACHE_BLOCK (bytes, or with a KiB/MiB/GiB/TiB
// suffix) override timeout_seconds, max_tries, max_in_flight, cache_dir, cache_size_bytes and
// cache_block_bytes: one setting reaches DataLoader worker processes.
struct RemoteOptions {
  // A try of one request fails when no byte arrives for this long (and when connecting takes
  // longer); after `max_tries` tries the read fails with an error naming the URL.
  double timeout_seconds = 30;
  std::uint32_t max_tries = 5;  // per request; resets, timeouts, 5xx and 429 are retried
  // Requests in flight at once, per reader and fetch: a shuffled batch of 256 is about 190
  // requests, and 64 at once hide 10 ms of latency (docs/benchmarks.md, "Datasets at URLs").
  std::uint32_t max_in_flight = 64;
  // Ranges of one batch closer than this are fetched in one request (the bytes between them are
  // downloaded and dropped): fewer requests for a few more bytes.
  std::uint64_t coalesce_gap_bytes = 64 * 1024;
  std::uint64_t max_request_bytes = 16 * 1024 * 1024;  // a coalesced request stops growing here
  // Bytes of records fetched ahead for the loader (WillNeed) and not yet read; past this, hints
  // are dropped and reads fetch on demand.
  std::uint64_t staging_limit_bytes = 1024ull * 1024 * 1024;
  // A local disk cache shared by every process that names the same directory (empty: none, reads
  // go straight to memory). It never holds more than cache_size_bytes; blocks of
  // cache_block_bytes of a shard are its unit. See docs/remote.md ("The cache").
  std::string cache_dir;
  std::uint64_t cache_size_bytes = 0;
  std::uint64_t cache_block_bytes = 4 * 1024 * 1024;
};

struct OpenOptions {
  // Check each record's checksum on every Read (costs one xxHash64 pass over the bytes).
  bool verify_checksums = true;
  // Open even when some shards fail their structural checks; reads of their records then return
  // the shard's error. Verify uses this to report every problem instead of stopping at the first.
  bool allow_damaged_shards = false;
  RemoteOptions remote;  // used only when the dataset is at a URL
};

// One file of a dataset, as the manifest lists it.
struct DatasetFileInfo {
  std::string file;  // relative to the dataset directory
  std::uint64_t first_record = 0;
  std::uint64_t record_count = 0;
  std::uint64_t size_bytes = 0;
};

struct DatasetInfo {
  std::string format;  // its name in the registry (ListFormats, packrec/format.h)
  std::uint32_t format_version = 0;
  std::uint64_t record_count = 0;
  std::uint64_t rejected_count = 0;  // inputs skipped at convert time (--on-error skip)
  std::vector<std::string> classes;  // label i is classes[i]; empty for list-file inputs
  std::uint32_t label_count = 0;     // max label + 1
  std::string listing_hash;          // hex xxHash64 of the sorted input listing
  std::string source_kind;           // "image-folder", "caffe-list", "mxnet-list", "api"
  std::uint64_t payload_bytes = 0;   // sum of stored record sizes
  std::vector<DatasetFileInfo> files;
  std::string options_json;  // the convert options, as a JSON object
  std::string created_by;
  // Whether each record's metadata (label, sizes, encoding, key) is under a checksum, as its
  // bytes are. False for LMDB and HDF5 datasets of layout version 1: a flipped label there is
  // delivered as it is, and Verify cannot see it.
  bool metadata_checksummed = true;
  // The fields each record carries beside its image and label (empty: image and label only).
  std::vector<FieldSpec> fields;
  // How many records carry each of `fields`, where the writer was told (an import, a
  // conversion); empty otherwise.
  std::vector<std::uint64_t> field_records;
};

// Per-call scratch for records that cannot be handed out as views. Reuse one per thread.
struct ReadScratch {
  std::vector<std::byte> bytes;
  std::string key;
  std::vector<FieldView> fields;       // RecordView::fields points here
  std::vector<std::byte> field_bytes;  // fields that had to be copied
  std::vector<std::byte> fetched;      // a remote record's bytes, as they came over the network
};

// One problem found by Verify. Fields that do not apply are empty.
struct VerifyProblem {
  std::string file;                           // shard or manifest path
  std::optional<std::uint64_t> record_index;  // global record index
  std::string key;
  std::optional<std::uint64_t> byte_offset;  // offset in `file` where the bad data starts
  Status status;
};

// Receives every problem found while scanning; scanning goes on after each one.
class VerifyReporter {
 public:
  virtual ~VerifyReporter() = default;
  virtual void Report(const VerifyProblem& problem) = 0;
};

// Where a record's stored bytes lie, for callers that do their own I/O (io_uring, O_DIRECT).
struct RecordLocation {
  std::filesystem::path file;
  std::uint64_t offset = 0;
  std::uint64_t stored_size = 0;
  bool compressed = false;  // the stored bytes are zstd, not the image
};

struct VerifyStats {
  std::uint64_t records_checked = 0;
  std::uint64_t bytes_checked = 0;
  std::uint64_t problems = 0;
};

class Reader {
 public:
  virtual ~Reader() = default;
  Reader() = default;
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  virtual const DatasetInfo& info() const = 0;
  std::uint64_t size() const { return info().record_count; }

  // Random access by global index: O(1) for the shard format.
  // Errors: OutOfRange past the end; Corruption when the record fails its checksum (with shard,
  // record index, key and byte offset in the message); the shard's own error if it is damaged.
  virtual Result<RecordView> Read(std::uint64_t index, ReadScratch& scratch) const = 0;

  // Sequential iteration over [begin, min(end, size())), in index order, streaming where the
  // format can (the shard format reads windows of records with pread instead of faulting in the
  // mapping). The view passed to `visit` is valid only during that call. Stops at and returns
  // the first error of a read or of `visit`.
  using Visitor = std::function<Status(const RecordView&)>;
  virtual Status ForEach(const Visitor& visit, std::uint64_t begin = 0,
                         std::uint64_t end = UINT64_MAX) const;

  // Projection: the value of field `field` (an index into info().fields) of record `index`,
  // reading only that record's field bytes where the format can (the shard format touches no
  // image bytes; its field checksum is checked when verify_checksums is on). Views live as Read's
  // do. OutOfRange for an index or field past the end.
  virtual Result<FieldView> ReadField(std::uint64_t index, std::size_t field,
                                      ReadScratch& scratch) const;

  // Projection: every record's label, in index order, without touching image bytes where the
  // format keeps labels apart from them (the shard format: from the index held in memory).
  virtual Result<std::vector<std::uint32_t>> ReadLabels() const;

  // Where record `index` is stored. Shards only; other formats return NotSupported (LMDB moves
  // values between pages, HDF5 may chunk or filter them). OutOfRange past the end.
  virtual Result<RecordLocation> Locate(std::uint64_t index) const;

  // Checks every byte the format can check (headers, index, every record checksum, whole-file
  // checksums), reports each problem to `reporter` and goes on.
  virtual VerifyStats Verify(VerifyReporter& reporter) const = 0;

  // A hint that `indices` will be Read soon (the Loader gives each batch as it starts it). A
  // dataset at a URL starts fetching them now, sorted and coalesced into few ranged requests, so
  // that the Reads find their bytes waiting; local datasets ignore it. Returns at once; errors
  // surface in the Reads. Thread-safe.
  virtual void WillNeed(std::span<const std::uint64_t> indices) const { (void)indices; }

  // Requests, retries and bytes of a dataset at a URL so far; all zero for local datasets.
  struct RemoteStats {
    std::uint64_t requests = 0;  // sent, retries included
    std::uint64_t retries = 0;
    std::uint64_t bytes = 0;  // received
    // Through a disk cache (RemoteOptions::cache_dir): blocks read from it, blocks this process
    // fetched and kept, blocks it removed to stay under the limit.
    std::uint64_t cache_hits = 0;
    std::uint64_t cache_fills = 0;
    std::uint64_t cache_evictions = 0;
  };
  virtual RemoteStats remote_stats() const { return {}; }
};

// Whether `path` is a URL OpenDataset reads over the network (http://, https://, s3://) rather
// than a local path.
bool IsDatasetUrl(std::string_view path);

// Opens the dataset at `path`, detecting its format. Errors: NotFound, Corruption, Truncated,
// NotSupported (a newer format version), IOError; each message names the file. `path` may be a
// URL (https://, http://, s3://) of a shard dataset: see RemoteOptions and docs/remote.md.
Result<std::unique_ptr<Reader>> OpenDataset(const std::filesystem::path& path,
                                            const OpenOptions& options = {});

}  // namespace packrec

#endif  // PACKREC_READER_H_
