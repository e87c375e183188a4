// io_uring through Debian's liburing (the only file that includes liburing.h): keeps `depth`
// reads in flight on one thread, which is how a single reader reaches a device's parallelism
// without a thread per outstanding request.
#include <liburing.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_internal.h"

namespace packrec::bench {
namespace {

class Ring {
 public:
  ~Ring() {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  // One thread submits and reaps, so the kernel may run completions only when asked
  // (DEFER_TASKRUN, Linux 6.1): fewer interrupts of the submitting thread. Older kernels refuse
  // the flags, and get a plain ring.
  int Init(unsigned depth) {
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = io_uring_queue_init_params(depth, &ring_, &params);
    if (rc == -EINVAL) rc = io_uring_queue_init(depth, &ring_, 0);
    ready_ = rc == 0;
    return rc;
  }
  io_uring* get() { return &ring_; }

 private:
  io_uring ring_{};
  bool ready_ = false;
};

}  // namespace

std::string UringUnavailable() {
  Ring ring;
  const int rc = ring.Init(1);
  if (rc == 0) return "";
  return std::string("io_uring_queue_init: ") + std::strerror(-rc);
}

Result<IoCount> UringRead(const std::vector<IoRequest>& requests, unsigned depth,
                          const Deadline& deadline) {
  if (depth == 0) return Status::InvalidArgument("io_uring queue depth must be at least 1");
  std::uint32_t largest = 4096;
  for (const IoRequest& request : requests) largest = std::max(largest, request.length);
  const std::size_t slot_bytes = (std::size_t{largest} + 4095) / 4096 * 4096;
  std::vector<AlignedBuffer> slots;
  for (unsigned i = 0; i < depth; ++i) {
    slots.push_back(AllocateAligned(slot_bytes));
    if (slots.back() == nullptr) return Status::IOError("io_uring: out of memory for buffers");
  }
  Ring ring;
  if (const int rc = ring.Init(depth); rc != 0) {
    return Status::NotSupported(std::string("io_uring_queue_init: ") + std::strerror(-rc));
  }
  std::vector<unsigned> free_slots;
  for (unsigned i = depth; i-- > 0;) free_slots.push_back(i);
  IoCount count;
  std::size_t next = 0;
  unsigned in_flight = 0;
  // After an error nothing more is submitted, but the reads in flight are waited for: they write
  // into `slots`, which must outlive them.
  Status failure;
  const auto start = Clock::now();
  for (;;) {
    while (failure.ok() && next < requests.size() && !free_slots.empty() &&
           (next < depth || !deadline.passed())) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
      if (sqe == nullptr) break;
      const unsigned slot = free_slots.back();
      free_slots.pop_back();
      const IoRequest& request = requests[next++];
      io_uring_prep_read(sqe, request.fd, slots[slot].get(), request.length, request.offset);
      io_uring_sqe_set_data64(sqe, slot);
      ++in_flight;
    }
    if (in_flight == 0) break;
    if (const int rc = io_uring_submit_and_wait(ring.get(), 1); rc < 0 && failure.ok()) {
      failure = Status::IOError(std::string("io_uring_submit: ") + std::strerror(-rc));
    }
    unsigned seen = 0;
    unsigned head = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(ring.get(), head, cqe) {
      ++seen;
      if (cqe->res < 0) {
        if (failure.ok()) {
          failure = Status::IOError(std::string("io_uring read: ") + std::strerror(-cqe->res));
        }
      } else {
        count.bytes += static_cast<std::uint64_t>(cqe->res);
        ++count.requests;
      }
      free_slots.push_back(static_cast<unsigned>(io_uring_cqe_get_data64(cqe)));
    }
    io_uring_cq_advance(ring.get(), seen);
    in_flight -= seen;
  }
  if (!failure.ok()) return failure;
  count.seconds = SecondsSince(start);
  return count;
}

}  // namespace packrec::bench
