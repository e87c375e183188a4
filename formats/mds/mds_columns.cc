#include "mds/mds_columns.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/endian.h"
#include "core/file_io.h"
#include "storage/source_fields.h"

namespace packrec::mds {
namespace {

struct Encoding {
  std::string base;                  // "int", "ndarray", ...
  std::string dtype;                 // ndarray: the fixed dtype, if any
  std::vector<std::uint64_t> shape;  // ndarray: the fixed shape, if any
};

Encoding ParseEncoding(const std::string& encoding) {
  Encoding parsed;
  const std::size_t colon = encoding.find(':');
  parsed.base = encoding.substr(0, colon);
  if (colon == std::string::npos) return parsed;
  const std::string rest = encoding.substr(colon + 1);
  const std::size_t second = rest.find(':');
  parsed.dtype = rest.substr(0, second);
  if (second == std::string::npos) return parsed;
  std::uint64_t extent = 0;
  for (const char c : rest.substr(second + 1) + ",") {
    if (c == ',') {
      parsed.shape.push_back(extent);
      extent = 0;
    } else if (c >= '0' && c <= '9') {
      extent = extent * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  return parsed;
}

// Bytes of one scalar of an int or float encoding; 0 for the others.
std::size_t ScalarBytes(std::string_view base) {
  if (base == "int" || base == "int64" || base == "uint64" || base == "float64") return 8;
  if (base == "int32" || base == "uint32" || base == "float32") return 4;
  if (base == "int16" || base == "uint16" || base == "float16") return 2;
  if (base == "int8" || base == "uint8") return 1;
  return 0;
}

// Streaming's NDArray dtype codes (its encodings/ndarray.py), with NumPy's dtype strings.
struct Dtype {
  int code;
  const char* name;
  const char* descr;
  std::size_t size;
};
constexpr std::array<Dtype, 11> kDtypes = {{{8, "uint8", "|u1", 1},
                                            {9, "int8", "|i1", 1},
                                            {16, "uint16", "<u2", 2},
                                            {17, "int16", "<i2", 2},
                                            {18, "float16", "<f2", 2},
                                            {32, "uint32", "<u4", 4},
                                            {33, "int32", "<i4", 4},
                                            {34, "float32", "<f4", 4},
                                            {64, "uint64", "<u8", 8},
                                            {65, "int64", "<i8", 8},
                                            {66, "float64", "<f8", 8}}};

const Dtype* FindDtype(std::string_view name, int code = -1) {
  for (const Dtype& dtype : kDtypes) {
    if (dtype.name == name || dtype.code == code) return &dtype;
  }
  return nullptr;
}

// IEEE half to single precision, exactly (every half is a float). Hand-written: a few lines,
// where a library would be a dependency for one conversion.
float HalfToFloat(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t mantissa = half & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

void AppendText(std::string_view text, std::vector<std::byte>& value) {
  const auto bytes = AsBytes(text);
  value.assign(bytes.begin(), bytes.end());
}

Status ScalarValue(const std::string& base, std::span<const std::byte> bytes,
                   std::vector<std::byte>& value) {
  const std::size_t size = ScalarBytes(base);
  if (bytes.size() != size) {
    return Status::InvalidInput("its " + base + " value is " + std::to_string(bytes.size()) +
                                " bytes, not " + std::to_string(size));
  }
  if (base == "float64") {
    double number = 0;
    const std::uint64_t bits = LoadLE<std::uint64_t>(bytes.data());
    std::memcpy(&number, &bits, sizeof number);
    if (!std::isfinite(number)) {
      return Status::InvalidInput("its float64 value is not finite, which JSON cannot hold");
    }
    return AppendText(nlohmann::json(number).dump(), value), Status::OK();
  }
  if (base == "uint64") {
    return AppendText(std::to_string(LoadLE<std::uint64_t>(bytes.data())), value), Status::OK();
  }
  value.resize(base.starts_with("float") ? 4 : 8);
  if (base == "float32") {
    std::memcpy(value.data(), bytes.data(), 4);
  } else if (base == "float16") {
    const float number = HalfToFloat(LoadLE<std::uint16_t>(bytes.data()));
    std::uint32_t bits = 0;
    std::memcpy(&bits, &number, sizeof bits);
    StoreLE<std::uint32_t>(value.data(), bits);
  } else {
    std::int64_t number = 0;
    const bool is_signed = !base.starts_with("uint");
    if (size == 8) number = static_cast<std::int64_t>(LoadLE<std::uint64_t>(bytes.data()));
    if (size == 4) {
      const std::uint32_t raw = LoadLE<std::uint32_t>(bytes.data());
      number = is_signed ? static_cast<std::int32_t>(raw) : raw;
    }
    if (size == 2) {
      const std::uint16_t raw = LoadLE<std::uint16_t>(bytes.data());
      number = is_signed ? static_cast<std::int16_t>(raw) : raw;
    }
    if (size == 1) {
      const auto raw = static_cast<std::uint8_t>(bytes[0]);
      number = is_signed ? static_cast<std::int8_t>(raw) : raw;
    }
    StoreLE<std::int64_t>(value.data(), number);
  }
  return Status::OK();
}

// An ndarray column as a .npy file: its dtype and shape from the encoding or from the bytes'
// own header ([dtype code] [ndim << 2 | shape width code] [shape], as Streaming writes them).
Status NdarrayAsNpy(const Encoding& encoding, std::span<const std::byte> bytes,
                    std::vector<std::byte>& value) {
  const auto bad = [](const std::string& why) {
    return Status::InvalidInput("its ndarray value " + why);
  };
  std::size_t at = 0;
  const Dtype* dtype = nullptr;
  if (!encoding.dtype.empty()) {
    dtype = FindDtype(encoding.dtype);
  } else if (!bytes.empty()) {
    dtype = FindDtype("", static_cast<int>(bytes[at++]));
  }
  if (dtype == nullptr) return bad("has a dtype Streaming does not write");
  std::vector<std::uint64_t> shape = encoding.shape;
  if (shape.empty()) {
    if (at >= bytes.size()) return bad("is cut short in its shape");
    const auto packed = static_cast<unsigned>(bytes[at++]);
    const std::size_t ndim = packed >> 2;
    const std::size_t width = std::size_t{1} << (packed & 3u);
    if ((bytes.size() - at) / width < ndim) return bad("is cut short in its shape");
    for (std::size_t d = 0; d < ndim; ++d, at += width) {
      std::uint64_t extent = 0;
      for (std::size_t b = width; b-- > 0;) {
        extent = (extent << 8) | static_cast<std::uint8_t>(bytes[at + b]);
      }
      shape.push_back(extent);
    }
  }
  std::uint64_t elements = 1;
  for (const std::uint64_t extent : shape) {
    if (extent != 0 && elements > UINT32_MAX / extent) return bad("has too many elements");
    elements *= extent;
  }
  if ((bytes.size() - at) != elements * dtype->size) {
    return bad("holds " + std::to_string(bytes.size() - at) + " bytes of values, not " +
               std::to_string(elements * dtype->size) + " for its shape");
  }
  value = EncodeNpy(dtype->descr, shape, bytes.subspan(at));
  return Status::OK();
}

}  // namespace

FieldSpec FieldOfColumn(const std::string& name, const std::string& encoding) {
  FieldSpec spec;
  spec.name = name;
  std::replace(spec.name.begin(), spec.name.end(), '/', '.');
  if (spec.name == "image" || spec.name == "label" || spec.name == "key") {
    spec.name = "mds_" + spec.name;
  }
  if (spec.name != name) spec.source_name = name;
  const Encoding parsed = ParseEncoding(encoding);
  const std::string& base = parsed.base;
  if (base == "uint64" || base == "float64" || base == "json") {
    spec.type = FieldType::kJson;
  } else if (base == "float16" || base == "float32") {
    spec.type = FieldType::kFloat32;
  } else if (ScalarBytes(base) > 0) {
    spec.type = FieldType::kInt64;
  } else if (base == "str" || base == "str_int" || base == "str_float" || base == "str_decimal") {
    spec.type = FieldType::kText;
  } else if (base == "ndarray" && (parsed.dtype == "int64" || parsed.dtype == "float32") &&
             !parsed.shape.empty()) {
    spec.type = parsed.dtype == "int64" ? FieldType::kInt64 : FieldType::kFloat32;
    for (std::size_t d = 1; d < parsed.shape.size(); ++d) {
      spec.inner_shape.push_back(static_cast<std::uint32_t>(parsed.shape[d]));
    }
  } else if (base == "ndarray") {
    spec.suffix = spec.name + ".npy";
  } else if (base == "jpeg") {
    spec.suffix = spec.name + ".jpg";
  } else if (base == "png" || base == "pkl") {
    spec.suffix = spec.name + "." + base;
  }
  return spec;
}

Status ColumnValue(const std::string& encoding, const FieldSpec& spec,
                   std::span<const std::byte> bytes, std::vector<std::byte>& value) {
  const Encoding parsed = ParseEncoding(encoding);
  if (ScalarBytes(parsed.base) > 0) return ScalarValue(parsed.base, bytes, value);
  if (parsed.base == "ndarray" && spec.type == FieldType::kBytes) {
    return NdarrayAsNpy(parsed, bytes, value);
  }
  value.assign(bytes.begin(), bytes.end());
  return Status::OK();
}

}  // namespace packrec::mds
