// Without the CUDA toolkit: no device, no pinned memory (the loader uses ordinary aligned memory),
// and an uploader that says why it cannot be made.
#include "packrec/gpu.h"
#include "pipeline/cuda_runtime.h"

namespace packrec {
namespace cuda {

bool Built() { return false; }
int DeviceCount() { return 0; }
std::string Unavailable() { return "packrec was built without CUDA (no toolkit at build time)"; }
void* AllocatePinned(std::size_t) { return nullptr; }
void FreePinned(void*) {}
std::string DeviceName(int) { return Unavailable(); }
Result<CopyTiming> TimeHostToDevice(std::size_t, bool, bool, int, int) {
  return Status::NotSupported(Unavailable());
}

}  // namespace cuda

bool GpuUploader::Available(std::string* why) {
  if (why != nullptr) *why = cuda::Unavailable();
  return false;
}

Result<std::unique_ptr<GpuUploader>> GpuUploader::Create(const GpuUploaderOptions&) {
  return Status::NotSupported(cuda::Unavailable());
}

}  // namespace packrec
