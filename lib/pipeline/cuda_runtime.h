// The few CUDA runtime calls the host side of the pipeline needs, so only cuda_runtime.cu (built
// when the toolkit is found) includes CUDA headers; cuda_stub.cc stands in without it.
#ifndef PACKREC_LIB_PIPELINE_CUDA_RUNTIME_H_
#define PACKREC_LIB_PIPELINE_CUDA_RUNTIME_H_

#include <cstddef>
#include <string>

#include "packrec/status.h"

namespace packrec::cuda {

// Whether packrec was built with the CUDA toolkit.
bool Built();
// Usable devices now: 0 without CUDA, without a driver or without a device.
int DeviceCount();
// Why DeviceCount() is 0, in words a user can act on: built without CUDA, no NVIDIA driver, a
// driver too old for the CUDA runtime packrec was built with (and the branch it needs), a driver
// that sees no GPU, or the runtime's own error.
std::string Unavailable();
// Page-locked host memory (cudaHostAlloc, portable), or nullptr when CUDA cannot give it.
void* AllocatePinned(std::size_t bytes);
void FreePinned(void* pointer);
// The device's name ("NVIDIA H200"), or the reason there is none.
std::string DeviceName(int device);

struct CopyTiming {
  double seconds = 0;               // wall time of all the copies, until the device finished
  double host_blocked_seconds = 0;  // time the host spent inside the copy calls
};
// Copies `bytes` from host to device `repetitions` times (bench): from pinned or pageable memory,
// with cudaMemcpy (sync) or cudaMemcpyAsync alternating between two streams (async). One copy
// runs first to warm up. Errors: NotSupported without CUDA, IOError with the runtime's message.
Result<CopyTiming> TimeHostToDevice(std::size_t bytes, bool pinned, bool async, int repetitions,
                                    int device);

}  // namespace packrec::cuda

#endif  // PACKREC_LIB_PIPELINE_CUDA_RUNTIME_H_
