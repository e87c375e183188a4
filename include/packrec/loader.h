// The batch loader: turns any packrec dataset into batches of decoded, transformed images in
// reusable (pinned, when CUDA is there) host buffers, decoding on N threads ahead of the consumer.
//
// Order: each epoch has one global sequence of records, a pure function of (dataset size, seed,
// epoch, shuffle mode), never of threads, prefetch or timing; it is cut into global batches of
// batch_size x world_size records, and rank r's batch s is the r-th slice of global batch s.
// Batches are delivered in that order. Random crops and flips are drawn from a generator seeded by
// (seed, epoch, record index), so a batch's pixels are reproducible too. docs/loader.md has the
// rules, including resuming (State, Resume) and changing world_size on resume.
//
// Memory: batch buffers of batch_size x H x W x 3 bytes are allocated once and reused: a batch
// handed to the consumer goes back to the pool when its last shared_ptr is released. At most
// prefetch_batches batches are decoded ahead, so the pool holds prefetch_batches buffers plus the
// batches the consumer keeps, however slow the consumer is; steady state allocates nothing.
//
// Threading: Next and StartEpoch are called from one consumer thread. Destroying the loader stops
// its threads promptly (they check between images), mid-epoch included.
//
// fork(): a Loader runs threads, and a child process gets none of them: a Loader (or a Batch's
// pool) must not be used in a child forked while it exists. Make loaders after the fork (as
// PyTorch's DataLoader workers do with packrec.torch.Dataset); the Reader it reads may come from
// the parent (reader.h says which readers a child may keep using).
//
// Errors: every fallible call returns a Status; none throws, not even when memory runs out
// (Create returns Internal then).
#ifndef PACKREC_LOADER_H_
#define PACKREC_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "packrec/decode.h"
#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec {

enum class TransformKind : std::uint8_t {
  kNone,   // no decode: each record's encoded bytes, as stored
  kEval,   // resize the shorter side to resize_size, center crop output_size (torchvision eval)
  kTrain,  // RandomResizedCrop(output_size, scale, ratio) + random horizontal flip
};

enum class ShuffleMode : std::uint8_t {
  kNone,    // index order
  kGlobal,  // one random permutation of the whole dataset per epoch: the best statistics
  // Windows of `shuffle_window` records that are neighbours on disk, visited in random order and
  // shuffled inside (FFCV's quasi-random order): reads stay near each other, for slow or remote
  // storage where random access costs seeks or round trips.
  kWindowed,
  // Each rank reads only its own shard files (world_size must divide the dataset's file count):
  // a new assignment of files to ranks each epoch, each rank's records shuffled among
  // themselves, so no two ranks read one file in an epoch (remote storage, per-machine caches).
  // The price: the order depends on world_size (a resume must keep it), the statistics are a
  // file-level mix, and ranks hold different record counts, so last_batch must be kPad (each
  // rank repeats its own records up to the largest share) or kDrop (cut to the smallest).
  kShards,
};

// The end of an epoch whose length does not divide into global batches (batch_size x world_size).
enum class LastBatch : std::uint8_t {
  kShort,  // the last global batch is short, split as evenly as the ranks allow (a rank's share
           // may be empty): every record exactly once per epoch across all ranks
  kPad,    // the last global batch is filled up by repeating the epoch's first records, so every
           // batch of every rank is full (DistributedSampler, DALI's pad_last_batch)
  kDrop,   // the last partial global batch is left out (drop_last)
};

struct LoaderOptions {
  std::uint32_t batch_size = 256;
  unsigned threads = 0;                // decoding threads; 0: one per core
  std::uint32_t prefetch_batches = 4;  // batches decoded ahead, and buffers in the pool
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  std::uint64_t seed = 0;
  std::uint32_t shuffle_window = 4096;  // kWindowed: records per window
  LastBatch last_batch = LastBatch::kShort;
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  TransformKind transform = TransformKind::kEval;
  std::uint32_t output_size = 224;  // images are output_size x output_size x 3
  std::uint32_t resize_size = 256;  // kEval: the shorter side before the center crop
  float min_scale = 0.08f;          // kTrain: fraction of the image's area, as torchvision
  float max_scale = 1.0f;
  float min_ratio = 3.0f / 4.0f;  // kTrain: aspect ratio (width / height) range
  float max_ratio = 4.0f / 3.0f;
  bool random_flip = true;  // kTrain: flip horizontally with probability 1/2
  // kFail: Next returns the error, naming the record index and key; kSkip: the record is left
  // out of its batch (which is then shorter) and counted.
  OnBadRecord on_bad_record = OnBadRecord::kFail;
  bool pin_memory = true;  // page-locked buffers (cudaHostAlloc) when CUDA is built and present
  DecodeLimits limits;
  // Fields delivered with each batch, by name (DatasetInfo::fields); InvalidArgument for a name
  // the dataset does not have. Empty: images and labels only, at the same speed as before.
  std::vector<std::string> fields;
  // The records this loader reads (a train/val split, a fold): record indices below the
  // dataset's size, repeats allowed, in the order shuffle kNone visits them. Each epoch's sequence
  // is then over these entries instead of every record (shuffled, cut and resumed as usual).
  // Empty: every record. Not with shuffle kShards, which deals out whole files.
  std::vector<std::uint64_t> subset;
  // Class balancing, as torch's WeightedRandomSampler(weights, samples, replacement=True): one
  // finite weight >= 0 per entry (per record, or per subset entry), not all 0. Each epoch is then
  // `samples_per_epoch` draws (0: as many as entries), entry e drawn with probability
  // weight_e / sum; draw p is a pure function of (seed, epoch, p), so resuming continues the same
  // draws. Needs shuffle kGlobal (the draws are the shuffle).
  std::vector<double> weights;
  std::uint64_t samples_per_epoch = 0;
  // Mixing datasets (concatenated by ConcatenateDatasets, packrec/dataset_ops.h), as WebDataset's
  // RandomMix and MosaicML's stream proportions: each draw picks range r with probability
  // proportion_r / sum, then one of its records uniformly; a pure function of (seed, epoch,
  // position) as with weights, in O(ranges) memory however many records. Ranges lie inside the
  // dataset, each count >= 1, proportions finite >= 0 and not all 0. Each epoch is
  // samples_per_epoch draws (0: the ranges' records in total). Needs shuffle kGlobal; not with
  // subset or weights.
  struct MixRange {
    std::uint64_t first = 0;
    std::uint64_t count = 0;
    double proportion = 0;
  };
  std::vector<MixRange> mix;
};

// Where a loader is in its sequence, small enough for a checkpoint (ToJson). It names everything
// the order depends on, so a loader resumed from it continues with exactly the next record or
// refuses; it does not depend on the rank, so any rank's state resumes every rank.
struct LoaderState {
  std::string fingerprint;  // DatasetFingerprint of the dataset
  std::uint64_t record_count = 0;
  std::uint64_t seed = 0;
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  std::uint32_t shuffle_window = 0;  // kWindowed only; 0 otherwise
  LastBatch last_batch = LastBatch::kShort;
  std::uint64_t global_batch_size = 0;  // batch_size x world_size when saved
  std::uint32_t world_size = 1;         // when saved (informational: any world_size may resume)
  std::uint64_t epoch = 0;
  // Records of the epoch's global sequence delivered: a multiple of global_batch_size, or the
  // epoch's length once its last batch is out.
  std::uint64_t position = 0;
  // SelectionFingerprint of the subset, weights and samples_per_epoch; empty when there are none
  // (and in states saved before they existed).
  std::string selection;

  std::string ToJson() const;
  // Errors: InvalidInput naming the field that is missing, of the wrong type or out of range.
  static Result<LoaderState> FromJson(std::string_view text);
};

// What an epoch holds for one rank under the options (LastBatch says how its end was made).
struct EpochPlan {
  std::uint64_t global_records = 0;  // the epoch's sequence, all ranks, padding included
  std::uint64_t batches = 0;         // per rank; the same for every rank
  std::uint64_t records = 0;         // this rank's, padding included
  std::uint64_t padded = 0;          // repeats added at the end (kPad), all ranks
  std::uint64_t dropped = 0;         // records left out (kDrop), all ranks
};

// One batch. Images are N x H x W x 3 uint8 (RGB, rows top to bottom), N = size().
class Batch {
 public:
  std::uint64_t epoch() const { return epoch_; }
  std::uint64_t index() const { return index_; }  // batch number within the epoch
  std::uint32_t size() const { return size_; }
  std::uint32_t height() const { return height_; }
  std::uint32_t width() const { return width_; }
  std::uint32_t skipped() const { return skipped_; }  // bad records left out (kSkip)
  std::uint32_t padded() const { return padded_; }    // trailing repeats (LastBatch::kPad)
  bool pinned() const { return pinned_; }
  std::span<const std::uint8_t> images() const { return {images_, image_bytes() * size_}; }
  std::span<const std::uint8_t> image(std::uint32_t i) const {
    return {images_ + image_bytes() * i, image_bytes()};
  }
  std::span<const std::int64_t> labels() const { return {labels_.data(), size_}; }
  std::span<const std::uint64_t> record_indices() const { return {records_.data(), size_}; }
  // kNone: record i's encoded bytes.
  std::span<const std::byte> encoded(std::uint32_t i) const {
    return std::span<const std::byte>(encoded_).subspan(
        encoded_offsets_[i], encoded_offsets_[i + 1] - encoded_offsets_[i]);
  }
  std::size_t image_bytes() const { return std::size_t{height_} * width_ * 3; }
  // Where the images live (for an upload): capacity x H x W x 3 bytes.
  const std::uint8_t* data() const { return images_; }

  // The requested fields (LoaderOptions::fields), j in [0, field_count()): every record's value
  // back to back (field_values), record i's at [field_offsets[i], field_offsets[i + 1]), and
  // whether record i has one (a record lacking the field has an empty range). Numbers are as
  // stored (little-endian), text and JSON as written.
  std::size_t field_count() const { return fields_.size(); }
  std::span<const std::byte> field_values(std::size_t j) const { return fields_[j].values; }
  std::span<const std::uint64_t> field_offsets(std::size_t j) const {
    return {fields_[j].offsets.data(), std::size_t{size_} + 1};
  }
  std::span<const std::uint8_t> field_present(std::size_t j) const {
    return {fields_[j].present.data(), size_};
  }
  FieldView field(std::size_t j, std::uint32_t i) const {
    const std::uint64_t begin = fields_[j].offsets[i], end = fields_[j].offsets[i + 1];
    return {fields_[j].present[i] != 0, field_values(j).subspan(begin, end - begin)};
  }

 private:
  friend class BatchFiller;
  struct FieldColumn {
    std::vector<std::byte> values;
    std::vector<std::uint64_t> offsets;
    std::vector<std::uint8_t> present;
  };
  std::uint64_t epoch_ = 0;
  std::uint64_t index_ = 0;
  std::uint32_t size_ = 0;
  std::uint32_t height_ = 0;
  std::uint32_t width_ = 0;
  std::uint32_t skipped_ = 0;
  std::uint32_t padded_ = 0;
  bool pinned_ = false;
  std::uint8_t* images_ = nullptr;  // owned by the pool
  std::vector<std::int64_t> labels_;
  std::vector<std::uint64_t> records_;
  std::vector<std::byte> encoded_;
  std::vector<std::size_t> encoded_offsets_;
  std::vector<FieldColumn> fields_;
  // Each slot's field values while the batch fills (slots fill on several threads; the columns
  // are made from them when the batch is complete): slot_values_[slot * fields + j].
  std::vector<std::vector<std::byte>> slot_values_;
  std::vector<std::uint8_t> slot_present_;
};

struct LoaderStats {
  std::uint64_t images = 0;          // decoded (or copied, for kNone)
  std::uint64_t skipped = 0;         // bad records left out (kSkip)
  double consumer_wait_seconds = 0;  // time Next spent waiting for a batch
  double decode_seconds = 0;         // summed over threads
  // A dataset at a URL: its reader's requests (retries included) and bytes received so far,
  // the open's included (Reader::remote_stats).
  std::uint64_t remote_requests = 0;
  std::uint64_t remote_bytes = 0;
};

class Loader {
 public:
  // Starts at epoch 0, or where `resume_from` says (as Resume; no record before it is read).
  // Errors: InvalidArgument for bad options (named); Resume's errors.
  static Result<std::unique_ptr<Loader>> Create(
      std::shared_ptr<const Reader> reader, const LoaderOptions& options,
      const std::optional<LoaderState>& resume_from = std::nullopt);
  virtual ~Loader() = default;

  // Begins `epoch` (abandoning what is left of the current one). Epoch 0 starts by itself.
  virtual void StartEpoch(std::uint64_t epoch) = 0;
  // Where the consumer is: the batches Next has returned count as consumed.
  virtual LoaderState State() const = 0;
  // Continues from `state`: its epoch, at its position, in O(1) (nothing before it is read or
  // decoded). Errors: InvalidArgument when the state is of another dataset (fingerprint) or
  // was saved under options that give another order (seed, shuffle, shuffle_window, last_batch),
  // or when its position does not fall on a global batch of this loader (batch_size x
  // world_size); the message names what differs. The loader is unchanged after an error.
  virtual Status Resume(const LoaderState& state) = 0;
  // The epoch's next batch, in order; nullptr after its last one. A bad record (OnBadRecord::kFail)
  // or a failure inside a worker is returned here, with the record's index and key.
  virtual Result<std::shared_ptr<const Batch>> Next() = 0;
  virtual std::uint64_t batches_per_epoch() const = 0;
  virtual std::uint64_t records_per_epoch() const = 0;  // this rank's
  virtual EpochPlan plan() const = 0;
  virtual LoaderStats stats() const = 0;
};

// The names LoaderState's JSON and the Python API use: "none" "global" "windowed" "shards";
// "short" "pad" "drop". Parse* return false for any other name.
std::string_view ShuffleModeName(ShuffleMode mode);
std::string_view LastBatchName(LastBatch mode);
bool ParseShuffleMode(std::string_view name, ShuffleMode* mode);
bool ParseLastBatch(std::string_view name, LastBatch* mode);

// The record indices this rank reads in `epoch`, in order (what the loader reads).
std::vector<std::uint64_t> EpochOrder(std::uint64_t record_count, const LoaderOptions& options,
                                      std::uint64_t epoch);

// Identifies a dataset's records and their order, from its manifest (hex xxHash64 of the record,
// label and rejected counts, the input-listing hash and the convert-time shuffle seed): the same
// for one listing converted to any format, different when records were added, removed or
// reordered.
std::string DatasetFingerprint(const DatasetInfo& info);

// Identifies a loader's selection (LoaderOptions::subset, weights, mix, samples_per_epoch): hex
// xxHash64 of their bytes, or "" when none is set.
std::string SelectionFingerprint(const LoaderOptions& options);

// The source region kEval and kTrain decode for a width x height image (kTrain: record
// `record_index` of `epoch`), and whether kTrain flips it.
Rect EvalRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options);
Rect TrainRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options,
                 std::uint64_t epoch, std::uint64_t record_index, bool* flip);

}  // namespace packrec

#endif  // PACKREC_LOADER_H_
