// What the pieces of the _packrec extension module share: turning a Status into the Python
// exception of its code, and the functions that register each part.
#ifndef PACKREC_PYTHON_BINDINGS_H_
#define PACKREC_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec::python {

namespace py = pybind11;

// Raises packrec.<Code>Error (see packrec/errors.py) with the status's message and, from its
// fields, `record_index`, `path` and `byte_offset` (None where the status has none).
[[noreturn]] void ThrowStatus(const Status& status);

// A message as a Python str: its bytes as UTF-8, any that are not (a key or file name from a
// damaged or foreign dataset) as \xNN escapes, so that reporting an error never raises a
// UnicodeDecodeError of its own.
inline py::str MessageToStr(const std::string& message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(result).value();
}

inline void CheckOk(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

// Releases the GIL around a packrec call and takes it back after, as py::gil_scoped_release does,
// except at interpreter exit. CPython ends a daemon thread that asks for the GIL once
// finalization has begun with pthread_exit; its forced unwinding through gil_scoped_release's
// destructor (noexcept) called std::terminate, and the process aborted (exit 134) after the
// user's program had finished (about 1 run in 20 with a daemon thread reading ds[i]). A thread
// that finds the interpreter finalizing is parked instead, and exit ends it with the process; the
// destructor is noexcept(false) so that the forced unwinding of one that starts waiting just
// before finalization passes through it (pybind11 rethrows abi::__forced_unwind).
class ReleasedGil {
 public:
  ReleasedGil() : state_(PyEval_SaveThread()) {}
  ~ReleasedGil() noexcept(false);
  ReleasedGil(const ReleasedGil&) = delete;
  ReleasedGil& operator=(const ReleasedGil&) = delete;

 private:
  PyThreadState* state_;
};

// The reader behind a packrec.Dataset (the Python object BindDataset registers).
std::shared_ptr<const Reader> ReaderOf(const py::object& dataset);

void BindDataset(py::module_& module);
void BindConvert(py::module_& module);
void BindDecode(py::module_& module);
void BindLoader(py::module_& module);

}  // namespace packrec::python

#endif  // PACKREC_PYTHON_BINDINGS_H_
