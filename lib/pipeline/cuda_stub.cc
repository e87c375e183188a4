// Without the CUDA toolkit: no device, no pinned memory; the loader uses ordinary aligned memory.
#include "pipeline/cuda_runtime.h"

namespace packrec::cuda {

bool Built() { return false; }
int DeviceCount() { return 0; }
std::string Unavailable() { return "packrec was built without CUDA (no toolkit at build time)"; }
void* AllocatePinned(std::size_t) { return nullptr; }
void FreePinned(void*) {}

}  // namespace packrec::cuda
