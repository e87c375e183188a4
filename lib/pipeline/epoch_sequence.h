// The loader's epoch order (order.cc): one epoch's global sequence of records, by position, for
// the Loader and the tests that pin it. Not public: LoaderOptions and EpochOrder (loader.h) are
// the contract; how a position maps to a record is docs/loader.md's.
#ifndef PACKREC_LIB_PIPELINE_EPOCH_SEQUENCE_H_
#define PACKREC_LIB_PIPELINE_EPOCH_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "packrec/loader.h"
#include "packrec/reader.h"

namespace packrec {

// One epoch's global sequence, by position, in O(1) time and memory per lookup: shuffles are
// keyed pseudo-random permutations (a Feistel network over the index bits, cycle-walked into
// [0, record_count)), not materialised arrays, so a billion-record epoch costs nothing to set up
// and resuming at any position reads nothing before it.
class EpochSequence {
 public:
  EpochSequence(std::uint64_t record_count, const LoaderOptions& options, std::uint64_t epoch);
  // The dataset's files (kShards assigns them to ranks; the other modes need only the count).
  EpochSequence(const DatasetInfo& info, const LoaderOptions& options, std::uint64_t epoch);

  std::uint64_t global_batch_size() const { return global_batch_; }
  // The sequence's length (padding included) and its global batches.
  std::uint64_t length() const { return length_; }
  std::uint64_t batches() const { return batches_; }
  // The positions before the padding: the records (or subset entries), or the weighted draws.
  std::uint64_t unpadded() const {
    return !cumulative_.empty() && options_.samples_per_epoch > 0 ? options_.samples_per_epoch
                                                                  : draws_default_;
  }
  // The record at `position` < length(); positions past the records repeat the epoch's start.
  std::uint64_t At(std::uint64_t position) const;
  // The positions [begin, end) of `rank`'s part of global batch `batch`.
  std::pair<std::uint64_t, std::uint64_t> Slice(std::uint64_t batch, std::uint32_t rank) const;
  EpochPlan Plan(std::uint32_t rank) const;

 private:
  struct Permutation {
    std::uint64_t size = 0;
    std::uint32_t half_bits = 0;
    std::uint64_t keys[6] = {};
    std::uint64_t Forward(std::uint64_t index) const;
    std::uint64_t Inverse(std::uint64_t index) const;
  };
  // kShards: each rank's files (first record, cumulative record counts) and its shuffle.
  struct RankShare {
    std::vector<std::uint64_t> first_records;
    std::vector<std::uint64_t> ends;  // cumulative record counts within the share
    Permutation order;
  };
  static Permutation MakePermutation(std::uint64_t size, std::uint64_t key);
  std::uint64_t Shuffled(std::uint64_t position) const;
  void AssignShards(const std::vector<DatasetFileInfo>& files);
  std::uint64_t FromShare(std::uint32_t rank, std::uint64_t index) const;

  // The entry at `index` of the base order: a record, or a subset's record.
  std::uint64_t Record(std::uint64_t index) const;
  // Weighted draw `position` (LoaderOptions::weights): an entry, by the cumulative weights.
  std::uint64_t Drawn(std::uint64_t position) const;

  std::uint64_t record_count_ = 0;  // entries the order is over: records, or the subset's
  LoaderOptions options_;
  std::vector<double> cumulative_;   // weights or mix proportions: running sums, for Drawn
  std::uint64_t draws_default_ = 0;  // an epoch's draws without samples_per_epoch
  std::uint64_t epoch_ = 0;
  std::uint64_t global_batch_ = 0;
  std::uint64_t length_ = 0;
  std::uint64_t batches_ = 0;
  Permutation order_;             // kGlobal: of the records; kWindowed: of the windows
  std::uint64_t short_slot_ = 0;  // kWindowed: where the last, short window is visited
  std::shared_ptr<const std::vector<RankShare>> shares_;  // kShards (shared by copies)
};

}  // namespace packrec

#endif  // PACKREC_LIB_PIPELINE_EPOCH_SEQUENCE_H_
