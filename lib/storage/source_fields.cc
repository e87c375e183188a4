#include "storage/source_fields.h"

#include <cctype>
#include <cstring>

#include "core/endian.h"
#include "storage/field_block.h"

namespace packrec {

const FieldSpec* GrowingSchema::Find(std::string_view name) const {
  const auto found = index_.find(std::string(name));
  return found == index_.end() ? nullptr : &fields_[found->second];
}

std::optional<std::size_t> GrowingSchema::IndexOf(std::string_view name) const {
  const auto found = index_.find(std::string(name));
  if (found == index_.end()) return std::nullopt;
  return found->second;
}

Status GrowingSchema::Set(SourceRecord& record, const FieldSpec& spec, std::vector<std::byte> value,
                          std::string_view what, bool checked) {
  // Looked up before an emplace, which would allocate a node for every value of a known field.
  auto found = index_.find(spec.name);
  const bool added = found == index_.end();
  if (added) found = index_.emplace(spec.name, fields_.size()).first;
  if (added) {
    fields_.push_back(spec);
    record.added_fields.push_back(spec);
  } else {
    const FieldSpec& known = fields_[found->second];
    if (known.type != spec.type || known.inner_shape != spec.inner_shape) {
      return Status::InvalidInput("its " + std::string(what) + " is " + FieldTypeText(spec) +
                                  ", where the field it is stored as, '" + known.name + "', is " +
                                  FieldTypeText(known) + " (from the first record that " +
                                  "had it)");
    }
  }
  const FieldSpec& field = fields_[found->second];
  const Status valid = !checked                         ? ValidateFieldValue(field, value)
                       : field.type == FieldType::kJson ? CheckJsonFieldLimits(value)
                                                        : Status::OK();
  if (!valid.ok()) {
    return Status::InvalidInput("its " + std::string(what) + " cannot be field '" + field.name +
                                "' (" + std::string(FieldTypeName(field.type)) +
                                "): " + valid.message());
  }
  if (record.fields.size() <= found->second) record.fields.resize(found->second + 1);
  record.fields[found->second] = std::move(value);
  return Status::OK();
}

namespace {

constexpr std::string_view kNpyMagic = "\x93NUMPY";

// The text after `key`'s colon in a .npy header dict, spaces skipped; empty when absent.
std::string_view ValueOf(std::string_view header, std::string_view key) {
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = std::string(1, quote) + std::string(key) + quote;
    std::size_t at = header.find(quoted);
    if (at == std::string_view::npos) continue;
    at = header.find(':', at + quoted.size());
    if (at == std::string_view::npos) return {};
    ++at;
    while (at < header.size() && header[at] == ' ') ++at;
    return header.substr(at);
  }
  return {};
}

// numpy's header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }. Read here
// by hand (numpy reads it with Python's literal_eval; no C++ library reads .npy headers).
bool ParseNpyHeader(std::string_view header, std::string* descr, bool* fortran,
                    std::vector<std::uint64_t>* shape) {
  std::string_view value = ValueOf(header, "descr");
  if (value.empty() || (value[0] != '\'' && value[0] != '"')) return false;
  const std::size_t end = value.find(value[0], 1);
  if (end == std::string_view::npos) return false;
  *descr = std::string(value.substr(1, end - 1));
  value = ValueOf(header, "fortran_order");
  if (value.starts_with("False")) {
    *fortran = false;
  } else if (value.starts_with("True")) {
    *fortran = true;
  } else {
    return false;
  }
  value = ValueOf(header, "shape");
  if (value.empty() || value[0] != '(') return false;
  const std::size_t close = value.find(')');
  if (close == std::string_view::npos) return false;
  shape->clear();
  std::uint64_t extent = 0;
  bool digits = false;
  for (const char c : value.substr(1, close - 1)) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (extent > (UINT64_MAX - 9) / 10) return false;
      extent = extent * 10 + static_cast<std::uint64_t>(c - '0');
      digits = true;
    } else if (c == ',') {
      if (!digits) return false;
      shape->push_back(extent);
      extent = 0;
      digits = false;
    } else if (c != ' ' && c != 'L') {
      return false;
    }
  }
  if (digits) shape->push_back(extent);
  return true;
}

}  // namespace

std::optional<NpyArray> ParseNpy(std::span<const std::byte> bytes) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kNpyMagic.data(), kNpyMagic.size()) != 0) {
    return std::nullopt;
  }
  const auto major = static_cast<unsigned>(bytes[6]);
  std::size_t header_size = 0;
  std::size_t header_start = 0;
  if (major == 1) {
    header_size = LoadLE<std::uint16_t>(&bytes[8]);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return std::nullopt;
    header_size = LoadLE<std::uint32_t>(&bytes[8]);
    header_start = 12;
  } else {
    return std::nullopt;
  }
  if (header_size > bytes.size() - header_start) return std::nullopt;
  const std::string_view header(reinterpret_cast<const char*>(&bytes[header_start]), header_size);
  std::string descr;
  bool fortran = false;
  NpyArray array;
  if (!ParseNpyHeader(header, &descr, &fortran, &array.shape) || fortran || array.shape.empty()) {
    return std::nullopt;
  }
  std::size_t item = 0;
  if (descr == "<f4") {
    array.type = FieldType::kFloat32;
    item = 4;
  } else if (descr == "<i8") {
    array.type = FieldType::kInt64;
    item = 8;
  } else {
    return std::nullopt;
  }
  std::uint64_t elements = 1;
  for (const std::uint64_t extent : array.shape) {
    if (extent != 0 && elements > UINT64_MAX / extent) return std::nullopt;
    elements *= extent;
  }
  array.data = bytes.subspan(header_start + header_size);
  if (elements > array.data.size() / item || elements * item != array.data.size()) {
    return std::nullopt;
  }
  return array;
}

std::vector<std::byte> EncodeNpy(FieldType type, std::span<const std::uint64_t> shape,
                                 std::span<const std::byte> data) {
  return EncodeNpy(type == FieldType::kInt64 ? "<i8" : "<f4", shape, data);
}

std::vector<std::byte> EncodeNpy(std::string_view descr, std::span<const std::uint64_t> shape,
                                 std::span<const std::byte> data) {
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    header += (d ? ", " : "") + std::to_string(shape[d]);
  }
  header += shape.size() == 1 ? ",), }" : "), }";
  // As numpy pads it: spaces, then a newline, so that the data starts at a multiple of 64.
  const bool wide = header.size() + 1 + 10 > 65535;
  const std::size_t prefix = wide ? 12 : 10;
  const std::size_t padded = (prefix + header.size() + 1 + 63) / 64 * 64 - prefix;
  header.resize(padded - 1, ' ');
  header += '\n';
  std::vector<std::byte> out(prefix + header.size() + data.size());
  std::memcpy(out.data(), kNpyMagic.data(), kNpyMagic.size());
  out[6] = std::byte{static_cast<unsigned char>(wide ? 2 : 1)};
  out[7] = std::byte{0};
  if (wide) {
    StoreLE<std::uint32_t>(&out[8], static_cast<std::uint32_t>(header.size()));
  } else {
    StoreLE<std::uint16_t>(&out[8], static_cast<std::uint16_t>(header.size()));
  }
  std::memcpy(&out[prefix], header.data(), header.size());
  if (!data.empty()) std::memcpy(&out[prefix + header.size()], data.data(), data.size());
  return out;
}

}  // namespace packrec
