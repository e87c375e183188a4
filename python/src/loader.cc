// packrec.Loader's C++ half: the batch loader and the GPU uploader, with batches handed to
// NumPy (and from there to torch) without a copy.
//
// Zero copy: a batch's images stay in the loader's (pinned) pool buffer. Each array made from a
// batch holds a reference to its _Batch object, which holds the shared_ptr<const Batch>; the
// buffer returns to the pool only when the last array (and tensor made from it) is gone.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <mutex>
#include <string>
#include <tuple>

#include "bindings.h"
#include "packrec/gpu.h"
#include "packrec/loader.h"

namespace packrec::python {
namespace {

struct BatchHandle {
  std::shared_ptr<const Batch> batch;
};

struct GpuBatchHandle {
  std::shared_ptr<GpuBatch> gpu;
  std::optional<Normalize> normalize;
};

template <typename T>
py::array ArrayOver(const T* data, std::vector<py::ssize_t> shape, const py::object& owner) {
  // The array is writable: the batch is the consumer's until it lets go of it (normalising in
  // place is fine), and torch.from_numpy warns about read-only arrays.
  return py::array_t<T>(std::move(shape), data, owner);
}

py::dict CudaArrayInterface(const void* data, py::tuple shape, const char* typestr) {
  py::dict out;
  out["shape"] = std::move(shape);
  out["typestr"] = typestr;
  out["data"] = py::make_tuple(reinterpret_cast<std::uintptr_t>(data), false);
  out["strides"] = py::none();
  // Version 2: no "stream" key; packrec.Loader makes torch's current stream wait on the upload
  // itself (GpuBatch::MakeStreamWait) before it makes the tensor.
  out["version"] = 2;
  return out;
}

class PyLoader {
 public:
  PyLoader(const py::object& dataset, const LoaderOptions& options, std::optional<int> cuda_device,
           std::optional<Normalize> normalize, const std::optional<std::string>& resume_from)
      : normalize_(normalize) {
    std::optional<LoaderState> resume;
    if (resume_from) resume = ValueOrThrow(LoaderState::FromJson(*resume_from));
    loader_ = ValueOrThrow(Loader::Create(ReaderOf(dataset), options, resume));  // keeps the reader
    if (cuda_device) {
      GpuUploaderOptions upload;
      upload.device = *cuda_device;
      upload.normalize = normalize;
      uploader_ = ValueOrThrow(GpuUploader::Create(upload));
    }
  }

  void StartEpoch(std::uint64_t epoch) {
    ReleasedGil release;
    std::lock_guard lock(mutex_);
    loader_->StartEpoch(epoch);
  }

  // The next batch of the epoch on the host, or None after the last.
  py::object Next() {
    std::shared_ptr<const Batch> batch = NextBatch();
    if (batch == nullptr) return py::none();
    return py::cast(BatchHandle{std::move(batch)});
  }

  // The next batch, its upload to the device started; None after the last.
  py::object NextOnDevice() {
    if (uploader_ == nullptr) {
      ThrowStatus(Status::InvalidArgument("this loader was made without a CUDA device"));
    }
    std::shared_ptr<const Batch> batch = NextBatch();
    if (batch == nullptr) return py::none();
    Result<std::shared_ptr<GpuBatch>> uploaded = [&] {
      ReleasedGil release;
      return uploader_->Upload(std::move(batch));
    }();
    return py::cast(GpuBatchHandle{ValueOrThrow(std::move(uploaded)), normalize_});
  }

  // The loader's LoaderState, as its JSON text.
  std::string State() const { return loader_->State().ToJson(); }

  void Resume(const std::string& state_json) {
    const LoaderState state = ValueOrThrow(LoaderState::FromJson(state_json));
    Status status;
    {
      ReleasedGil release;
      std::lock_guard lock(mutex_);
      status = loader_->Resume(state);
    }
    CheckOk(status);
  }

  py::dict Plan() const {
    const EpochPlan plan = loader_->plan();
    py::dict out;
    out["global_records"] = plan.global_records;
    out["batches"] = plan.batches;
    out["records"] = plan.records;
    out["padded"] = plan.padded;
    out["dropped"] = plan.dropped;
    return out;
  }

  std::uint64_t batches_per_epoch() const { return loader_->batches_per_epoch(); }
  std::uint64_t records_per_epoch() const { return loader_->records_per_epoch(); }

  py::dict Stats() const {
    const LoaderStats stats = loader_->stats();
    py::dict out;
    out["images"] = stats.images;
    out["skipped"] = stats.skipped;
    out["consumer_wait_seconds"] = stats.consumer_wait_seconds;
    out["decode_seconds"] = stats.decode_seconds;
    out["remote_requests"] = stats.remote_requests;
    out["remote_bytes"] = stats.remote_bytes;
    return out;
  }

 private:
  std::shared_ptr<const Batch> NextBatch() {
    Result<std::shared_ptr<const Batch>> next = [&] {
      ReleasedGil release;
      std::lock_guard lock(mutex_);
      return loader_->Next();
    }();
    return ValueOrThrow(std::move(next));
  }

  std::optional<Normalize> normalize_;
  std::unique_ptr<Loader> loader_;
  std::unique_ptr<GpuUploader> uploader_;
  std::mutex mutex_;  // Next and StartEpoch from one thread at a time, as Loader requires
};

LoaderOptions MakeOptions(std::uint32_t batch_size, unsigned threads, std::uint32_t prefetch,
                          const std::string& shuffle, std::uint64_t seed,
                          std::uint32_t shuffle_window, const std::string& last_batch,
                          std::uint32_t rank, std::uint32_t world_size,
                          const std::string& transform, std::uint32_t output_size,
                          std::uint32_t resize_size, std::pair<float, float> scale,
                          std::pair<float, float> ratio, bool random_flip,
                          const std::string& on_bad_record, bool pin_memory,
                          std::vector<std::string> fields) {
  LoaderOptions options;
  options.fields = std::move(fields);
  options.batch_size = batch_size;
  options.threads = threads;
  options.prefetch_batches = prefetch;
  // packrec.Loader has checked the names already; these checks are for direct _Loader use.
  if (!ParseShuffleMode(shuffle, &options.shuffle)) {
    ThrowStatus(Status::InvalidArgument("shuffle must be none, global or windowed"));
  }
  if (!ParseLastBatch(last_batch, &options.last_batch)) {
    ThrowStatus(Status::InvalidArgument("last_batch must be short, pad or drop"));
  }
  options.seed = seed;
  options.shuffle_window = shuffle_window;
  options.rank = rank;
  options.world_size = world_size;
  options.transform = transform == "none"    ? TransformKind::kNone
                      : transform == "train" ? TransformKind::kTrain
                                             : TransformKind::kEval;
  options.output_size = output_size;
  options.resize_size = resize_size;
  options.min_scale = scale.first;
  options.max_scale = scale.second;
  options.min_ratio = ratio.first;
  options.max_ratio = ratio.second;
  options.random_flip = random_flip;
  options.on_bad_record = on_bad_record == "skip" ? OnBadRecord::kSkip : OnBadRecord::kFail;
  options.pin_memory = pin_memory;
  return options;
}

}  // namespace

namespace {

// packrec._packrec.Batch: one host batch, its arrays over the loader's buffer.
void BindBatch(py::module_& module) {
  py::class_<BatchHandle>(module, "Batch",
                          "One batch from the loader; its arrays share the loader's buffer")
      .def_property_readonly("epoch", [](const BatchHandle& b) { return b.batch->epoch(); })
      .def_property_readonly("index", [](const BatchHandle& b) { return b.batch->index(); })
      .def("__len__", [](const BatchHandle& b) { return b.batch->size(); })
      .def_property_readonly("skipped", [](const BatchHandle& b) { return b.batch->skipped(); })
      .def_property_readonly(
          "padded", [](const BatchHandle& b) { return b.batch->padded(); },
          "trailing repeats that fill the epoch's last batch (last_batch='pad')")
      .def_property_readonly("pinned", [](const BatchHandle& b) { return b.batch->pinned(); })
      .def_property_readonly(
          "address",
          [](const BatchHandle& b) { return reinterpret_cast<std::uintptr_t>(b.batch->data()); },
          "Where the images lie in the loader's buffer (for checking that nothing was copied)")
      .def_property_readonly(
          "images",
          [](const py::object& self) {
            const Batch& batch = *self.cast<const BatchHandle&>().batch;
            return ArrayOver(batch.data(),
                             {batch.size(), batch.height(), batch.width(), py::ssize_t{3}}, self);
          },
          "N x H x W x 3 uint8 RGB (NHWC), over the loader's buffer")
      .def_property_readonly(
          "labels",
          [](const py::object& self) {
            const Batch& batch = *self.cast<const BatchHandle&>().batch;
            return ArrayOver(batch.labels().data(), {batch.size()}, self);
          },
          "N int64 labels")
      .def_property_readonly(
          "indices",
          [](const py::object& self) {
            const Batch& batch = *self.cast<const BatchHandle&>().batch;
            return ArrayOver(batch.record_indices().data(), {batch.size()}, self);
          },
          "N uint64 record indices")
      .def(
          "encoded",
          [](const BatchHandle& b) {
            py::list out;
            for (std::uint32_t i = 0; i < b.batch->size(); ++i) {
              const std::span<const std::byte> bytes = b.batch->encoded(i);
              out.append(py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
            }
            return out;
          },
          "transform='none': each record's encoded bytes")
      .def(
          "field_data",
          [](const BatchHandle& b, std::size_t j) {
            const Batch& batch = *b.batch;
            if (j >= batch.field_count())
              throw py::index_error("no requested field " + std::to_string(j));
            const std::span<const std::byte> values = batch.field_values(j);
            const std::span<const std::uint64_t> offsets = batch.field_offsets(j);
            const std::span<const std::uint8_t> present = batch.field_present(j);
            return py::make_tuple(
                py::bytes(reinterpret_cast<const char*>(values.data()), values.size()),
                std::vector<std::uint64_t>(offsets.begin(), offsets.end()),
                std::vector<bool>(present.begin(), present.end()));
          },
          py::arg("j"),
          "Requested field j: (every record's value back to back, N + 1 offsets, N presence "
          "flags)");
}

// packrec._packrec.GpuBatch: a batch whose upload has begun.
void BindGpuBatch(py::module_& module) {
  py::class_<GpuBatchHandle>(module, "GpuBatch", "A batch whose upload to the device has begun")
      .def_property_readonly(
          "host",
          [](const GpuBatchHandle& b) {
            // Shares the host batch: the GpuBatch keeps it alive anyway.
            return BatchHandle{std::shared_ptr<const Batch>(b.gpu, &b.gpu->host())};
          })
      .def("wait",
           [](const GpuBatchHandle& b) {
             Status status;
             {
               ReleasedGil release;
               status = b.gpu->Wait();
             }
             CheckOk(status);
           })
      .def(
          "make_stream_wait",
          [](const GpuBatchHandle& b, std::uintptr_t stream) {
            CheckOk(b.gpu->MakeStreamWait(reinterpret_cast<void*>(stream)));
          },
          py::arg("stream"), "Makes a cudaStream_t (an int, as torch's .cuda_stream) wait")
      .def_property_readonly("images_interface",
                             [](const GpuBatchHandle& b) {
                               const Batch& host = b.gpu->host();
                               return CudaArrayInterface(
                                   b.gpu->images(),
                                   py::make_tuple(host.size(), host.height(), host.width(), 3),
                                   "|u1");
                             })
      .def_property_readonly("normalized_interface", [](const GpuBatchHandle& b) -> py::object {
        if (b.gpu->normalized() == nullptr) return py::none();
        const Batch& host = b.gpu->host();
        return CudaArrayInterface(b.gpu->normalized(),
                                  py::make_tuple(host.size(), 3, host.height(), host.width()),
                                  b.normalize && b.normalize->half ? "<f2" : "<f4");
      });
}

}  // namespace

void BindLoader(py::module_& module) {
  BindBatch(module);
  BindGpuBatch(module);
  py::class_<PyLoader>(module, "_Loader")
      .def(py::init([](const py::object& dataset, std::uint32_t batch_size, unsigned threads,
                       std::uint32_t prefetch, const std::string& shuffle, std::uint64_t seed,
                       std::uint32_t shuffle_window, const std::string& last_batch,
                       std::uint32_t rank, std::uint32_t world_size, const std::string& transform,
                       std::uint32_t output_size, std::uint32_t resize_size,
                       std::pair<float, float> scale, std::pair<float, float> ratio,
                       bool random_flip, const std::string& on_bad_record, bool pin_memory,
                       std::optional<int> cuda_device, std::optional<py::tuple> normalize,
                       const std::optional<std::string>& resume_from,
                       std::vector<std::string> fields, std::vector<std::uint64_t> subset,
                       std::vector<double> weights, std::uint64_t samples_per_epoch,
                       const std::vector<std::tuple<std::uint64_t, std::uint64_t, double>>& mix) {
             std::optional<Normalize> norm;
             if (normalize) {
               Normalize n;
               for (int c = 0; c < 3; ++c) {
                 n.mean[c] = (*normalize)[0].cast<py::sequence>()[c].cast<float>();
                 n.std[c] = (*normalize)[1].cast<py::sequence>()[c].cast<float>();
               }
               n.half = (*normalize)[2].cast<bool>();
               norm = n;
             }
             LoaderOptions options = MakeOptions(
                 batch_size, threads, prefetch, shuffle, seed, shuffle_window, last_batch, rank,
                 world_size, transform, output_size, resize_size, scale, ratio, random_flip,
                 on_bad_record, pin_memory, std::move(fields));
             options.subset = std::move(subset);
             options.weights = std::move(weights);
             options.samples_per_epoch = samples_per_epoch;
             for (const auto& [first, count, proportion] : mix) {
               options.mix.push_back({first, count, proportion});
             }
             return std::make_unique<PyLoader>(dataset, std::move(options), cuda_device, norm,
                                               resume_from);
           }),
           py::arg("dataset"), py::arg("batch_size"), py::arg("threads"), py::arg("prefetch"),
           py::arg("shuffle"), py::arg("seed"), py::arg("shuffle_window"), py::arg("last_batch"),
           py::arg("rank"), py::arg("world_size"), py::arg("transform"), py::arg("output_size"),
           py::arg("resize_size"), py::arg("scale"), py::arg("ratio"), py::arg("random_flip"),
           py::arg("on_bad_record"), py::arg("pin_memory"), py::arg("cuda_device"),
           py::arg("normalize"), py::arg("resume_from"),
           py::arg("fields") = std::vector<std::string>{},
           py::arg("subset") = std::vector<std::uint64_t>{},
           py::arg("weights") = std::vector<double>{}, py::arg("samples_per_epoch") = 0,
           py::arg("mix") = std::vector<std::tuple<std::uint64_t, std::uint64_t, double>>{})
      .def("start_epoch", &PyLoader::StartEpoch, py::arg("epoch"))
      .def("state", &PyLoader::State)
      .def("resume", &PyLoader::Resume, py::arg("state"))
      .def("plan", &PyLoader::Plan)
      .def("next", &PyLoader::Next)
      .def("next_on_device", &PyLoader::NextOnDevice)
      .def_property_readonly("batches_per_epoch", &PyLoader::batches_per_epoch)
      .def_property_readonly("records_per_epoch", &PyLoader::records_per_epoch)
      .def("stats", &PyLoader::Stats);
}

}  // namespace packrec::python
