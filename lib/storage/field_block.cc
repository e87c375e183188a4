#include "storage/field_block.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/keys.h"
#include "storage/json_check.h"

namespace packrec {
namespace {

constexpr std::array<std::pair<FieldType, std::string_view>, 5> kTypeNames = {{
    {FieldType::kText, "text"},
    {FieldType::kJson, "json"},
    {FieldType::kBytes, "bytes"},
    {FieldType::kInt64, "int64[]"},
    {FieldType::kFloat32, "float32[]"},
}};

std::string_view AsText(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

std::string_view FieldTypeName(FieldType type) {
  for (const auto& [known, name] : kTypeNames) {
    if (known == type) return name;
  }
  return "unknown";
}

std::optional<FieldType> ParseFieldType(std::string_view name) {
  for (const auto& [type, known] : kTypeNames) {
    if (known == name) return type;
  }
  return std::nullopt;
}

Status ValidateSchema(const std::vector<FieldSpec>& fields) {
  std::set<std::string, std::less<>> names;
  for (const FieldSpec& spec : fields) {
    const std::string where = "field '" + PrintableKey(spec.name) + "'";
    if (spec.name.empty() || spec.name.size() > 255 || !IsValidUtf8(spec.name) ||
        std::any_of(spec.name.begin(), spec.name.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == '/'; })) {
      return Status::InvalidArgument(
          where + ": a field name is 1 to 255 bytes of UTF-8 without '/' or control characters");
    }
    if (spec.name == "image" || spec.name == "label" || spec.name == "key") {
      return Status::InvalidArgument(where + ": the name is the record's own (image, label, key)");
    }
    if (!names.insert(spec.name).second) {
      return Status::InvalidArgument(where + " appears twice in the schema");
    }
    if (FieldTypeName(spec.type) == "unknown") {
      return Status::InvalidArgument(where + ": unknown type " +
                                     std::to_string(static_cast<int>(spec.type)));
    }
    if (!spec.inner_shape.empty() && !IsNumericField(spec.type)) {
      return Status::InvalidArgument(where + ": only int64[] and float32[] fields have a shape");
    }
    std::uint64_t elements = 1;
    for (const std::uint32_t extent : spec.inner_shape) {
      elements *= extent;
      if (extent == 0 || elements > (1u << 20)) {
        return Status::InvalidArgument(where +
                                       ": each extent of its shape is 1 or more, and an "
                                       "element holds at most 1048576 numbers");
      }
    }
    if (KeyProblem(FieldFileSuffix(spec)).size() > 0 ||
        FieldFileSuffix(spec).find('/') != std::string::npos) {
      return Status::InvalidArgument(where + ": its suffix '" + PrintableKey(spec.suffix) +
                                     "' cannot end a file name");
    }
  }
  return Status::OK();
}

std::string FieldTypeText(const FieldSpec& spec) {
  std::string text(FieldTypeName(spec.type));
  for (std::size_t d = 0; d < spec.inner_shape.size(); ++d) {
    text += (d ? " x " : " of N x ") + std::to_string(spec.inner_shape[d]);
  }
  return text;
}

bool IsNumericField(FieldType type) {
  return type == FieldType::kInt64 || type == FieldType::kFloat32;
}

std::size_t FieldElementBytes(const FieldSpec& spec) {
  if (!IsNumericField(spec.type)) return 0;
  std::size_t bytes = spec.type == FieldType::kInt64 ? 8 : 4;
  for (const std::uint32_t extent : spec.inner_shape) bytes *= extent;
  return bytes;
}

Status CheckJsonFieldLimits(std::span<const std::byte> bytes) {
  if (AsText(bytes).starts_with("\xEF\xBB\xBF")) {
    return Status::InvalidInput(
        "JSON that starts with a UTF-8 byte-order mark (JSON readers such as Python's refuse it: "
        "remove the mark)");
  }
  if (JsonNestingDepth(AsText(bytes)) > kMaxJsonFieldDepth) {
    return Status::InvalidInput("JSON nested more than " + std::to_string(kMaxJsonFieldDepth) +
                                " levels deep (more than JSON readers such as Python's take)");
  }
  return Status::OK();
}

Status ValidateFieldValue(const FieldSpec& spec, std::span<const std::byte> bytes) {
  switch (spec.type) {
    case FieldType::kText:
      if (!IsValidUtf8(AsText(bytes))) return Status::InvalidInput("not valid UTF-8 text");
      return Status::OK();
    case FieldType::kJson:
      if (!IsValidUtf8(AsText(bytes)) || !AcceptJson(AsText(bytes))) {
        return Status::InvalidInput("not valid JSON");
      }
      return CheckJsonFieldLimits(bytes);
    case FieldType::kBytes:
      return Status::OK();
    case FieldType::kInt64:
    case FieldType::kFloat32: {
      const std::size_t element = FieldElementBytes(spec);
      if (bytes.size() % element != 0) {
        std::string shape;
        for (const std::uint32_t extent : spec.inner_shape) shape += " x " + std::to_string(extent);
        return Status::InvalidInput(std::to_string(bytes.size()) +
                                    " bytes is not a whole number of " +
                                    std::string(FieldTypeName(spec.type)) + " elements (N" + shape +
                                    ", " + std::to_string(element) + " bytes each)");
      }
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown field type");
}

std::string NumberProblem(FieldType type, const nlohmann::json& number) {
  const bool beyond_int64 =
      number.is_number_unsigned() && number.get<std::uint64_t>() > std::uint64_t{INT64_MAX};
  if (type == FieldType::kInt64) {
    if (!number.is_number_integer() || beyond_int64) {
      return number.dump() + " is not an integer int64 can hold";
    }
    return "";
  }
  const double value = number.get<double>();
  const auto single = static_cast<float>(value);
  if (std::isfinite(value) && !std::isfinite(single)) {
    return number.dump() + " is beyond float32's range (it would be stored as infinity)";
  }
  if (number.is_number_integer()) {
    // Exact when the float32 converts back to the same integer (2^63 and 2^64, where float32
    // rounds the largest ones, are past what converts back).
    const double back = static_cast<double>(single);
    const bool exact = beyond_int64
                           ? back < 18446744073709551616.0 &&
                                 static_cast<std::uint64_t>(single) == number.get<std::uint64_t>()
                           : back < 9223372036854775808.0 &&
                                 static_cast<std::int64_t>(single) == number.get<std::int64_t>();
    if (!exact) {
      return number.dump() + " is an integer float32 cannot hold exactly (it would be stored as " +
             nlohmann::json(single).dump() + ")";
    }
  }
  return "";
}

Status CheckFieldValue(const FieldSpec& spec, const FieldView& value) {
  if (!value.present) return Status::OK();
  const Status valid = ValidateFieldValue(spec, value.bytes);
  if (valid.ok()) return valid;
  return Status::Corruption("field '" + PrintableKey(spec.name) +
                            "' does not hold what the schema declares (" + FieldTypeText(spec) +
                            "): " + valid.message());
}

Status CheckFieldValues(const std::vector<FieldSpec>& schema, std::span<const FieldView> values) {
  for (std::size_t i = 0; i < schema.size() && i < values.size(); ++i) {
    PACKREC_RETURN_IF_ERROR(CheckFieldValue(schema[i], values[i]));
  }
  return Status::OK();
}

Status AppendFieldBlock(std::size_t field_count, std::span<const FieldView> values,
                        std::vector<std::byte>& out) {
  const std::size_t start = out.size();
  const std::size_t table_size = AlignUp(field_count * kFieldTableEntrySize, kFieldValueAlignment);
  std::size_t total = table_size;
  for (std::size_t i = 0; i < field_count && i < values.size(); ++i) {
    if (values[i].present) total += AlignUp(values[i].bytes.size(), kFieldValueAlignment);
  }
  if (total > UINT32_MAX) {
    return Status::InvalidArgument("the record's fields take " + std::to_string(total) +
                                   " bytes; a record's fields may take at most 4 GiB");
  }
  out.resize(start + total);  // zero-filled: the padding
  std::size_t at = table_size;
  for (std::size_t i = 0; i < field_count; ++i) {
    std::byte* entry = out.data() + start + i * kFieldTableEntrySize;
    if (i >= values.size() || !values[i].present) {
      StoreLE<std::uint32_t>(entry, kAbsentFieldOffset);  // size and checksum stay 0
      continue;
    }
    StoreLE<std::uint32_t>(entry, static_cast<std::uint32_t>(at));
    StoreLE<std::uint32_t>(entry + 4, static_cast<std::uint32_t>(values[i].bytes.size()));
    StoreLE<std::uint64_t>(entry + 8, Xxh64(values[i].bytes));
    if (!values[i].bytes.empty()) {
      std::memcpy(out.data() + start + at, values[i].bytes.data(), values[i].bytes.size());
    }
    at += AlignUp(values[i].bytes.size(), kFieldValueAlignment);
  }
  return Status::OK();
}

Result<std::size_t> FieldTableEntries(std::span<const std::byte> block, std::size_t field_count) {
  // The table ends where the first value starts (values follow it without a gap), or at the end
  // of a block whose values are all absent; entries are read until then.
  std::size_t table_end = block.size();
  std::size_t entries = 0;
  while (entries < field_count && (entries + 1) * kFieldTableEntrySize <= table_end) {
    const std::uint32_t offset = LoadLE<std::uint32_t>(&block[entries * kFieldTableEntrySize]);
    ++entries;
    if (offset == kAbsentFieldOffset) continue;
    if (offset < entries * kFieldTableEntrySize) {
      return Status::Corruption("field table entry " + std::to_string(entries - 1) + " (offset " +
                                std::to_string(offset) + ") points into the field table");
    }
    table_end = std::min<std::size_t>(table_end, offset);
  }
  if (entries < field_count && entries * kFieldTableEntrySize != table_end) {
    return Status::Corruption("its field block is " + std::to_string(block.size()) +
                              " bytes, which do not end its table of " + std::to_string(entries) +
                              " entries where a table ends (the schema has " +
                              std::to_string(field_count) + " fields)");
  }
  return entries;
}

namespace {

// Field `field` of a block whose table has `entries` entries (FieldTableEntries).
Result<FieldView> DecodeTableEntry(std::span<const std::byte> block, std::size_t entries,
                                   std::size_t field, bool verify) {
  // A field the schema gained after the record was written (docs/formats/fields.md).
  if (field >= entries) return FieldView{};
  const std::size_t table_size = entries * kFieldTableEntrySize;
  const std::byte* entry = &block[field * kFieldTableEntrySize];
  const std::uint32_t offset = LoadLE<std::uint32_t>(entry);
  const std::uint32_t size = LoadLE<std::uint32_t>(entry + 4);
  const std::uint64_t checksum = LoadLE<std::uint64_t>(entry + 8);
  if (offset == kAbsentFieldOffset) {
    if (size != 0 || checksum != 0) {
      return Status::Corruption("field table entry " + std::to_string(field) +
                                " is absent but has a size or checksum");
    }
    return FieldView{};
  }
  if (offset < table_size || offset % kFieldValueAlignment != 0 || offset > block.size() ||
      size > block.size() - offset) {
    return Status::Corruption("field table entry " + std::to_string(field) + " (offset " +
                              std::to_string(offset) + ", size " + std::to_string(size) +
                              ") lies outside its " + std::to_string(block.size()) + "-byte block");
  }
  const FieldView view{true, block.subspan(offset, size)};
  if (verify && Xxh64(view.bytes) != checksum) {
    return Status::Corruption("checksum mismatch (stored " + Hex64(checksum) + ", computed " +
                              Hex64(Xxh64(view.bytes)) + ")");
  }
  return view;
}

}  // namespace

Result<FieldView> DecodeFieldValue(std::span<const std::byte> block, std::size_t field_count,
                                   std::size_t field, bool verify) {
  if (field >= field_count) {
    return Status::OutOfRange("field " + std::to_string(field) + " of " +
                              std::to_string(field_count));
  }
  PACKREC_ASSIGN_OR_RETURN(const std::size_t entries, FieldTableEntries(block, field_count));
  return DecodeTableEntry(block, entries, field, verify);
}

std::optional<std::size_t> FirstDamagedField(std::span<const std::byte> block,
                                             std::size_t field_count) {
  for (std::size_t i = 0; i < field_count; ++i) {
    if (!DecodeFieldValue(block, field_count, i, /*verify=*/true).ok()) return i;
  }
  return std::nullopt;
}

Status DecodeFieldBlock(std::span<const std::byte> block, std::size_t field_count,
                        std::vector<FieldView>& out) {
  PACKREC_ASSIGN_OR_RETURN(const std::size_t entries, FieldTableEntries(block, field_count));
  out.resize(field_count);
  for (std::size_t i = 0; i < field_count; ++i) {
    PACKREC_ASSIGN_OR_RETURN(out[i], DecodeTableEntry(block, entries, i, /*verify=*/false));
  }
  return Status::OK();
}

nlohmann::json SchemaToJson(const std::vector<FieldSpec>& fields) {
  nlohmann::json list = nlohmann::json::array();
  for (const FieldSpec& spec : fields) {
    list.push_back({{"name", spec.name},
                    {"type", FieldTypeName(spec.type)},
                    {"suffix", spec.suffix},
                    {"shape", spec.inner_shape}});
    if (!spec.source_name.empty()) list.back()["source_name"] = spec.source_name;
  }
  return list;
}

Result<std::vector<FieldSpec>> SchemaFromJson(const nlohmann::json& json, std::string_view where) {
  const auto bad = [&](const std::string& why) {
    return Status::Corruption(std::string(where) + ": its field schema " + why);
  };
  if (!json.is_array()) return bad("is not a list");
  std::vector<FieldSpec> fields;
  for (const nlohmann::json& entry : json) {
    FieldSpec spec;
    try {
      spec.name = entry.at("name").get<std::string>();
      const std::optional<FieldType> type = ParseFieldType(entry.at("type").get<std::string>());
      if (!type) return bad("names an unknown type " + entry.at("type").dump());
      spec.type = *type;
      spec.suffix = entry.at("suffix").get<std::string>();
      spec.inner_shape = entry.at("shape").get<std::vector<std::uint32_t>>();
      if (entry.contains("source_name")) {
        spec.source_name = entry.at("source_name").get<std::string>();
      }
    } catch (const nlohmann::json::exception& error) {
      return bad(std::string("is malformed (") + error.what() + ")");
    }
    fields.push_back(std::move(spec));
  }
  const Status valid = ValidateSchema(fields);
  if (!valid.ok()) return bad("is invalid: " + valid.message());
  return fields;
}

bool IsTableField(const FieldSpec& spec) {
  return spec.suffix.empty() && spec.type != FieldType::kBytes;
}

nlohmann::json FieldValueToJson(const FieldSpec& spec, std::span<const std::byte> bytes) {
  switch (spec.type) {
    case FieldType::kText:
      return std::string(AsText(bytes));
    case FieldType::kJson:
      return nlohmann::json::parse(AsText(bytes), nullptr, /*allow_exceptions=*/false);
    case FieldType::kBytes:
      break;
    case FieldType::kInt64:
    case FieldType::kFloat32: {
      const std::size_t item = spec.type == FieldType::kInt64 ? 8 : 4;
      std::size_t row = 1;
      for (const std::uint32_t extent : spec.inner_shape) row *= extent;
      nlohmann::json numbers = nlohmann::json::array();
      for (std::size_t at = 0; at + item <= bytes.size(); at += item) {
        if (spec.type == FieldType::kInt64) {
          numbers.push_back(LoadLE<std::int64_t>(&bytes[at]));
        } else {
          const std::uint32_t bits = LoadLE<std::uint32_t>(&bytes[at]);
          float value;
          std::memcpy(&value, &bits, sizeof value);
          numbers.push_back(value);
        }
      }
      if (spec.inner_shape.empty()) return numbers;
      nlohmann::json rows = nlohmann::json::array();
      for (std::size_t r = 0; r + row <= numbers.size(); r += row) {
        rows.push_back(nlohmann::json(numbers.begin() + static_cast<std::ptrdiff_t>(r),
                                      numbers.begin() + static_cast<std::ptrdiff_t>(r + row)));
      }
      return rows;
    }
  }
  return nullptr;
}

std::string FieldFileSuffix(const FieldSpec& spec) {
  return spec.suffix.empty() ? spec.name : spec.suffix;
}

}  // namespace packrec
