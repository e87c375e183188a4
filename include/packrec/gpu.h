// Asynchronous upload of loader batches to a CUDA device. Built when the CUDA toolkit is found at
// build time; otherwise GpuUploader::Available() is false and Create says why.
//
// Each upload runs on its own stream: cudaMemcpyAsync of the pinned batch (only uint8 crosses
// PCIe), then optionally a kernel that converts N x H x W x 3 uint8 into N x 3 x H x W float or
// half, normalised with (x / 255 - mean) / std, then an event. Upload returns at once, so the
// copy overlaps the decoding of the next batches; the consumer waits on the event (on the host,
// or by making its own stream wait) only when it needs the data.
//
// No CUDA types in this header: streams are passed as void* (a cudaStream_t).
//
// Threading: one GpuUploader per consumer thread; Upload and the returned GpuBatch's methods are
// called from that thread. fork(): the CUDA runtime cannot be used in a child forked after it was
// initialised in the parent (NVIDIA's rule, not packrec's): create uploaders only in the process
// that uses them, after any fork (PyTorch's DataLoader workers upload nothing; the main process
// does). Available() initialises the runtime too.
#ifndef PACKREC_GPU_H_
#define PACKREC_GPU_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "packrec/loader.h"
#include "packrec/status.h"

namespace packrec {

struct Normalize {
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // of x / 255, per RGB channel
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  bool half = false;  // float16 output instead of float32
};

// A batch on the device. Its device memory is the uploader's and is reused only after this
// object is destroyed; it keeps the host batch alive until the copy is done.
class GpuBatch {
 public:
  virtual ~GpuBatch() = default;
  virtual const Batch& host() const = 0;
  virtual const std::uint8_t* images() const = 0;  // device: N x H x W x 3 uint8
  virtual const void* normalized() const = 0;      // device: N x 3 x H x W, or null
  virtual void* stream() const = 0;                // the cudaStream_t the upload ran on
  // Blocks the host until the upload (and normalisation) finished.
  virtual Status Wait() const = 0;
  // Makes `consumer_stream` (a cudaStream_t; null: the legacy default stream) wait for the
  // upload without blocking the host.
  virtual Status MakeStreamWait(void* consumer_stream) const = 0;
  // Copies the device data back (after the upload), for checks and debugging: `images` takes
  // N x H x W x 3 bytes, `normalized` N x 3 x H x W floats or halves.
  virtual Status CopyImagesToHost(std::span<std::uint8_t> images) const = 0;
  virtual Status CopyNormalizedToHost(std::span<std::byte> normalized) const = 0;
};

struct GpuUploaderOptions {
  int device = 0;
  std::optional<Normalize> normalize;
};

class GpuUploader {
 public:
  // True when packrec was built with CUDA and a device is usable; otherwise `why` says what is
  // missing (no toolkit at build time, no driver, no device).
  static bool Available(std::string* why = nullptr);
  // Errors: NotSupported when !Available(), with the reason.
  static Result<std::unique_ptr<GpuUploader>> Create(const GpuUploaderOptions& options);
  virtual ~GpuUploader() = default;

  // Starts the upload of `batch` and returns without waiting for it. Device buffers are reused
  // from earlier GpuBatch objects that were destroyed; new ones are made only when the consumer
  // holds them all.
  virtual Result<std::shared_ptr<GpuBatch>> Upload(std::shared_ptr<const Batch> batch) = 0;
};

}  // namespace packrec

#endif  // PACKREC_GPU_H_
