// The _packrec extension module: the C++ library as the pure-Python package `packrec` uses it.
// Every call that reads, decodes or converts releases the GIL.
#include <unistd.h>

#include <cctype>
#include <string>

#include "bindings.h"
#include "packrec/gpu.h"
#include "packrec/packrec.h"

namespace packrec::python {
namespace {

// The "record N" a loader or reader message names, so callers need not parse it.
std::optional<std::uint64_t> RecordIndexIn(const std::string& message) {
  static constexpr std::string_view kWord = "record ";
  for (std::size_t at = message.find(kWord); at != std::string::npos;
       at = message.find(kWord, at + 1)) {
    const std::size_t digits = at + kWord.size();
    std::size_t end = digits;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end > digits && end - digits < 20) return std::stoull(message.substr(digits, end - digits));
  }
  return std::nullopt;
}

}  // namespace

void ThrowStatus(const Status& status, std::optional<std::uint64_t> record_index) {
  py::object errors = py::module_::import("packrec.errors");
  py::object error =
      errors.attr("from_status")(static_cast<int>(status.code()),
                                 std::string(StatusCodeName(status.code())), status.message());
  const std::optional<std::uint64_t> index =
      record_index ? record_index : RecordIndexIn(status.message());
  error.attr("record_index") = index ? py::cast(*index) : py::none();
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

ReleasedGil::~ReleasedGil() noexcept(false) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (finalizing) {
    for (;;) ::pause();  // the interpreter is going away: wait for exit to end this thread
  }
  PyEval_RestoreThread(state_);
}

}  // namespace packrec::python

PYBIND11_MODULE(_packrec, module) {
  namespace py = pybind11;
  using namespace packrec::python;
  module.doc() = "packrec's C++ library; use the `packrec` package, which wraps it";
  module.attr("__version__") = packrec::Version();
  module.def(
      "gpu_available",
      [] {
        std::string why;
        const bool available = packrec::GpuUploader::Available(&why);
        return py::make_tuple(available, why);
      },
      "(True, '') when batches can be uploaded to a CUDA device, else (False, why not)");
  module.def(
      "synth",
      [](const std::string& out, std::uint32_t classes, std::uint32_t per_class, std::uint64_t seed,
         std::uint32_t width, std::uint32_t height) {
        packrec::SynthOptions options;
        options.classes = classes;
        options.per_class = per_class;
        options.seed = seed;
        options.mean_width = width;
        options.mean_height = height;
        packrec::Result<packrec::SynthStats> stats = [&] {
          ReleasedGil release;
          return packrec::WriteSyntheticTree(out, options);
        }();
        const packrec::SynthStats done = ValueOrThrow(std::move(stats));
        py::dict result;
        result["files"] = done.files;
        result["bytes"] = done.bytes;
        return result;
      },
      py::arg("out"), py::arg("classes") = 10, py::arg("per_class") = 100, py::arg("seed") = 0,
      py::arg("width") = 400, py::arg("height") = 350,
      "Writes a synthetic ImageNet-like tree OUT/<class>/<file> of real JPEGs (packrec synth)");
  module.def(
      "set_max_image_pixels",
      [](std::uint64_t pixels) { CheckOk(packrec::SetMaxImagePixels(pixels)); }, py::arg("pixels"),
      "Refuse images of more than `pixels` (width x height) from their header, in every probe "
      "and decoder of this process, as PIL's Image.MAX_IMAGE_PIXELS (1 to 268435456)");
  module.def("max_image_pixels", &packrec::MaxImagePixels,
             "The pixel limit in force (PACKREC_MAX_IMAGE_PIXELS, else 178956970 as PIL)");
  BindDataset(module);
  BindConvert(module);
  BindDecode(module);
  BindLoader(module);
}
