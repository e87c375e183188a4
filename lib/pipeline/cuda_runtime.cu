// The CUDA side of the pipeline (built when the toolkit is found): pinned host memory, the
// uploader and its normalisation kernel. The only file that includes CUDA headers.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "packrec/gpu.h"
#include "pipeline/cuda_runtime.h"

namespace packrec {
namespace cuda {

bool Built() { return true; }

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

namespace {

// The oldest driver branch that runs a CUDA runtime of this major version (NVIDIA's CUDA
// compatibility tables: 11.x needs r450, 12.x r525, 13.x r580); 0 where unknown.
int MinimumDriverBranch(int runtime_major) {
  switch (runtime_major) {
    case 11:
      return 450;
    case 12:
      return 525;
    case 13:
      return 580;
    default:
      return 0;
  }
}

std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

// The runtime says "CUDA driver version is insufficient for CUDA runtime version" both where the
// driver is too old and where there is no NVIDIA driver at all: cudaDriverGetVersion (0 without a
// driver) tells them apart, so the message says what to do.
std::string Unavailable() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess) return count == 0 ? "no CUDA device" : "";
  cudaGetLastError();
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  const std::string runtime = CudaVersionText(CUDART_VERSION);
  if (driver == 0) {
    return "no NVIDIA driver on this machine (packrec's CUDA " + runtime +
           " runtime found no libcuda): install the driver to use a GPU";
  }
  if (error == cudaErrorInsufficientDriver) {
    const int branch = MinimumDriverBranch(CUDART_VERSION / 1000);
    return "the NVIDIA driver is too old: it runs CUDA up to " + CudaVersionText(driver) +
           ", packrec was built with CUDA " + runtime +
           (branch > 0 ? ", which needs driver r" + std::to_string(branch) + " or newer" : "");
  }
  if (error == cudaErrorNoDevice) {
    return "the NVIDIA driver (CUDA " + CudaVersionText(driver) + ") sees no GPU";
  }
  return std::string("no usable CUDA device: ") + cudaGetErrorString(error);
}

void* AllocatePinned(std::size_t bytes) {
  void* pointer = nullptr;
  if (cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return pointer;
}

void FreePinned(void* pointer) {
  if (pointer != nullptr) cudaFreeHost(pointer);
}

std::string DeviceName(int device) {
  cudaDeviceProp properties{};
  const cudaError_t error = cudaGetDeviceProperties(&properties, device);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(error);
  }
  return properties.name;
}

}  // namespace cuda

namespace {

Status CudaError(cudaError_t error, const char* what) {
  return Status::IOError(std::string("CUDA ") + what + ": " + cudaGetErrorString(error));
}

#define PACKREC_CUDA_RETURN_IF_ERROR(call, what)                                       \
  do {                                                                                 \
    const cudaError_t packrec_cuda_error = (call);                                     \
    if (packrec_cuda_error != cudaSuccess) return CudaError(packrec_cuda_error, what); \
  } while (0)

// Host and device buffers of one TimeHostToDevice call, freed on every path.
struct CopyBuffers {
  void* pinned = nullptr;
  std::vector<std::uint8_t> pageable;
  void* device[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  ~CopyBuffers() {
    for (cudaStream_t stream : streams) {
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
    for (void* buffer : device) {
      if (buffer != nullptr) cudaFree(buffer);
    }
    if (pinned != nullptr) cudaFreeHost(pinned);
  }
};

double SecondsSince(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

namespace cuda {

Result<CopyTiming> TimeHostToDevice(std::size_t bytes, bool pinned, bool async, int repetitions,
                                    int device) {
  PACKREC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  CopyBuffers buffers;
  const void* source = nullptr;
  if (pinned) {
    PACKREC_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&buffers.pinned, bytes, cudaHostAllocPortable),
                                 "cudaHostAlloc");
    std::memset(buffers.pinned, 1, bytes);
    source = buffers.pinned;
  } else {
    buffers.pageable.assign(bytes, 1);
    source = buffers.pageable.data();
  }
  for (int i = 0; i < 2; ++i) {
    PACKREC_CUDA_RETURN_IF_ERROR(cudaMalloc(&buffers.device[i], bytes), "cudaMalloc");
    PACKREC_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&buffers.streams[i], cudaStreamNonBlocking), "cudaStreamCreate");
  }
  PACKREC_CUDA_RETURN_IF_ERROR(cudaMemcpy(buffers.device[0], source, bytes, cudaMemcpyHostToDevice),
                               "cudaMemcpy");
  CopyTiming timing;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repetitions; ++r) {
    const auto call = std::chrono::steady_clock::now();
    if (async) {
      PACKREC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers.device[r % 2], source, bytes,
                                                   cudaMemcpyHostToDevice, buffers.streams[r % 2]),
                                   "cudaMemcpyAsync");
    } else {
      PACKREC_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(buffers.device[r % 2], source, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    timing.host_blocked_seconds += SecondsSince(call);
  }
  for (cudaStream_t stream : buffers.streams) {
    PACKREC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  timing.seconds = SecondsSince(start);
  return timing;
}

}  // namespace cuda

namespace {

struct NormalizeParams {
  float scale[3];   // 1 / (255 * std)
  float offset[3];  // -mean / std
};

// One thread per output element of N x 3 x H x W; reads the NHWC uint8 input.
template <typename Out>
__global__ void NormalizeKernel(const std::uint8_t* in, Out* out, std::size_t pixels_per_image,
                                std::size_t images, NormalizeParams params) {
  const std::size_t total = pixels_per_image * 3 * images;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t image = i / (3 * pixels_per_image);
    const std::size_t rest = i % (3 * pixels_per_image);
    const int channel = static_cast<int>(rest / pixels_per_image);
    const std::size_t pixel = rest % pixels_per_image;
    const float value = in[(image * pixels_per_image + pixel) * 3 + channel];
    const float normalized = value * params.scale[channel] + params.offset[channel];
    if constexpr (sizeof(Out) == 2) {
      out[i] = __float2half(normalized);
    } else {
      out[i] = normalized;
    }
  }
}

// Device buffers and the stream and event of one upload in flight.
struct Slot {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  std::uint8_t* images = nullptr;
  void* normalized = nullptr;
  std::size_t capacity = 0;  // bytes of `images`
  std::size_t normalized_capacity = 0;

  ~Slot() {
    cudaSetDevice(device);
    if (done != nullptr) cudaEventSynchronize(done);
    cudaFree(images);
    cudaFree(normalized);
    if (done != nullptr) cudaEventDestroy(done);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

struct SlotPool {
  std::mutex mutex;
  std::vector<std::unique_ptr<Slot>> free;
};

class GpuBatchImpl final : public GpuBatch {
 public:
  GpuBatchImpl(std::shared_ptr<const Batch> host, std::unique_ptr<Slot> slot,
               std::shared_ptr<SlotPool> pool, bool normalized, bool half)
      : host_(std::move(host)),
        slot_(std::move(slot)),
        pool_(std::move(pool)),
        has_normalized_(normalized),
        half_(half) {}
  ~GpuBatchImpl() override {
    cudaSetDevice(slot_->device);
    cudaEventSynchronize(slot_->done);  // the copy may still read host_
    std::lock_guard lock(pool_->mutex);
    pool_->free.push_back(std::move(slot_));
  }

  const Batch& host() const override { return *host_; }
  const std::uint8_t* images() const override { return slot_->images; }
  const void* normalized() const override { return has_normalized_ ? slot_->normalized : nullptr; }
  void* stream() const override { return slot_->stream; }
  Status Wait() const override {
    PACKREC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot_->done), "wait for upload");
    return Status::OK();
  }
  Status MakeStreamWait(void* consumer_stream) const override {
    PACKREC_CUDA_RETURN_IF_ERROR(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer_stream), slot_->done, 0),
        "make stream wait for upload");
    return Status::OK();
  }
  Status CopyImagesToHost(std::span<std::uint8_t> images) const override {
    if (images.size() != host_->images().size()) {
      return Status::InvalidArgument("images buffer holds " + std::to_string(images.size()) +
                                     " bytes, the batch " + std::to_string(host_->images().size()));
    }
    PACKREC_CUDA_RETURN_IF_ERROR(cudaSetDevice(slot_->device), "set device");
    PACKREC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(images.data(), slot_->images, images.size(),
                                                 cudaMemcpyDeviceToHost, slot_->stream),
                                 "copy images back");
    PACKREC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(slot_->stream), "copy images back");
    return Status::OK();
  }
  Status CopyNormalizedToHost(std::span<std::byte> normalized) const override {
    if (!has_normalized_) return Status::InvalidArgument("the uploader does not normalize");
    const std::size_t bytes = host_->images().size() * (half_ ? 2 : 4);
    if (normalized.size() != bytes) {
      return Status::InvalidArgument("normalized buffer holds " +
                                     std::to_string(normalized.size()) + " bytes, " +
                                     std::to_string(bytes) + " needed");
    }
    PACKREC_CUDA_RETURN_IF_ERROR(cudaSetDevice(slot_->device), "set device");
    PACKREC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(normalized.data(), slot_->normalized, bytes,
                                                 cudaMemcpyDeviceToHost, slot_->stream),
                                 "copy normalized back");
    PACKREC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(slot_->stream), "copy normalized back");
    return Status::OK();
  }

 private:
  std::shared_ptr<const Batch> host_;
  std::unique_ptr<Slot> slot_;
  std::shared_ptr<SlotPool> pool_;
  bool has_normalized_;
  bool half_;
};

class GpuUploaderImpl final : public GpuUploader {
 public:
  explicit GpuUploaderImpl(const GpuUploaderOptions& options) : options_(options) {
    if (options_.normalize) {
      for (int c = 0; c < 3; ++c) {
        params_.scale[c] = 1.0f / (255.0f * options_.normalize->std[c]);
        params_.offset[c] = -options_.normalize->mean[c] / options_.normalize->std[c];
      }
    }
  }

  Result<std::shared_ptr<GpuBatch>> Upload(std::shared_ptr<const Batch> batch) override {
    if (batch == nullptr) return Status::InvalidArgument("no batch to upload");
    PACKREC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "set device");
    std::unique_ptr<Slot> slot;
    {
      std::lock_guard lock(pool_->mutex);
      if (!pool_->free.empty()) {
        slot = std::move(pool_->free.back());
        pool_->free.pop_back();
      }
    }
    if (slot == nullptr) {
      slot = std::make_unique<Slot>();
      slot->device = options_.device;
      PACKREC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&slot->stream, cudaStreamNonBlocking),
                                   "create stream");
      PACKREC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&slot->done, cudaEventDisableTiming),
                                   "create event");
    }
    const std::size_t bytes = batch->images().size();
    if (slot->capacity < bytes) {
      cudaFree(slot->images);
      slot->images = nullptr;
      slot->capacity = 0;
      PACKREC_CUDA_RETURN_IF_ERROR(cudaMalloc(&slot->images, bytes), "allocate batch");
      slot->capacity = bytes;
    }
    const std::size_t out_bytes =
        options_.normalize ? bytes * (options_.normalize->half ? 2 : 4) : 0;
    if (slot->normalized_capacity < out_bytes) {
      cudaFree(slot->normalized);
      slot->normalized = nullptr;
      slot->normalized_capacity = 0;
      PACKREC_CUDA_RETURN_IF_ERROR(cudaMalloc(&slot->normalized, out_bytes), "allocate output");
      slot->normalized_capacity = out_bytes;
    }
    // From pageable memory cudaMemcpyAsync is synchronous; from pinned memory it is a DMA that
    // overlaps everything on the host.
    PACKREC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot->images, batch->images().data(), bytes,
                                                 cudaMemcpyHostToDevice, slot->stream),
                                 "copy batch to device");
    if (options_.normalize && bytes > 0) {
      const std::size_t pixels = std::size_t{batch->height()} * batch->width();
      const std::size_t total = bytes;
      const unsigned threads = 256;
      const unsigned blocks =
          static_cast<unsigned>(std::min<std::size_t>((total + threads - 1) / threads, 65535));
      if (options_.normalize->half) {
        NormalizeKernel<<<blocks, threads, 0, slot->stream>>>(
            slot->images, static_cast<__half*>(slot->normalized), pixels, batch->size(), params_);
      } else {
        NormalizeKernel<<<blocks, threads, 0, slot->stream>>>(
            slot->images, static_cast<float*>(slot->normalized), pixels, batch->size(), params_);
      }
      PACKREC_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launch normalize kernel");
    }
    PACKREC_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot->done, slot->stream), "record event");
    return std::shared_ptr<GpuBatch>(std::make_shared<GpuBatchImpl>(
        std::move(batch), std::move(slot), pool_, options_.normalize.has_value(),
        options_.normalize && options_.normalize->half));
  }

 private:
  GpuUploaderOptions options_;
  NormalizeParams params_{};
  std::shared_ptr<SlotPool> pool_ = std::make_shared<SlotPool>();
};

}  // namespace

bool GpuUploader::Available(std::string* why) {
  if (cuda::DeviceCount() > 0) return true;
  if (why != nullptr) *why = cuda::Unavailable();
  return false;
}

Result<std::unique_ptr<GpuUploader>> GpuUploader::Create(const GpuUploaderOptions& options) {
  std::string why;
  if (!Available(&why)) return Status::NotSupported(why);
  if (options.device < 0 || options.device >= cuda::DeviceCount()) {
    return Status::InvalidArgument("CUDA device " + std::to_string(options.device) +
                                   " does not exist (" + std::to_string(cuda::DeviceCount()) +
                                   " found)");
  }
  return std::unique_ptr<GpuUploader>(new GpuUploaderImpl(options));
}

}  // namespace packrec
