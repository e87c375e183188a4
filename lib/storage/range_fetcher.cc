#include "storage/range_fetcher.h"

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "core/checksum.h"
#include "core/threads.h"

namespace packrec {
namespace {

// One request: bytes [begin, end) of one object.
struct Window {
  std::size_t object = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::vector<std::byte> bytes;
};

struct Placement {
  std::size_t window = 0;
  std::uint64_t skip = 0;  // where the range starts inside the window
};

// Sorts the ranges by object and offset and merges neighbours into windows; placements[i] says
// where ranges[i] lands.
void Coalesce(std::span<const WantedRange> ranges, const RemoteOptions& options,
              std::vector<Window>& windows, std::vector<Placement>& placements) {
  std::vector<std::size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(ranges[a].object, ranges[a].begin) <
           std::tie(ranges[b].object, ranges[b].begin);
  });
  placements.assign(ranges.size(), {});
  for (const std::size_t i : order) {
    const WantedRange& range = ranges[i];
    const bool joins =
        !windows.empty() && windows.back().object == range.object &&
        range.begin <= windows.back().end + options.coalesce_gap_bytes &&
        std::max(windows.back().end, range.end) - windows.back().begin <= options.max_request_bytes;
    if (joins) {
      windows.back().end = std::max(windows.back().end, range.end);
    } else {
      windows.push_back({range.object, range.begin, range.end, {}});
    }
    placements[i] = {windows.size() - 1, range.begin - windows.back().begin};
  }
}

}  // namespace

struct RangeFetcher::Batch {
  std::vector<Window> windows;
  bool done = false;  // guarded by the fetcher's mutex
  Status status;
};

namespace {

Status FetchWindows(const RangeFetcher& fetcher, const std::vector<std::string>& names,
                    std::vector<Window>& windows, const std::atomic<bool>* cancel = nullptr) {
  std::vector<ObjectStore::Range> requests;
  requests.reserve(windows.size());
  for (Window& window : windows) {
    window.bytes.resize(window.end - window.begin);
    requests.push_back({names[window.object], window.begin, window.bytes});
  }
  return fetcher.Fetch(requests, cancel);
}

}  // namespace

RangeFetcher::RangeFetcher(std::shared_ptr<ObjectStore> store, std::vector<std::string> names,
                           std::unique_ptr<BlockCache> cache)
    : store_(std::move(store)),
      names_(std::move(names)),
      cache_(std::move(cache)),
      owner_pid_(getpid()) {}

Status RangeFetcher::Fetch(std::span<const ObjectStore::Range> ranges,
                           const std::atomic<bool>* cancel) const {
  return cache_ ? cache_->Fetch(ranges, cancel) : store_->Fetch(ranges, cancel);
}

RangeFetcher::~RangeFetcher() {
  if (threads_.empty()) return;
  if (getpid() != owner_pid_) {
    // A forked child's copies of the parent's thread handles: those threads do not exist here,
    // so they are neither joined nor destroyed (std::thread would terminate the process). The
    // vector's storage is leaked on purpose.
    new (&threads_) std::vector<std::thread>();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cancel_.store(true);
  work_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

Status RangeFetcher::FetchNow(std::span<const WantedRange> ranges, const OnRange& on_range) const {
  std::vector<Window> windows;
  std::vector<Placement> placements;
  Coalesce(ranges, store_->options(), windows, placements);
  PACKREC_RETURN_IF_ERROR(FetchWindows(*this, names_, windows));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const Window& window = windows[placements[i].window];
    PACKREC_RETURN_IF_ERROR(
        on_range(i, std::span<const std::byte>(window.bytes)
                        .subspan(placements[i].skip, ranges[i].end - ranges[i].begin)));
  }
  return Status::OK();
}

void RangeFetcher::Stage(std::vector<WantedRange> ranges) const {
  if (getpid() != owner_pid_) return;
  std::lock_guard lock(mutex_);
  // A key already staged, or repeated in this call (a batch drawn with repeats), is staged once:
  // staged_bytes_ counts what staged_ holds.
  std::unordered_set<std::uint64_t> seen;
  std::erase_if(ranges, [&](const WantedRange& range) {
    return staged_.contains(range.key) || !seen.insert(range.key).second;
  });
  if (ranges.empty()) return;
  std::uint64_t bytes = 0;
  for (const WantedRange& range : ranges) bytes += range.end - range.begin;
  const std::uint64_t limit = store_->options().staging_limit_bytes;
  if (staged_bytes_ + bytes > limit) {
    // Staged ranges nobody took (an abandoned epoch) go first; what is still in flight stays.
    std::erase_if(staged_, [&](const auto& entry) {
      if (!entry.second.batch->done) return false;
      staged_bytes_ -= entry.second.size;
      return true;
    });
    if (staged_bytes_ + bytes > limit) return;
  }
  // The staging threads, started once (core/threads.h: a refusal is a value, not an abort). With
  // none, nothing is staged: the reads fetch on demand.
  constexpr int kFetchThreads = 4;
  while (threads_.size() < kFetchThreads) {
    Result<std::thread> thread = StartThread("pr-stage", [this] { FetchLoop(); });
    if (!thread.ok()) break;
    threads_.push_back(std::move(*thread));
  }
  if (threads_.empty()) return;
  auto batch = std::make_shared<Batch>();
  std::vector<Placement> placements;
  Coalesce(ranges, store_->options(), batch->windows, placements);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const std::uint64_t size = ranges[i].end - ranges[i].begin;
    staged_[ranges[i].key] = {batch, placements[i].window, placements[i].skip, size};
  }
  staged_bytes_ += bytes;
  queue_.push_back(std::move(batch));
  work_.notify_all();
}

void RangeFetcher::FetchLoop() const {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const std::shared_ptr<Batch> batch = queue_.front();
    queue_.pop_front();
    lock.unlock();
    Status status = FetchWindows(*this, names_, batch->windows, &cancel_);
    lock.lock();
    batch->status = std::move(status);
    batch->done = true;
    work_.notify_all();
  }
}

bool RangeFetcher::TakeStaged(std::uint64_t key, std::vector<std::byte>& out) const {
  if (getpid() != owner_pid_) return false;
  std::unique_lock lock(mutex_);
  const auto found = staged_.find(key);
  if (found == staged_.end()) return false;
  const Staged staged = found->second;
  staged_.erase(found);
  staged_bytes_ -= staged.size;
  work_.wait(lock, [&] { return staged.batch->done; });
  lock.unlock();
  // A batch's windows no longer change once it is done. A failed batch (one of its requests
  // failed for good, perhaps for another record) leaves the read to fetch on its own, so that
  // its error is about its own bytes.
  if (!staged.batch->status.ok()) return false;
  const Window& window = staged.batch->windows[staged.window];
  const auto first = window.bytes.begin() + static_cast<std::ptrdiff_t>(staged.skip);
  out.assign(first, first + static_cast<std::ptrdiff_t>(staged.size));
  return true;
}

Result<std::uint64_t> RangeFetcher::HashObject(std::size_t object, std::uint64_t size) const {
  constexpr std::uint64_t kWindow = 8 << 20;
  const std::uint64_t per_round = std::max<std::uint32_t>(1, store_->options().max_in_flight);
  Xxh64Stream hash;
  std::vector<Window> windows;
  for (std::uint64_t offset = 0; offset < size;) {
    windows.clear();
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(per_round, 4) && offset < size; ++i) {
      const std::uint64_t end = std::min(size, offset + kWindow);
      windows.push_back({object, offset, end, {}});
      offset = end;
    }
    PACKREC_RETURN_IF_ERROR(FetchWindows(*this, names_, windows));
    for (const Window& window : windows) hash.Update(window.bytes);
  }
  return hash.Digest();
}

}  // namespace packrec
