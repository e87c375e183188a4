// packrec.decode and packrec.image_info: the loader's decoder on one image.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>

#include "bindings.h"
#include "packrec/decode.h"

namespace packrec::python {
namespace {

// bytes, bytearray, memoryview, a contiguous numpy array: anything that is one run of bytes.
class ContiguousBytes {
 public:
  explicit ContiguousBytes(const py::buffer& data) {
    if (PyObject_GetBuffer(data.ptr(), &view_, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  }
  ~ContiguousBytes() { PyBuffer_Release(&view_); }
  ContiguousBytes(const ContiguousBytes&) = delete;
  ContiguousBytes& operator=(const ContiguousBytes&) = delete;
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

}  // namespace

void BindDecode(py::module_& module) {
  module.def(
      "decode",
      [](const py::buffer& data, std::optional<std::pair<std::uint32_t, std::uint32_t>> size,
         std::optional<std::array<std::uint32_t, 4>> region) {
        const ContiguousBytes buffer(data);
        const std::span<const std::byte> encoded = buffer.bytes();
        const ImageInfo info = ValueOrThrow(ReadImageSize(encoded));
        DecodeRequest request;
        Rect crop{0, 0, info.width, info.height};
        if (region) {
          // Clamped as the decoders clamp it (inside the image, one pixel at least), so that the
          // output has the region's size.
          const auto [y, x, height, width] = *region;
          crop.x = std::min(x, info.width - 1);
          crop.y = std::min(y, info.height - 1);
          crop.width = std::clamp<std::uint32_t>(width, 1, info.width - crop.x);
          crop.height = std::clamp<std::uint32_t>(height, 1, info.height - crop.y);
          request.region = [crop](std::uint32_t, std::uint32_t) { return crop; };
        }
        request.out_height = size ? size->first : crop.height;
        request.out_width = size ? size->second : crop.width;
        py::array_t<std::uint8_t> image({static_cast<py::ssize_t>(request.out_height),
                                         static_cast<py::ssize_t>(request.out_width),
                                         py::ssize_t{3}});
        const std::span<std::uint8_t> out(image.mutable_data(),
                                          static_cast<std::size_t>(image.size()));
        Status status;
        {
          ReleasedGil release;
          DecodeScratch scratch;
          status = DecodeInto(encoded, request, out, scratch);
        }
        CheckOk(status);
        return image;
      },
      py::arg("data"), py::arg("size") = py::none(), py::arg("region") = py::none(),
      "Decodes a JPEG, PNG or WebP to an H x W x 3 uint8 RGB array. region=(y, x, height, width)\n"
      "decodes only that part (clamped to the image; JPEG and WebP skip what lies outside);\n"
      "size=(height, width) resizes the result.");
  module.def(
      "image_info",
      [](const py::buffer& data) {
        const ContiguousBytes buffer(data);
        const ImageInfo info = ValueOrThrow(ReadImageSize(buffer.bytes()));
        py::dict out;
        out["encoding"] = std::string(EncodingName(info.encoding));
        out["width"] = info.width;
        out["height"] = info.height;
        out["channels"] = info.channels;
        out["subsampling"] = std::string(SubsamplingName(info.subsampling));
        out["progressive"] = info.progressive;
        return out;
      },
      py::arg("data"), "An image's header (size, channels, subsampling) without decoding it");
}

}  // namespace packrec::python
