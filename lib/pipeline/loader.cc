// The batch loader. Up to prefetch_batches batches are in flight, each in a pooled buffer; a
// batch's images are claimed in chunks of a few, and every worker helps with the oldest batch
// that still has chunks left before it starts another. So all threads work whatever the prefetch
// depth (a batch per thread left 12 of 16 cores idle at the default depth of 4), and the batch the
// consumer waits for is finished first. Each image is decoded straight into its slot; a batch
// with skipped records is closed up once its last chunk is done. kNone batches (variable-length
// encoded bytes, appended in order) are one chunk each.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <thread>

#include "core/threads.h"
#include "packrec/loader.h"
#include "pipeline/cuda_runtime.h"
#include "pipeline/epoch_sequence.h"

namespace packrec {

// Fills the private parts of a Batch; a friend of Batch.
class BatchFiller {
 public:
  static void Reset(Batch& batch, std::uint64_t epoch, std::uint64_t index) {
    batch.epoch_ = epoch;
    batch.index_ = index;
    batch.size_ = 0;
    batch.skipped_ = 0;
    batch.padded_ = 0;
    batch.encoded_.clear();
    batch.encoded_offsets_.assign(1, 0);
  }
  static void Setup(Batch& batch, std::uint8_t* images, bool pinned, std::uint32_t capacity,
                    std::uint32_t height, std::uint32_t width, std::size_t fields) {
    batch.images_ = images;
    batch.pinned_ = pinned;
    batch.height_ = height;
    batch.width_ = width;
    batch.labels_.resize(capacity);
    batch.records_.resize(capacity);
    batch.fields_.resize(fields);
    batch.slot_values_.resize(std::size_t{capacity} * fields);
    batch.slot_present_.resize(std::size_t{capacity} * fields);
  }
  // Copies the requested fields (`which`: indices into the schema) of a record into `slot`.
  static void StageFields(Batch& batch, std::uint32_t slot, const RecordView& view,
                          const std::vector<std::size_t>& which) {
    for (std::size_t j = 0; j < which.size(); ++j) {
      const FieldView value = which[j] < view.fields.size() ? view.fields[which[j]] : FieldView{};
      const std::size_t at = std::size_t{slot} * which.size() + j;
      batch.slot_values_[at].assign(value.bytes.begin(), value.bytes.end());
      batch.slot_present_[at] = value.present ? 1 : 0;
    }
  }
  // The field columns of the batch's records, from slots [0, size) (after Close's compaction).
  static void AssembleFields(Batch& batch) {
    const std::size_t count = batch.fields_.size();
    for (std::size_t j = 0; j < count; ++j) {
      Batch::FieldColumn& column = batch.fields_[j];
      column.values.clear();
      column.offsets.assign(1, 0);
      column.present.clear();
      for (std::uint32_t i = 0; i < batch.size_; ++i) {
        const std::vector<std::byte>& value = batch.slot_values_[std::size_t{i} * count + j];
        column.values.insert(column.values.end(), value.begin(), value.end());
        column.offsets.push_back(column.values.size());
        column.present.push_back(batch.slot_present_[std::size_t{i} * count + j]);
      }
    }
  }
  static std::span<std::uint8_t> Slot(Batch& batch, std::uint32_t i) {
    return {batch.images_ + batch.image_bytes() * i, batch.image_bytes()};
  }
  static void Commit(Batch& batch, std::int64_t label, std::uint64_t record) {
    batch.labels_[batch.size_] = label;
    batch.records_[batch.size_] = record;
    ++batch.size_;
  }
  static void AppendEncoded(Batch& batch, std::span<const std::byte> bytes) {
    batch.encoded_.insert(batch.encoded_.end(), bytes.begin(), bytes.end());
    batch.encoded_offsets_.push_back(batch.encoded_.size());
  }
  static void Skip(Batch& batch) { ++batch.skipped_; }
  // Image i was decoded into Slot(batch, i) out of order; Close makes the batch of the filled ones.
  static void Place(Batch& batch, std::uint32_t i, std::int64_t label, std::uint64_t record) {
    batch.labels_[i] = label;
    batch.records_[i] = record;
  }
  static void Close(Batch& batch, const std::vector<std::uint8_t>& filled) {
    std::uint32_t size = 0;
    for (std::uint32_t i = 0; i < filled.size(); ++i) {
      if (filled[i] == 0) {
        ++batch.skipped_;
        continue;
      }
      if (i != size) {
        std::memmove(Slot(batch, size).data(), Slot(batch, i).data(), batch.image_bytes());
        batch.labels_[size] = batch.labels_[i];
        batch.records_[size] = batch.records_[i];
        const std::size_t count = batch.fields_.size();
        for (std::size_t j = 0; j < count; ++j) {
          batch.slot_values_[std::size_t{size} * count + j].swap(
              batch.slot_values_[std::size_t{i} * count + j]);
          batch.slot_present_[std::size_t{size} * count + j] =
              batch.slot_present_[std::size_t{i} * count + j];
        }
      }
      ++size;
    }
    batch.size_ = size;
  }
  static void SetPadded(Batch& batch, std::uint32_t padded) { batch.padded_ = padded; }
};

namespace {

using Clock = std::chrono::steady_clock;

// One batch buffer: page-locked when CUDA can give it, else 4 KiB-aligned ordinary memory.
struct PooledBatch {
  Batch batch;
  std::uint8_t* memory = nullptr;
  bool pinned = false;
};

class LoaderImpl;

// The buffers, shared by the loader and every batch it handed out, so a batch the consumer keeps
// stays valid after the loader is gone; the memory goes with the last of them.
struct BufferPool {
  std::vector<std::unique_ptr<PooledBatch>> buffers;
  std::mutex mutex;             // guards owner
  LoaderImpl* owner = nullptr;  // where released buffers go back; null once the loader is gone

  ~BufferPool() {
    for (auto& pooled : buffers) {
      if (pooled->pinned) {
        cuda::FreePinned(pooled->memory);
      } else {
        std::free(pooled->memory);
      }
    }
  }
};

// The schema index of each requested field; InvalidArgument naming one the dataset lacks.
Result<std::vector<std::size_t>> FieldIndices(const DatasetInfo& info,
                                              const LoaderOptions& options) {
  std::vector<std::size_t> indices;
  for (const std::string& name : options.fields) {
    std::size_t f = 0;
    while (f < info.fields.size() && info.fields[f].name != name) ++f;
    if (f == info.fields.size()) {
      std::string known;
      for (const FieldSpec& spec : info.fields) known += (known.empty() ? "" : ", ") + spec.name;
      return Status::InvalidArgument("fields: the dataset has no field '" + name +
                                     "' (its fields: " + (known.empty() ? "none" : known) + ")");
    }
    indices.push_back(f);
  }
  return indices;
}

Status ValidateOptions(const LoaderOptions& options) {
  if (options.batch_size == 0) return Status::InvalidArgument("batch_size must be at least 1");
  if (options.prefetch_batches == 0) {
    return Status::InvalidArgument("prefetch_batches must be at least 1");
  }
  if (options.world_size == 0 || options.rank >= options.world_size) {
    return Status::InvalidArgument("rank " + std::to_string(options.rank) +
                                   " is not below world_size " +
                                   std::to_string(options.world_size));
  }
  if (options.transform != TransformKind::kNone &&
      (options.output_size == 0 || options.output_size > 16384)) {
    return Status::InvalidArgument("output_size must be 1 to 16384");
  }
  if (options.transform == TransformKind::kEval && options.resize_size < options.output_size) {
    return Status::InvalidArgument("resize_size must be at least output_size");
  }
  if (options.transform == TransformKind::kTrain &&
      !(options.min_scale > 0 && options.min_scale <= options.max_scale && options.max_scale <= 1 &&
        options.min_ratio > 0 && options.min_ratio <= options.max_ratio)) {
    return Status::InvalidArgument(
        "train transform needs 0 < min_scale <= max_scale <= 1 and 0 < min_ratio <= max_ratio");
  }
  if (options.threads > 1024) return Status::InvalidArgument("threads must be at most 1024");
  return Status::OK();
}

// Weights or mix proportions: each finite and >= 0, some above 0, their sum finite.
Status CheckWeights(const std::vector<double>& values, const std::string& name) {
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || values[i] < 0) {
      return Status::InvalidArgument(name + "[" + std::to_string(i) + "] is " +
                                     std::to_string(values[i]) + ": " + name +
                                     " are finite and >= 0");
    }
    sum += values[i];
  }
  if (!(sum > 0) || !std::isfinite(sum)) {
    return Status::InvalidArgument(name + " sum to " + std::to_string(sum) +
                                   ": at least one must be above 0, and the sum finite");
  }
  return Status::OK();
}

Status ValidateMix(const LoaderOptions& options, std::uint64_t record_count) {
  if (!options.subset.empty() || !options.weights.empty()) {
    return Status::InvalidArgument("a mix goes with neither subset nor weights");
  }
  if (options.shuffle != ShuffleMode::kGlobal) {
    return Status::InvalidArgument("a mix needs shuffle 'global': its draws are the order");
  }
  std::vector<double> proportions;
  for (std::size_t i = 0; i < options.mix.size(); ++i) {
    const LoaderOptions::MixRange& range = options.mix[i];
    if (range.count == 0 || range.first > record_count ||
        range.count > record_count - range.first) {
      return Status::InvalidArgument("mix range " + std::to_string(i) + " (records " +
                                     std::to_string(range.first) + " + " +
                                     std::to_string(range.count) + ") is empty or past the " +
                                     std::to_string(record_count) + " records");
    }
    proportions.push_back(range.proportion);
  }
  return CheckWeights(proportions, "mix proportions");
}

// The subset and weights against the dataset: every index a record, one finite weight >= 0 per
// entry, some weight above 0, and a shuffle they go with.
Status ValidateSelection(const LoaderOptions& options, std::uint64_t record_count) {
  if (!options.subset.empty() && options.shuffle == ShuffleMode::kShards) {
    return Status::InvalidArgument(
        "subset does not go with shuffle 'shards', which deals out whole files to ranks");
  }
  for (std::size_t i = 0; i < options.subset.size(); ++i) {
    if (options.subset[i] >= record_count) {
      return Status::InvalidArgument("subset[" + std::to_string(i) + "] is " +
                                     std::to_string(options.subset[i]) + ", past the dataset's " +
                                     std::to_string(record_count) + " records");
    }
  }
  if (!options.mix.empty()) return ValidateMix(options, record_count);
  if (options.weights.empty()) {
    if (options.samples_per_epoch > 0) {
      return Status::InvalidArgument(
          "samples_per_epoch counts weighted draws: it needs weights or a mix");
    }
    return Status::OK();
  }
  const std::uint64_t entries = options.subset.empty() ? record_count : options.subset.size();
  if (options.weights.size() != entries) {
    return Status::InvalidArgument(
        "weights has " + std::to_string(options.weights.size()) + " entries, one per " +
        (options.subset.empty() ? "record" : "subset entry") + " is " + std::to_string(entries));
  }
  if (options.shuffle != ShuffleMode::kGlobal) {
    return Status::InvalidArgument(
        "weights need shuffle 'global': the weighted draws are the "
        "epoch's order");
  }
  return CheckWeights(options.weights, "weights");
}

class LoaderImpl final : public Loader {
 public:
  // `field_indices`: the requested fields' places in the schema (FieldIndices, checked by Create).
  LoaderImpl(std::shared_ptr<const Reader> reader, const LoaderOptions& options,
             std::vector<std::size_t> field_indices, std::uint64_t epoch, std::uint64_t first_batch)
      : reader_(std::move(reader)),
        options_(options),
        fingerprint_(DatasetFingerprint(reader_->info())),
        selection_(SelectionFingerprint(options_)),
        field_indices_(std::move(field_indices)),
        sequence_(reader_->info(), options_, 0) {
    for (std::uint32_t i = 0; i < options_.prefetch_batches; ++i) free_.push_back(NewBuffer());
    pool_->owner = this;
    threads_ =
        options_.threads > 0 ? options_.threads : std::max(1u, std::thread::hardware_concurrency());
    BeginEpoch(epoch, first_batch);
    started_ = StartThreads(workers_, threads_, "packrec-load", [this] { Work(); });
  }
  // Whether every worker started; when not, the destructor stops those that did.
  const Status& started() const { return started_; }

  ~LoaderImpl() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (std::thread& worker : workers_) worker.join();
    std::lock_guard guard(pool_->mutex);  // batches released from now on stay with the pool
    pool_->owner = nullptr;
  }

  void StartEpoch(std::uint64_t epoch) override {
    std::lock_guard lock(mutex_);
    BeginEpoch(epoch, 0);
    work_.notify_all();
  }

  LoaderState State() const override {
    std::lock_guard lock(mutex_);
    LoaderState state;
    state.fingerprint = fingerprint_;
    state.record_count = reader_->size();
    state.seed = options_.seed;
    state.shuffle = options_.shuffle;
    state.shuffle_window = options_.shuffle == ShuffleMode::kWindowed ? options_.shuffle_window : 0;
    state.last_batch = options_.last_batch;
    state.global_batch_size = sequence_.global_batch_size();
    state.world_size = options_.world_size;
    state.epoch = epoch_;
    state.position = std::min(sequence_.length(), next_deliver_ * sequence_.global_batch_size());
    state.selection = selection_;
    return state;
  }

  Status Resume(const LoaderState& state) override {
    Result<std::uint64_t> first_batch =
        FirstBatchOf(state, *reader_, options_, fingerprint_, selection_);
    if (!first_batch.ok()) return first_batch.status();
    std::lock_guard lock(mutex_);
    BeginEpoch(state.epoch, *first_batch);
    work_.notify_all();
    return Status::OK();
  }

  // The batch `state` resumes at, or why this loader cannot continue its sequence.
  static Result<std::uint64_t> FirstBatchOf(const LoaderState& state, const Reader& reader,
                                            const LoaderOptions& options,
                                            const std::string& fingerprint,
                                            const std::string& selection) {
    const auto differs = [](const std::string& what, const std::string& saved,
                            const std::string& now) {
      return Status::InvalidArgument("cannot resume: the state was saved with " + what + " " +
                                     saved + ", this loader has " + now +
                                     "; resuming would not continue the same sequence");
    };
    if (state.fingerprint != fingerprint || state.record_count != reader.size()) {
      return differs("dataset fingerprint",
                     state.fingerprint + " (" + std::to_string(state.record_count) + " records)",
                     fingerprint + " (" + std::to_string(reader.size()) + " records)");
    }
    if (state.seed != options.seed) {
      return differs("seed", std::to_string(state.seed), std::to_string(options.seed));
    }
    if (state.selection != selection) {
      const auto named = [](const std::string& s) {
        return s.empty() ? std::string("every record, unweighted") : s;
      };
      return differs("the subset/weights", named(state.selection), named(selection));
    }
    if (state.shuffle != options.shuffle) {
      return differs("shuffle", std::string(ShuffleModeName(state.shuffle)),
                     std::string(ShuffleModeName(options.shuffle)));
    }
    if (options.shuffle == ShuffleMode::kWindowed &&
        state.shuffle_window != options.shuffle_window) {
      return differs("shuffle_window", std::to_string(state.shuffle_window),
                     std::to_string(options.shuffle_window));
    }
    if (options.shuffle == ShuffleMode::kShards && state.world_size != options.world_size) {
      return differs("world_size (shuffle 'shards' ties the order to it)",
                     std::to_string(state.world_size), std::to_string(options.world_size));
    }
    if (state.last_batch != options.last_batch) {
      return differs("last_batch", std::string(LastBatchName(state.last_batch)),
                     std::string(LastBatchName(options.last_batch)));
    }
    const EpochSequence sequence(reader.info(), options, state.epoch);
    if (state.position == sequence.length()) return sequence.batches();
    if (state.position > sequence.length() || state.position % sequence.global_batch_size() != 0) {
      return Status::InvalidArgument(
          "cannot resume: position " + std::to_string(state.position) + " of epoch " +
          std::to_string(state.epoch) + " (saved with a global batch of " +
          std::to_string(state.global_batch_size) +
          ") is not the start of a global batch of this loader (batch_size " +
          std::to_string(options.batch_size) + " x world_size " +
          std::to_string(options.world_size) + " = " +
          std::to_string(sequence.global_batch_size()) + ", epoch of " +
          std::to_string(sequence.length()) + ")");
    }
    return state.position / sequence.global_batch_size();
  }

  Result<std::shared_ptr<const Batch>> Next() override {
    const Clock::time_point start = Clock::now();
    std::unique_lock lock(mutex_);
    if (next_deliver_ >= batches_) return std::shared_ptr<const Batch>();
    ready_cv_.wait(lock, [&] { return ready_.count(next_deliver_) > 0; });
    Finished finished = std::move(ready_.at(next_deliver_));
    ready_.erase(next_deliver_);
    ++next_deliver_;
    stats_.consumer_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    work_.notify_all();  // the prefetch window moved
    if (!finished.status.ok()) {
      if (finished.pooled != nullptr) free_.push_back(finished.pooled);
      return finished.status;
    }
    // The batch goes back to the free list when the consumer's last reference goes.
    PooledBatch* pooled = finished.pooled;
    return std::shared_ptr<const Batch>(&pooled->batch, [pool = pool_, pooled](const Batch*) {
      std::lock_guard guard(pool->mutex);
      if (pool->owner != nullptr) pool->owner->Release(pooled);
    });
  }

  std::uint64_t batches_per_epoch() const override {
    std::lock_guard lock(mutex_);
    return batches_;
  }
  std::uint64_t records_per_epoch() const override {
    std::lock_guard lock(mutex_);
    return sequence_.Plan(options_.rank).records;
  }
  EpochPlan plan() const override {
    std::lock_guard lock(mutex_);
    return sequence_.Plan(options_.rank);
  }
  LoaderStats stats() const override {
    const Reader::RemoteStats remote = reader_->remote_stats();
    std::lock_guard lock(mutex_);
    LoaderStats stats = stats_;
    stats.remote_requests = remote.requests;
    stats.remote_bytes = remote.bytes;
    return stats;
  }

  void Release(PooledBatch* pooled) {
    std::lock_guard lock(mutex_);
    free_.push_back(pooled);
    work_.notify_all();
  }

 private:
  struct Finished {
    PooledBatch* pooled = nullptr;
    Status status;
  };

  static std::size_t RoundUp(std::size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

  // A new buffer for the pool. REQUIRES: mutex_ held, or the constructor.
  PooledBatch* NewBuffer() {
    const std::uint32_t side =
        options_.transform == TransformKind::kNone ? 0 : options_.output_size;
    const std::size_t bytes = std::size_t{side} * side * 3 * options_.batch_size;
    auto pooled = std::make_unique<PooledBatch>();
    if (options_.pin_memory && bytes > 0 && cuda::DeviceCount() > 0) {
      pooled->memory = static_cast<std::uint8_t*>(cuda::AllocatePinned(bytes));
    }
    pooled->pinned = pooled->memory != nullptr;
    if (!pooled->pinned && bytes > 0) {
      pooled->memory = static_cast<std::uint8_t*>(std::aligned_alloc(4096, RoundUp(bytes)));
      if (pooled->memory == nullptr) throw std::bad_alloc();
      // Fault the pages in now, once, rather than in the first epoch's decodes.
      std::memset(pooled->memory, 0, bytes);
    }
    BatchFiller::Setup(pooled->batch, pooled->memory, pooled->pinned, options_.batch_size, side,
                       side, field_indices_.size());
    pool_->buffers.push_back(std::move(pooled));
    return pool_->buffers.back().get();
  }

  // Starts `epoch` at `first_batch` (O(1): the sequence is computed by position, not stored).
  // REQUIRES: mutex_ held, or the constructor.
  void BeginEpoch(std::uint64_t epoch, std::uint64_t first_batch) {
    ++generation_;
    epoch_ = epoch;
    sequence_ = EpochSequence(reader_->info(), options_, epoch);
    batches_ = sequence_.batches();
    next_claim_ = std::min(first_batch, batches_);
    next_deliver_ = next_claim_;
    for (auto& [index, finished] : ready_) {
      if (finished.pooled != nullptr) free_.push_back(finished.pooled);
    }
    ready_.clear();
    // Batches of the old sequence still in flight: none of their chunks are handed out from now
    // on; one that no worker holds goes back now, the others when their last chunk is done.
    for (const std::shared_ptr<Filling>& filling : filling_) {
      filling->chunks = filling->claimed;
      if (filling->claimed == filling->done) free_.push_back(filling->pooled);
    }
    filling_.clear();
  }

  // A batch in flight. Its chunks are claimed under mutex_ and filled without it; the worker
  // that completes the last chunk closes the batch and posts it.
  struct Filling {
    std::uint64_t index = 0;
    std::uint64_t generation = 0;
    std::uint64_t epoch = 0;
    PooledBatch* pooled = nullptr;
    std::vector<std::uint64_t> records;
    std::vector<std::uint8_t> filled;  // per image: 1 once decoded into its slot
    std::uint32_t padded = 0;
    std::uint32_t chunk = 1;   // images per claim
    std::uint32_t chunks = 1;  // claims in all; cut short once a chunk failed or the epoch moved
    std::uint32_t claimed = 0;
    std::uint32_t done = 0;
    Status error;  // of the first failing record in batch order (OnBadRecord::kFail)
    std::uint32_t error_at = ~std::uint32_t{0};
  };

  struct ChunkOutcome {
    Status status;
    std::uint32_t at = 0;  // the failing image's position in the batch
  };

  bool CanStartBatch() const {
    return next_claim_ < batches_ && next_claim_ < next_deliver_ + options_.prefetch_batches;
  }

  // Claims the epoch's next batch and queues it for filling. REQUIRES: mutex_ held,
  // CanStartBatch().
  void StartBatch() {
    const std::uint64_t index = next_claim_++;
    // At most prefetch_batches batches are in flight; the pool only grows when the consumer
    // holds on to batches it was given.
    PooledBatch* pooled = nullptr;
    if (!free_.empty()) {
      pooled = free_.back();
      free_.pop_back();
    } else {
      try {
        pooled = NewBuffer();
      } catch (const std::bad_alloc&) {
        ready_.emplace(
            index,
            Finished{nullptr, Status::Internal("out of memory for a batch buffer of " +
                                               std::to_string(options_.batch_size) + " images")});
        ready_cv_.notify_all();
        return;
      }
    }
    auto filling = std::make_shared<Filling>();
    filling->index = index;
    filling->generation = generation_;
    filling->epoch = epoch_;
    filling->pooled = pooled;
    const auto [begin, end] = sequence_.Slice(index, options_.rank);
    for (std::uint64_t position = begin; position < end; ++position) {
      filling->records.push_back(sequence_.At(position));
    }
    const std::uint64_t real_end = std::max(begin, std::min(end, sequence_.unpadded()));
    filling->padded = static_cast<std::uint32_t>(end - real_end);
    const auto images = static_cast<std::uint32_t>(filling->records.size());
    filling->filled.assign(images, 0);
    if (options_.transform == TransformKind::kNone) {
      filling->chunk = std::max(1u, images);
    } else {
      filling->chunk = std::clamp(images / threads_, 1u, kMaxChunk);
    }
    filling->chunks = std::max(1u, (images + filling->chunk - 1) / filling->chunk);
    // A dataset at a URL starts fetching the batch's records now, coalesced, while the workers
    // finish the batches before it: the prefetch depth covers the network's latency.
    reader_->WillNeed(filling->records);
    BatchFiller::Reset(pooled->batch, epoch_, index);
    filling_.push_back(std::move(filling));
    work_.notify_all();
  }

  void Work() {
    ReadScratch read_scratch;
    DecodeScratch decode_scratch;
    std::unique_lock lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || !filling_.empty() || CanStartBatch(); });
      if (stop_) return;
      if (filling_.empty()) {
        StartBatch();
        continue;
      }
      const std::shared_ptr<Filling> filling = filling_.front();
      const std::uint32_t chunk = filling->claimed++;
      if (filling->claimed == filling->chunks) filling_.pop_front();
      lock.unlock();

      const Clock::time_point start = Clock::now();
      ChunkOutcome outcome;
      try {
        outcome = FillChunk(*filling, chunk, read_scratch, decode_scratch);
      } catch (const std::exception& error) {
        outcome = {Status::Internal(std::string("loader worker failed: ") + error.what()),
                   chunk * filling->chunk};
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

      lock.lock();
      stats_.decode_seconds += seconds;
      if (!outcome.status.ok() && outcome.at < filling->error_at) {
        filling->error = std::move(outcome.status);
        filling->error_at = outcome.at;
        StopClaims(filling);  // the batch fails: its later chunks are not needed
      }
      if (++filling->done < filling->chunks) continue;
      if (stop_) return;
      // The last chunk: close the batch (moving images when records were skipped) and post it.
      const bool current = filling->generation == generation_;
      if (current && filling->error.ok() && options_.transform != TransformKind::kNone) {
        lock.unlock();
        BatchFiller::Close(filling->pooled->batch, filling->filled);
        lock.lock();
        if (stop_) return;
      }
      Post(*filling);
    }
  }

  // No more chunks of `filling` are handed out. REQUIRES: mutex_ held.
  void StopClaims(const std::shared_ptr<Filling>& filling) {
    if (filling->claimed == filling->chunks) return;
    filling->chunks = filling->claimed;
    filling_.erase(std::find(filling_.begin(), filling_.end(), filling));
  }

  // Hands a batch whose chunks are all done to the consumer, or its buffer back to the pool when
  // it failed or its epoch was abandoned. REQUIRES: mutex_ held.
  void Post(Filling& filling) {
    Batch& batch = filling.pooled->batch;
    if (filling.generation != generation_) {
      free_.push_back(filling.pooled);
      work_.notify_all();
      return;
    }
    if (!filling.error.ok()) {
      free_.push_back(filling.pooled);
      ready_.emplace(filling.index, Finished{nullptr, filling.error});
      ready_cv_.notify_all();
      work_.notify_all();
      return;
    }
    BatchFiller::SetPadded(batch, filling.padded);
    BatchFiller::AssembleFields(batch);
    stats_.images += batch.size();
    stats_.skipped += batch.skipped();
    ready_.emplace(filling.index, Finished{filling.pooled, Status::OK()});
    ready_cv_.notify_all();
  }

  ChunkOutcome FillChunk(Filling& filling, std::uint32_t chunk, ReadScratch& read_scratch,
                         DecodeScratch& decode_scratch) const {
    Batch& batch = filling.pooled->batch;
    const auto images = static_cast<std::uint32_t>(filling.records.size());
    const std::uint32_t first = chunk * filling.chunk;
    const std::uint32_t last = std::min(images, first + filling.chunk);
    for (std::uint32_t i = first; i < last; ++i) {
      if (stop_.load(std::memory_order_relaxed)) return {};  // checked without the lock
      Status status =
          FillOne(batch, filling.epoch, filling.records[i], i, read_scratch, decode_scratch)
              .WithRecordIndex(filling.records[i]);
      if (status.ok()) {
        filling.filled[i] = 1;
        continue;
      }
      if (options_.on_bad_record == OnBadRecord::kSkip) {
        if (options_.transform == TransformKind::kNone) BatchFiller::Skip(batch);
        continue;
      }
      return {std::move(status), i};
    }
    return {};
  }

  // Reads record `record` into position `slot` of the batch: appended in order for kNone,
  // decoded into Slot(batch, slot) otherwise.
  Status FillOne(Batch& batch, std::uint64_t epoch, std::uint64_t record, std::uint32_t slot,
                 ReadScratch& read_scratch, DecodeScratch& decode_scratch) const {
    Result<RecordView> view = reader_->Read(record, read_scratch);
    if (!view.ok()) return view.status();
    const auto where = [&] {
      return "record " + std::to_string(record) + " (key '" + std::string(view->key) + "')";
    };
    if (options_.transform == TransformKind::kNone) {
      BatchFiller::AppendEncoded(batch, view->bytes);
      // Appended in order: the record's place is the batch's size before the commit.
      BatchFiller::StageFields(batch, batch.size(), *view, field_indices_);
      BatchFiller::Commit(batch, view->label, record);
      return Status::OK();
    }
    DecodeRequest request;
    request.out_width = options_.output_size;
    request.out_height = options_.output_size;
    request.limits = options_.limits;
    bool flip = false;
    if (options_.transform == TransformKind::kEval) {
      request.region = [this](std::uint32_t w, std::uint32_t h) {
        return EvalRegion(w, h, options_);
      };
    } else {
      request.region = [&](std::uint32_t w, std::uint32_t h) {
        return TrainRegion(w, h, options_, epoch, record, &flip);
      };
    }
    // The flip is decided with the region, once the size is known; applied after the decode.
    Status decoded =
        DecodeInto(view->bytes, request, BatchFiller::Slot(batch, slot), decode_scratch);
    if (!decoded.ok()) return decoded.WithContext(where() + " does not decode");
    if (flip) {
      FlipHorizontal(BatchFiller::Slot(batch, slot), options_.output_size, options_.output_size);
    }
    BatchFiller::StageFields(batch, slot, *view, field_indices_);
    BatchFiller::Place(batch, slot, view->label, record);
    return Status::OK();
  }

  const std::shared_ptr<const Reader> reader_;
  const LoaderOptions options_;
  const std::string fingerprint_;
  const std::string selection_;                   // SelectionFingerprint(options_)
  const std::vector<std::size_t> field_indices_;  // the requested fields, in the schema
  const std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();

  // Images per chunk at most: enough that a claim's lock is noise next to the decodes, few
  // enough that a batch spreads over every thread.
  static constexpr std::uint32_t kMaxChunk = 8;
  unsigned threads_ = 1;

  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable ready_cv_;
  std::atomic<bool> stop_{false};  // set under mutex_ (for the waits), read without it in FillChunk
  std::uint64_t generation_ = 0;
  std::uint64_t epoch_ = 0;
  EpochSequence sequence_;
  std::uint64_t batches_ = 0;
  std::uint64_t next_claim_ = 0;
  std::uint64_t next_deliver_ = 0;
  std::vector<PooledBatch*> free_;
  std::deque<std::shared_ptr<Filling>> filling_;  // batches with chunks to hand out, oldest first
  std::map<std::uint64_t, Finished> ready_;
  LoaderStats stats_;
  std::vector<std::thread> workers_;
  Status started_;
};

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const Reader> reader,
                                               const LoaderOptions& options,
                                               const std::optional<LoaderState>& resume_from) {
  if (reader == nullptr) return Status::InvalidArgument("no reader");
  PACKREC_RETURN_IF_ERROR(ValidateOptions(options));
  PACKREC_RETURN_IF_ERROR(ValidateSelection(options, reader->size()));
  PACKREC_ASSIGN_OR_RETURN(std::vector<std::size_t> field_indices,
                           FieldIndices(reader->info(), options));
  if (options.shuffle == ShuffleMode::kShards) {
    const std::size_t files = std::max<std::size_t>(1, reader->info().files.size());
    if (files % options.world_size != 0) {
      return Status::InvalidArgument("shuffle 'shards' gives each rank its own files: world_size " +
                                     std::to_string(options.world_size) +
                                     " must divide the dataset's " + std::to_string(files) +
                                     " file(s) (convert with a smaller --shard-size for more)");
    }
    if (options.last_batch == LastBatch::kShort) {
      return Status::InvalidArgument(
          "shuffle 'shards' needs last_batch pad or drop: ranks hold different record counts, "
          "and every rank must take the same number of steps");
    }
  }
  std::uint64_t epoch = 0;
  std::uint64_t first_batch = 0;
  if (resume_from) {
    Result<std::uint64_t> first =
        LoaderImpl::FirstBatchOf(*resume_from, *reader, options, DatasetFingerprint(reader->info()),
                                 SelectionFingerprint(options));
    if (!first.ok()) return first.status();
    epoch = resume_from->epoch;
    first_batch = *first;
  }
  // The batch pool is allocated here (batch_size x H x W x 3 bytes per buffer): a size the
  // machine cannot hold is an error value, as loader.h promises, not a std::bad_alloc.
  std::unique_ptr<LoaderImpl> loader;
  try {
    loader = std::make_unique<LoaderImpl>(std::move(reader), options, std::move(field_indices),
                                          epoch, first_batch);
  } catch (const std::bad_alloc&) {
    return Status::Internal("out of memory allocating the loader's batch buffers (batch_size " +
                            std::to_string(options.batch_size) + ", output_size " +
                            std::to_string(options.output_size) + ", prefetch_batches " +
                            std::to_string(options.prefetch_batches) + ")");
  }
  if (!loader->started().ok()) return loader->started();
  return std::unique_ptr<Loader>(std::move(loader));
}

}  // namespace packrec
