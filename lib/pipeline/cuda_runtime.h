// The few CUDA runtime calls the host side of the pipeline needs, so only cuda_runtime.cu (built
// when the toolkit is found) includes CUDA headers; cuda_stub.cc stands in without it.
#ifndef PACKREC_LIB_PIPELINE_CUDA_RUNTIME_H_
#define PACKREC_LIB_PIPELINE_CUDA_RUNTIME_H_

#include <cstddef>
#include <string>

namespace packrec::cuda {

// Whether packrec was built with the CUDA toolkit.
bool Built();
// Usable devices now: 0 without CUDA, without a driver or without a device.
int DeviceCount();
// Why DeviceCount() is 0, for messages ("built without CUDA", the driver's error...).
std::string Unavailable();
// Page-locked host memory (cudaHostAlloc, portable), or nullptr when CUDA cannot give it.
void* AllocatePinned(std::size_t bytes);
void FreePinned(void* pointer);

}  // namespace packrec::cuda

#endif  // PACKREC_LIB_PIPELINE_CUDA_RUNTIME_H_
