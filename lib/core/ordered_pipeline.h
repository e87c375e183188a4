// The one thread machine of convert: items made in order on one thread, worked on by N threads in
// any order, and taken in order by the caller (the writing thread), in bounded memory.
//
// Convert uses it for both engines: an image folder or list file (making an item claims the next
// listing index; the work reads and probes the file) and another tool's container (making an
// item is the source's own in-order read; the work runs its deferred checks, probes, transcodes
// and checksums). Either way no one thread caps the conversion: reading in order, preparing, and
// writing each have their own.
//
// Memory: the maker waits while `max_items` items, or `max_bytes` of the sizes it gave them, lie
// between making and taking. Threads are woken for a batch of items, not for each one: when the
// other side is the slower one, waking per item made the threads trade a context switch per
// record (about a tenth of a warm import's time, docs/benchmarks.md).
//
// Threading: Take from one thread. The destructor stops the maker and the workers (each checks
// between items) and joins them.
#ifndef PACKREC_LIB_CORE_ORDERED_PIPELINE_H_
#define PACKREC_LIB_CORE_ORDERED_PIPELINE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/threads.h"
#include "packrec/status.h"

namespace packrec {

template <typename Item>
class OrderedPipeline {
 public:
  struct Limits {
    std::size_t max_items = 256;
    std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
  };
  // Fills `item` with the next one and its size for the byte limit; false at the end. An error
  // ends the stream: Take returns it once every item before it was taken.
  using Make = std::function<Result<bool>(Item& item, std::size_t& bytes)>;
  // Works on item number `sequence` on a worker thread; `gaps_before`: how many items before it
  // the work had marked as gaps (returned true for) when it was claimed, a lower bound of the
  // gaps before it. Returns whether this item is a gap (convert: a rejected input).
  using Work = std::function<bool(Item& item, std::uint64_t sequence, std::uint64_t gaps_before)>;

  // Starts `workers` threads named `worker_name` and the maker, named `maker_name`.
  OrderedPipeline(Make make, Work work, unsigned workers, Limits limits, const char* worker_name,
                  const char* maker_name)
      : make_(std::move(make)), work_(std::move(work)), limits_(limits) {
    started_ = StartThreads(workers_, workers, worker_name, [this] { RunWorker(); });
    if (!started_.ok()) return;
    Result<std::thread> maker = StartThread(maker_name, [this] { RunMaker(); });
    if (maker.ok()) {
      maker_ = std::move(*maker);
    } else {
      started_ = maker.status();
    }
  }
  // Whether every thread started; when not, the destructor stops those that did.
  const Status& started() const { return started_; }

  ~OrderedPipeline() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    work_ready_.notify_all();
    if (maker_.joinable()) maker_.join();
    for (std::thread& worker : workers_) worker.join();
  }

  OrderedPipeline(const OrderedPipeline&) = delete;
  OrderedPipeline& operator=(const OrderedPipeline&) = delete;

  // The next item in order; false at the end. The maker's error once every item before it.
  Result<bool> Take(Item& item) {
    std::unique_lock lock(mutex_);
    if (!FrontReady() && !(make_done_ && slots_.empty())) {
      taker_waiting_ = true;
      ready_.wait(lock, [&] { return FrontReady() || (make_done_ && slots_.empty()); });
      taker_waiting_ = false;
    }
    if (slots_.empty()) {
      if (!final_.ok()) return final_;
      return false;
    }
    item = std::move(slots_.front().item);
    queued_bytes_ -= slots_.front().bytes;
    slots_.pop_front();
    ++front_sequence_;
    --ready_count_;
    // A full queue is refilled from half: waking the maker for every item taken cost a context
    // switch per item.
    const bool wake = maker_waiting_ && HalfEmpty();
    lock.unlock();
    if (wake) space_.notify_one();
    return true;
  }

 private:
  static constexpr std::size_t kWakeItems = 16;

  struct Slot {
    Item item;              // moved out while a worker works on it
    std::size_t bytes = 0;  // what it added to queued_bytes_
    bool ready = false;
  };

  bool Full() const {
    return slots_.size() >= limits_.max_items || queued_bytes_ >= limits_.max_bytes;
  }
  bool HalfEmpty() const {
    return slots_.size() <= limits_.max_items / 2 && queued_bytes_ <= limits_.max_bytes / 2;
  }
  bool FrontReady() const { return !slots_.empty() && slots_.front().ready; }
  std::size_t Unclaimed() const { return front_sequence_ + slots_.size() - claim_sequence_; }
  // Worth waking the taker for: its next item is ready, and a batch with it, or the queue is full
  // (the maker waits for space), or the making is done and everything worked on.
  bool TakerBatchReady() const {
    return FrontReady() &&
           (ready_count_ >= kWakeItems || Full() || (make_done_ && ready_count_ == slots_.size()));
  }
  // Worth waking a worker for: a batch to claim, or the last items (the maker is waiting for
  // space, or done).
  bool WorkerBatchReady() const {
    return Unclaimed() >= kWakeItems || (Unclaimed() > 0 && (Full() || make_done_));
  }

  void RunMaker() {
    for (;;) {
      Item item{};
      std::size_t bytes = 0;
      Result<bool> more = make_(item, bytes);
      std::unique_lock lock(mutex_);
      if (!more.ok() || !*more) {
        if (!more.ok()) final_ = more.status();
        make_done_ = true;
        lock.unlock();
        ready_.notify_all();
        work_ready_.notify_all();
        return;
      }
      if (Full()) {
        maker_waiting_ = true;
        space_.wait(lock, [&] { return stop_ || HalfEmpty(); });
        maker_waiting_ = false;
      }
      if (stop_) return;
      queued_bytes_ += bytes;
      slots_.push_back(Slot{std::move(item), bytes, false});
      const bool wake = idle_workers_ > 0 && WorkerBatchReady();
      lock.unlock();
      if (wake) work_ready_.notify_one();
    }
  }

  void RunWorker() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!stop_ && Unclaimed() == 0 && !make_done_) {
        ++idle_workers_;
        work_ready_.wait(lock, [&] { return stop_ || WorkerBatchReady() || make_done_; });
        --idle_workers_;
      }
      // Nothing left to claim now means the making is done (or the pipeline stops): the wait
      // above returns only with an item to claim, at the end, or at stop.
      if (stop_ || Unclaimed() == 0) return;
      const std::uint64_t sequence = claim_sequence_++;
      Item item = std::move(slots_[sequence - front_sequence_].item);
      const std::uint64_t gaps_before = gaps_;
      lock.unlock();

      const bool gap = work_(item, sequence, gaps_before);

      lock.lock();
      if (gap) ++gaps_;
      Slot& slot = slots_[sequence - front_sequence_];
      slot.item = std::move(item);
      slot.ready = true;
      ++ready_count_;
      if (taker_waiting_ && TakerBatchReady()) {
        lock.unlock();
        ready_.notify_one();
        lock.lock();
      }
    }
  }

  const Make make_;
  const Work work_;
  const Limits limits_;
  std::mutex mutex_;
  std::condition_variable ready_;       // the taker waits here for its next item
  std::condition_variable space_;       // the maker waits here for room
  std::condition_variable work_ready_;  // workers wait here for items to work on
  // Items made and not yet taken, in order; slots_[i] is number front_sequence_ + i.
  std::deque<Slot> slots_;
  std::uint64_t front_sequence_ = 0;
  std::uint64_t claim_sequence_ = 0;  // the next item a worker claims
  std::size_t queued_bytes_ = 0;
  std::size_t ready_count_ = 0;  // slots worked on
  std::uint64_t gaps_ = 0;       // items the work marked as gaps so far
  unsigned idle_workers_ = 0;
  bool make_done_ = false;
  bool stop_ = false;
  bool maker_waiting_ = false;
  bool taker_waiting_ = false;
  Status final_;
  std::vector<std::thread> workers_;
  std::thread maker_;  // started last, once everything above exists
  Status started_;
};

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_ORDERED_PIPELINE_H_
