// The _packrec extension module: the C++ library as the pure-Python package `packrec` uses it.
// Every call that reads, decodes or converts releases the GIL.
#include <unistd.h>

#include <string>

#include <pybind11/stl.h>

#include "bindings.h"
#include "packrec/format.h"
#include "packrec/gpu.h"
#include "packrec/packrec.h"
#include "packrec/source.h"

namespace packrec::python {

namespace {

// What to do about an error, in the Python API's terms (the CLI says it with its flags), and the
// remedy's name for `Error.remedy`.
std::pair<std::string_view, std::string_view> Advice(Remedy remedy) {
  switch (remedy) {
    case Remedy::kNone:
      return {};
    case Remedy::kOverwriteToReplace:
      return {"pass overwrite=True to replace it", "overwrite_to_replace"};
    case Remedy::kOverwriteToRestart:
      return {"pass overwrite=True to start again", "overwrite_to_restart"};
    case Remedy::kResumeOrOverwrite:
      return {"pass resume=True to continue it, or overwrite=True to start again",
              "resume_or_overwrite"};
    case Remedy::kResumeOnceFixed:
      return {"once that is fixed, call convert again with resume=True to continue",
              "resume_once_fixed"};
    case Remedy::kSkipBadInput:
      return {"pass on_error=\"skip\" to leave it out", "skip_bad_input"};
  }
  return {};
}

}  // namespace

void ThrowStatus(const Status& status) {
  py::object errors = py::module_::import("packrec.errors");
  const auto [advice, remedy] = Advice(status.remedy());
  std::string message = status.message();
  if (!advice.empty()) message += "; " + std::string(advice);
  py::object error =
      errors.attr("from_status")(static_cast<int>(status.code()),
                                 std::string(StatusCodeName(status.code())), MessageToStr(message));
  error.attr("remedy") =
      remedy.empty() ? py::object(py::none()) : py::object(py::str(std::string(remedy)));
  // Where the error is, from the status's fields (never parsed out of its message).
  error.attr("record_index") =
      status.record_index() ? py::object(py::cast(*status.record_index())) : py::object(py::none());
  error.attr("path") =
      status.path().empty()
          ? py::object(py::none())
          : py::object(py::module_::import("os").attr("fsdecode")(py::bytes(status.path())));
  error.attr("byte_offset") = status.byte_offset() ? py::cast(*status.byte_offset()) : py::none();
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
  module.def(
      "formats",
      [] {
        py::list formats;
        for (const packrec::FormatInfo& info : packrec::ListFormats()) {
          py::dict format;
          format["name"] = info.name;
          format["summary"] = info.summary;
          format["suffixes"] = info.suffixes;
          format["readable"] = info.readable;
          format["single_file"] = info.single_file;
          format["resumable"] = info.resumable;
          formats.append(format);
        }
        return formats;
      },
      "The formats convert writes, as the registry lists them (packrec/format.h): dicts of "
      "name, summary, suffixes, readable, single_file, resumable; the first is the default");
  module.def("source_formats", &packrec::SourceFormatNames,
             "What convert's from_ takes (packrec/source.h)");
  BindDataset(module);
  BindConvert(module);
  BindDecode(module);
  BindLoader(module);
}
