// Reads many small byte ranges of remote objects (records of a batch) in few requests: the ranges
// are sorted by object and offset, neighbours closer than RemoteOptions::coalesce_gap_bytes are
// merged into one request of at most max_request_bytes, and the requests run in parallel
// (ObjectStore::Fetch). Also keeps ranges fetched ahead of their reads (Stage), so a reader whose
// loader announces its batches finds the bytes waiting.
//
// Threading: every method may be called from any thread. fork(): a child ignores what its parent
// staged (the thread fetching it does not exist there) and reads on demand.
#ifndef PACKREC_LIB_STORAGE_RANGE_FETCHER_H_
#define PACKREC_LIB_STORAGE_RANGE_FETCHER_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "storage/block_cache.h"
#include "storage/object_store.h"

namespace packrec {

// Bytes [begin, end) of object `object` (an index into the fetcher's object names), wanted as
// item `key` (a record index).
struct WantedRange {
  std::uint64_t key = 0;
  std::size_t object = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

class RangeFetcher {
 public:
  // `cache`: where fetches go first when the dataset is read through a disk cache; else null.
  RangeFetcher(std::shared_ptr<ObjectStore> store, std::vector<std::string> object_names,
               std::unique_ptr<BlockCache> cache);
  ~RangeFetcher();
  RangeFetcher(const RangeFetcher&) = delete;
  RangeFetcher& operator=(const RangeFetcher&) = delete;

  // Fetches every range now, coalesced, and calls `on_range(i, bytes)` for ranges[i] in order;
  // stops at the first error (of a request or of `on_range`).
  using OnRange = std::function<Status(std::size_t, std::span<const std::byte>)>;
  Status FetchNow(std::span<const WantedRange> ranges, const OnRange& on_range) const;

  // Starts fetching `ranges` in the background (keys already staged are skipped). Dropped when
  // the staged bytes would pass RemoteOptions::staging_limit_bytes.
  void Stage(std::vector<WantedRange> ranges) const;

  // When `key` was staged: waits for its fetch, copies its bytes into `out`, forgets them and
  // returns true. False when it was not staged or its fetch failed: the caller fetches it now.
  bool TakeStaged(std::uint64_t key, std::vector<std::byte>& out) const;

  // The whole-object xxHash64 of object `object` (`size` bytes), streamed in windows.
  Result<std::uint64_t> HashObject(std::size_t object, std::uint64_t size) const;

  const ObjectStore& store() const { return *store_; }
  const BlockCache* cache() const { return cache_.get(); }

  // Fetches ranges now, through the cache when there is one (ObjectStore::Fetch).
  Status Fetch(std::span<const ObjectStore::Range> ranges,
               const std::atomic<bool>* cancel = nullptr) const;

 private:
  struct Batch;
  struct Staged {
    std::shared_ptr<Batch> batch;
    std::size_t window = 0;  // which of the batch's requests holds the range
    std::uint64_t skip = 0;  // where the range starts in that request's bytes
    std::uint64_t size = 0;
  };
  void FetchLoop() const;

  std::shared_ptr<ObjectStore> store_;
  std::vector<std::string> names_;
  std::unique_ptr<BlockCache> cache_;
  pid_t owner_pid_;

  mutable std::mutex mutex_;
  mutable std::condition_variable work_;
  mutable std::unordered_map<std::uint64_t, Staged> staged_;
  mutable std::uint64_t staged_bytes_ = 0;
  mutable std::deque<std::shared_ptr<Batch>> queue_;
  // Started by the first Stage: a few batches are fetched at once, so that the loader's prefetch
  // depth, not one batch's round trips, bounds what latency is hidden.
  mutable std::vector<std::thread> threads_;
  mutable bool stop_ = false;
  std::atomic<bool> cancel_{false};  // set by the destructor: the staged fetch in flight ends
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_RANGE_FETCHER_H_
