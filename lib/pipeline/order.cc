// Epoch orders and the geometry of the eval and train transforms: pure functions of the options,
// the epoch and the record, so every rank and every run computes the same ones.
#include <algorithm>
#include <bit>
#include <cmath>

#include "core/random.h"
#include "packrec/loader.h"
#include "pipeline/epoch_sequence.h"

namespace packrec {
namespace {

// Mixes the seed, the epoch and a stream id into one generator seed (SplitMix64's finalizer on
// each step, so neighbouring epochs or records give unrelated sequences).
std::uint64_t MixSeed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream) {
  SplitMix64 mix(seed);
  std::uint64_t state = mix.Next() ^ epoch;
  SplitMix64 second(state);
  state = second.Next() ^ stream;
  return SplitMix64(state).Next();
}

// SplitMix64's finalizer: a bijective 64-bit mix, the Feistel round function.
std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Streams of MixSeed that no record index reaches (crops use record + 1).
constexpr std::uint64_t kOrderStream = 1ull << 62;
constexpr std::uint64_t kWindowStream = 1ull << 63;
constexpr std::uint64_t kShardStream = 3ull << 62;  // kShards: the file assignment, then ranks
constexpr std::uint64_t kDrawStream = 5ull << 60;   // weights: draw p uses kDrawStream + p

double Uniform(SplitMix64& random) {
  return static_cast<double>(random.Next() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
}

// round(value) clamped to [1, high].
std::uint32_t RoundClamped(double value, std::uint32_t high) {
  return static_cast<std::uint32_t>(std::clamp(std::round(value), 1.0, static_cast<double>(high)));
}

}  // namespace

EpochSequence::Permutation EpochSequence::MakePermutation(std::uint64_t size, std::uint64_t key) {
  Permutation permutation;
  permutation.size = size;
  if (size < 2) return permutation;
  const auto bits = static_cast<std::uint32_t>(std::bit_width(size - 1));  // 2^bits >= size
  permutation.half_bits = (bits + 1) / 2;
  SplitMix64 random(key);
  for (std::uint64_t& round_key : permutation.keys) round_key = random.Next();
  return permutation;
}

// A balanced Feistel network on 2 x half_bits bits is a bijection of [0, 4^half_bits) for any
// round function; cycle walking (apply again until the value is below size) restricts it to a
// bijection of [0, size). 4^half_bits < 4 x size, so a walk takes under four steps on average.
// Six rounds with a full 64-bit mixer leave no pattern a training run could notice.
std::uint64_t EpochSequence::Permutation::Forward(std::uint64_t index) const {
  if (size < 2) return index;
  const std::uint64_t mask = (std::uint64_t{1} << half_bits) - 1;
  do {
    std::uint64_t left = index >> half_bits;
    std::uint64_t right = index & mask;
    for (const std::uint64_t key : keys) {
      const std::uint64_t next = left ^ (Mix(right ^ key) & mask);
      left = right;
      right = next;
    }
    index = (left << half_bits) | right;
  } while (index >= size);
  return index;
}

std::uint64_t EpochSequence::Permutation::Inverse(std::uint64_t index) const {
  if (size < 2) return index;
  const std::uint64_t mask = (std::uint64_t{1} << half_bits) - 1;
  do {
    std::uint64_t left = index >> half_bits;
    std::uint64_t right = index & mask;
    for (int round = 5; round >= 0; --round) {
      const std::uint64_t previous = right ^ (Mix(left ^ keys[round]) & mask);
      right = left;
      left = previous;
    }
    index = (left << half_bits) | right;
  } while (index >= size);
  return index;
}

EpochSequence::EpochSequence(std::uint64_t record_count, const LoaderOptions& options,
                             std::uint64_t epoch)
    : record_count_(options.subset.empty() ? record_count : options.subset.size()),
      options_(options),
      epoch_(epoch) {
  record_count = record_count_;
  draws_default_ = record_count;
  double sum = 0;
  for (const double weight : options.weights) cumulative_.push_back(sum += weight);
  if (!options.mix.empty()) draws_default_ = 0;
  for (const LoaderOptions::MixRange& range : options.mix) {
    cumulative_.push_back(sum += range.proportion);
    draws_default_ += range.count;
  }
  // An epoch of weighted draws is as long as asked (default: one per entry, or per record of the
  // mixed ranges); its padding and dropping then apply to the draws.
  const std::uint64_t drawn = unpadded();
  const std::uint64_t world = std::max<std::uint32_t>(1, options.world_size);
  global_batch_ = std::max<std::uint64_t>(1, options.batch_size) * world;
  const std::uint64_t full = drawn / global_batch_ * global_batch_;
  switch (options.last_batch) {
    case LastBatch::kShort:
      length_ = drawn;
      break;
    case LastBatch::kDrop:
      length_ = full;
      break;
    case LastBatch::kPad:
      length_ = full == drawn ? full : full + global_batch_;
      break;
  }
  batches_ = (length_ + global_batch_ - 1) / global_batch_;
  const std::uint64_t key = MixSeed(options.seed, epoch, kOrderStream);
  if (options.shuffle == ShuffleMode::kGlobal) {
    order_ = MakePermutation(record_count, key);
  } else if (options.shuffle == ShuffleMode::kWindowed && record_count > 0) {
    const std::uint64_t window = std::max<std::uint32_t>(1, options.shuffle_window);
    const std::uint64_t windows = (record_count + window - 1) / window;
    order_ = MakePermutation(windows, key);
    if (record_count % window != 0) short_slot_ = order_.Inverse(windows - 1);
  } else if (options.shuffle == ShuffleMode::kShards) {
    AssignShards({{"", 0, record_count, 0}});  // one file, unless given the dataset's (below)
  }
}

EpochSequence::EpochSequence(const DatasetInfo& info, const LoaderOptions& options,
                             std::uint64_t epoch)
    : EpochSequence(info.record_count, options, epoch) {
  if (options.shuffle != ShuffleMode::kShards) return;
  std::vector<DatasetFileInfo> files = info.files;
  if (files.empty() && info.record_count > 0) files.push_back({"", 0, info.record_count, 0});
  AssignShards(files);
}

// Files go to ranks by a permutation of the files per epoch: file f to rank perm(f) mod world,
// so each rank gets files / world of them, different ones each epoch. Each rank's records are
// then one shuffled stream, and global batch s is every rank's s-th batch of its stream, in rank
// order; the epoch is as long as the smallest share (kDrop) or the largest one, the others
// repeating their own records (kPad).
void EpochSequence::AssignShards(const std::vector<DatasetFileInfo>& files) {
  const std::uint32_t world = std::max<std::uint32_t>(1, options_.world_size);
  const std::uint64_t batch = std::max<std::uint32_t>(1, options_.batch_size);
  auto shares = std::make_shared<std::vector<RankShare>>(world);
  const Permutation assignment =
      MakePermutation(files.size(), MixSeed(options_.seed, epoch_, kShardStream));
  // Rank r's files are those at positions r, r + world, ... of the permuted list, in that order.
  for (std::uint64_t slot = 0; slot < files.size(); ++slot) {
    const DatasetFileInfo& file = files[assignment.Forward(slot)];
    RankShare& share = (*shares)[slot % world];
    share.first_records.push_back(file.first_record);
    share.ends.push_back((share.ends.empty() ? 0 : share.ends.back()) + file.record_count);
  }
  std::uint64_t smallest = ~std::uint64_t{0};
  std::uint64_t largest = 0;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    RankShare& share = (*shares)[rank];
    const std::uint64_t count = share.ends.empty() ? 0 : share.ends.back();
    share.order = MakePermutation(count, MixSeed(options_.seed, epoch_, kShardStream + 1 + rank));
    smallest = std::min(smallest, count);
    largest = std::max(largest, count);
  }
  // A rank without records (fewer files than ranks; the loader refuses that) has nothing to pad
  // with: the epoch is then empty rather than undefined.
  const std::uint64_t per_rank = smallest == 0 ? 0
                                 : options_.last_batch == LastBatch::kPad
                                     ? (largest + batch - 1) / batch * batch
                                     : smallest / batch * batch;
  length_ = per_rank * world;
  batches_ = per_rank / batch;
  shares_ = std::move(shares);
}

std::uint64_t EpochSequence::FromShare(std::uint32_t rank, std::uint64_t index) const {
  const RankShare& share = (*shares_)[rank];
  const std::uint64_t count = share.ends.back();
  const std::uint64_t local = share.order.Forward(index < count ? index : index % count);
  const auto file = static_cast<std::size_t>(
      std::upper_bound(share.ends.begin(), share.ends.end(), local) - share.ends.begin());
  return share.first_records[file] + local - (file == 0 ? 0 : share.ends[file - 1]);
}

std::uint64_t EpochSequence::Shuffled(std::uint64_t position) const {
  if (options_.shuffle == ShuffleMode::kNone) return position;
  if (options_.shuffle == ShuffleMode::kGlobal) return order_.Forward(position);
  // kWindowed: slot k of the visiting order holds window order_.Forward(k); all windows are
  // full but the last one, whose slot is short_slot_, so positions map to slots by division on
  // either side of it.
  const std::uint64_t window = std::max<std::uint32_t>(1, options_.shuffle_window);
  const std::uint64_t short_size = record_count_ % window;
  std::uint64_t slot = position / window;
  std::uint64_t offset = position % window;
  if (short_size != 0 && position >= short_slot_ * window) {
    const std::uint64_t into = position - short_slot_ * window;
    if (into < short_size) {
      slot = short_slot_;
      offset = into;
    } else {
      slot = short_slot_ + 1 + (into - short_size) / window;
      offset = (into - short_size) % window;
    }
  }
  const std::uint64_t visited = order_.Forward(slot);
  const std::uint64_t size = (short_size != 0 && visited == order_.size - 1) ? short_size : window;
  const Permutation inside =
      MakePermutation(size, MixSeed(options_.seed, epoch_, kWindowStream | visited));
  return visited * window + inside.Forward(offset);
}

std::uint64_t EpochSequence::Record(std::uint64_t index) const {
  return options_.subset.empty() ? index : options_.subset[index];
}

// A uniform point in [0, total weight), from (seed, epoch, position) alone, and the entry whose
// cumulative range holds it: entries of weight 0 are never drawn.
std::uint64_t EpochSequence::Drawn(std::uint64_t position) const {
  SplitMix64 random(MixSeed(options_.seed, epoch_, kDrawStream + position));
  const double point = Uniform(random) * cumulative_.back();
  const auto entry = std::upper_bound(cumulative_.begin(), cumulative_.end(), point);
  // Rounding could put the point at the very end: the last entry with weight takes it.
  const auto index = static_cast<std::uint64_t>(
      entry == cumulative_.end()
          ? std::lower_bound(cumulative_.begin(), cumulative_.end(), cumulative_.back()) -
                cumulative_.begin()
          : entry - cumulative_.begin());
  if (options_.mix.empty()) return Record(index);
  // A mix: then one record of the range, uniformly (64 random bits: no visible modulo bias).
  const LoaderOptions::MixRange& range = options_.mix[index];
  return range.first + random.Next() % range.count;
}

std::uint64_t EpochSequence::At(std::uint64_t position) const {
  if (shares_ != nullptr) {
    const std::uint64_t batch = std::max<std::uint32_t>(1, options_.batch_size);
    const std::uint64_t step = position / global_batch_;
    const std::uint64_t within = position % global_batch_;
    return FromShare(static_cast<std::uint32_t>(within / batch), step * batch + within % batch);
  }
  if (!cumulative_.empty()) {
    const std::uint64_t drawn = unpadded();
    return Drawn(position < drawn ? position : position % drawn);  // kPad repeats the first
  }
  return Record(Shuffled(position < record_count_ ? position : position % record_count_));
}

std::pair<std::uint64_t, std::uint64_t> EpochSequence::Slice(std::uint64_t batch,
                                                             std::uint32_t rank) const {
  const std::uint64_t world = std::max<std::uint32_t>(1, options_.world_size);
  const std::uint64_t begin = batch * global_batch_;
  const std::uint64_t size = std::min(global_batch_, length_ - std::min(length_, begin));
  // A full global batch gives each rank batch_size records; a short one is split as evenly as
  // it goes, the first (size % world) ranks taking one more.
  const std::uint64_t base = size / world;
  const std::uint64_t extra = size % world;
  const std::uint64_t first = begin + rank * base + std::min<std::uint64_t>(rank, extra);
  return {first, first + base + (rank < extra ? 1 : 0)};
}

EpochPlan EpochSequence::Plan(std::uint32_t rank) const {
  EpochPlan plan;
  plan.global_records = length_;
  plan.batches = batches_;
  if (batches_ > 0) {
    const auto [begin, end] = Slice(batches_ - 1, rank);
    plan.records =
        (batches_ - 1) * (global_batch_ / std::max<std::uint32_t>(1, options_.world_size)) +
        (end - begin);
  }
  const std::uint64_t entries = unpadded();
  plan.padded = length_ > entries ? length_ - entries : 0;
  plan.dropped = entries - std::min(entries, length_);
  if (shares_ != nullptr) {  // per rank: padding up to, or records past, the epoch's length
    plan.padded = plan.dropped = 0;
    const std::uint64_t per_rank = length_ / std::max<std::uint32_t>(1, options_.world_size);
    for (const RankShare& share : *shares_) {
      const std::uint64_t count = share.ends.empty() ? 0 : share.ends.back();
      plan.padded += per_rank > count ? per_rank - count : 0;
      plan.dropped += count > per_rank ? count - per_rank : 0;
    }
  }
  return plan;
}

std::vector<std::uint64_t> EpochOrder(std::uint64_t record_count, const LoaderOptions& options,
                                      std::uint64_t epoch) {
  const EpochSequence sequence(record_count, options, epoch);
  std::vector<std::uint64_t> order;
  order.reserve(sequence.Plan(options.rank).records);
  for (std::uint64_t batch = 0; batch < sequence.batches(); ++batch) {
    const auto [begin, end] = sequence.Slice(batch, options.rank);
    for (std::uint64_t position = begin; position < end; ++position) {
      order.push_back(sequence.At(position));
    }
  }
  return order;
}

Rect EvalRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options) {
  // torchvision: Resize(resize_size) on the shorter side, then CenterCrop(output_size). The crop
  // in source pixels is output_size / scale, centred.
  const double scale = static_cast<double>(options.resize_size) / std::min(width, height);
  const std::uint32_t side_w = RoundClamped(options.output_size / scale, width);
  const std::uint32_t side_h = RoundClamped(options.output_size / scale, height);
  return {(width - side_w) / 2, (height - side_h) / 2, side_w, side_h};
}

Rect TrainRegion(std::uint32_t width, std::uint32_t height, const LoaderOptions& options,
                 std::uint64_t epoch, std::uint64_t record_index, bool* flip) {
  // torchvision.transforms.RandomResizedCrop.get_params, step for step.
  SplitMix64 random(MixSeed(options.seed, epoch, record_index + 1));
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(options.min_ratio);
  const double log_max = std::log(options.max_ratio);
  Rect region{0, 0, width, height};
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target =
        area * (options.min_scale + (options.max_scale - options.min_scale) * Uniform(random));
    const double ratio = std::exp(log_min + (log_max - log_min) * Uniform(random));
    const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target * ratio)));
    const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      region.width = static_cast<std::uint32_t>(w);
      region.height = static_cast<std::uint32_t>(h);
      region.y = static_cast<std::uint32_t>(random.Below(height - region.height + 1));
      region.x = static_cast<std::uint32_t>(random.Below(width - region.width + 1));
      found = true;
    }
  }
  if (!found) {  // a central crop at the nearest allowed aspect ratio
    const double ratio = static_cast<double>(width) / height;
    if (ratio < options.min_ratio) {
      region.width = width;
      region.height = RoundClamped(width / double{options.min_ratio}, height);
    } else if (ratio > options.max_ratio) {
      region.height = height;
      region.width = RoundClamped(height * double{options.max_ratio}, width);
    }
    region.x = (width - region.width) / 2;
    region.y = (height - region.height) / 2;
  }
  *flip = options.random_flip && (random.Next() >> 63) != 0;
  return region;
}

}  // namespace packrec
