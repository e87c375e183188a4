// Without liburing at build time: the io_uring measurements say why they are missing.
#include "bench/bench_internal.h"

namespace packrec::bench {

std::string UringUnavailable() { return "packrec was built without liburing (liburing-dev)"; }

Result<IoCount> UringRead(const std::vector<IoRequest>&, unsigned, const Deadline&) {
  return Status::NotSupported(UringUnavailable());
}

}  // namespace packrec::bench
