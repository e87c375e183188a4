// The batch loader: turns any packrec dataset into batches of decoded, transformed images in
// reusable (pinned, when CUDA is there) host buffers, decoding on N threads ahead of the consumer.
//
// Order: each epoch's order depends only on (seed, epoch, dataset size, rank, world_size), never on
// thread timing, and batches are delivered in that order. Random crops and flips are drawn from a
// generator seeded by (seed, epoch, record index), so a batch's pixels are reproducible too.
//
// Memory: batch buffers of batch_size x H x W x 3 bytes are allocated once and reused: a batch
// handed to the consumer goes back to the pool when its last shared_ptr is released. At most
// prefetch_batches batches are decoded ahead, so the pool holds prefetch_batches buffers plus the
// batches the consumer keeps, however slow the consumer is; steady state allocates nothing.
//
// Threading: Next and StartEpoch are called from one consumer thread. Destroying the loader stops
// its threads promptly (they check between images), mid-epoch included.
#ifndef PACKREC_LOADER_H_
#define PACKREC_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
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
};

enum class OnBadRecord : std::uint8_t {
  kRaise,  // Next returns the error, naming the record index and key
  kSkip,   // the record is left out of its batch (which is then shorter) and counted
};

struct LoaderOptions {
  std::uint32_t batch_size = 256;
  unsigned threads = 0;                // decoding threads; 0: one per core
  std::uint32_t prefetch_batches = 4;  // batches decoded ahead, and buffers in the pool
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  std::uint64_t seed = 0;
  std::uint32_t shuffle_window = 4096;  // kWindowed: records per window
  // The last, partial batch of an epoch: kept (false) or dropped. With world_size > 1, also how
  // an epoch that does not divide evenly is made equal across ranks: padded by repeating the
  // first records of the epoch's order (false, as PyTorch's DistributedSampler) or cut (true).
  bool drop_last = false;
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
  OnBadRecord on_bad_record = OnBadRecord::kRaise;
  bool pin_memory = true;  // page-locked buffers (cudaHostAlloc) when CUDA is built and present
  DecodeLimits limits;
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

 private:
  friend class BatchFiller;
  std::uint64_t epoch_ = 0;
  std::uint64_t index_ = 0;
  std::uint32_t size_ = 0;
  std::uint32_t height_ = 0;
  std::uint32_t width_ = 0;
  std::uint32_t skipped_ = 0;
  bool pinned_ = false;
  std::uint8_t* images_ = nullptr;  // owned by the pool
  std::vector<std::int64_t> labels_;
  std::vector<std::uint64_t> records_;
  std::vector<std::byte> encoded_;
  std::vector<std::size_t> encoded_offsets_;
};

struct LoaderStats {
  std::uint64_t images = 0;          // decoded (or copied, for kNone)
  std::uint64_t skipped = 0;         // bad records left out (kSkip)
  double consumer_wait_seconds = 0;  // time Next spent waiting for a batch
  double decode_seconds = 0;         // summed over threads
};

class Loader {
 public:
  // Errors: InvalidArgument for bad options (named).
  static Result<std::unique_ptr<Loader>> Create(std::shared_ptr<const Reader> reader,
                                                const LoaderOptions& options);
  virtual ~Loader() = default;

  // Begins `epoch` (abandoning what is left of the current one). Epoch 0 starts by itself.
  virtual void StartEpoch(std::uint64_t epoch) = 0;
  // The epoch's next batch, in order; nullptr after its last one. A bad record (kRaise) or a
  // failure inside a worker is returned here, with the record's index and key.
  virtual Result<std::shared_ptr<const Batch>> Next() = 0;
  virtual std::uint64_t batches_per_epoch() const = 0;
  virtual std::uint64_t records_per_epoch() const = 0;  // this rank's
  virtual LoaderStats stats() const = 0;
};

// The record indices this rank reads in `epoch`, in order (what the loader uses).
std::vector<std::uint64_t> EpochOrder(std::uint64_t record_count, const LoaderOptions& options,
                                      std::uint64_t epoch);

// The source region kEval and kTrain decode for a width x height image (kTrain: record
// `record_index` of `epoch`), and whether kTrain flips it.
Rect EvalRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options);
Rect TrainRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options,
                 std::uint64_t epoch, std::uint64_t record_index, bool* flip);

}  // namespace packrec

#endif  // PACKREC_LOADER_H_
