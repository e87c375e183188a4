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

// Raises packrec.<Code>Error (see packrec/errors.py) with the status's message, and its
// `record_index`: the given one, else the "record N" the message names, else None.
[[noreturn]] void ThrowStatus(const Status& status,
                              std::optional<std::uint64_t> record_index = std::nullopt);

template <typename T>
T ValueOrThrow(Result<T> result, std::optional<std::uint64_t> record_index = std::nullopt) {
  if (!result.ok()) ThrowStatus(result.status(), record_index);
  return std::move(result).value();
}

inline void CheckOk(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

// The reader behind a packrec.Dataset (the Python object BindDataset registers).
std::shared_ptr<const Reader> ReaderOf(const py::object& dataset);

void BindDataset(py::module_& module);
void BindConvert(py::module_& module);
void BindDecode(py::module_& module);
void BindLoader(py::module_& module);

}  // namespace packrec::python

#endif  // PACKREC_PYTHON_BINDINGS_H_
