#include "ingest/metadata_table.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/endian.h"
#include "core/file_io.h"
#include "storage/field_block.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What a column's values have been so far; widened row by row (int -> float, a clash -> JSON).
struct ColumnKind {
  enum Base { kUnset, kText, kInt, kFloat, kJson } base = kUnset;
  bool list = false;                    // numbers: a list (of numbers or of rows of numbers)
  std::optional<std::size_t> row_size;  // a list of rows: their common length
};

// An integer that fits int64 (a larger unsigned one is kept as a float, not wrapped).
bool IsInt64(const json& value) {
  return value.is_number_integer() &&
         !(value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX);
}

// The kind of one value; nullopt for null (the record lacks the field).
std::optional<ColumnKind> KindOf(const json& value) {
  ColumnKind kind;
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) return ColumnKind{ColumnKind::kText, false, {}};
  if (IsInt64(value)) return ColumnKind{ColumnKind::kInt, false, {}};
  if (value.is_number()) return ColumnKind{ColumnKind::kFloat, false, {}};
  if (!value.is_array()) return ColumnKind{ColumnKind::kJson, false, {}};
  kind.list = true;
  kind.base = ColumnKind::kInt;
  for (const json& element : value) {
    if (element.is_number()) {
      if (kind.row_size) return ColumnKind{ColumnKind::kJson, false, {}};
      if (!IsInt64(element)) kind.base = ColumnKind::kFloat;
      continue;
    }
    const bool row = element.is_array() && !element.empty() &&
                     std::all_of(element.begin(), element.end(),
                                 [](const json& number) { return number.is_number(); });
    if (!row || (kind.row_size && *kind.row_size != element.size()) ||
        (!kind.row_size && &element != &value.front())) {
      return ColumnKind{ColumnKind::kJson, false, {}};
    }
    kind.row_size = element.size();
    for (const json& number : element) {
      if (!IsInt64(number)) kind.base = ColumnKind::kFloat;
    }
  }
  if (value.empty()) kind.base = ColumnKind::kUnset;  // an empty list fits any list
  return kind;
}

ColumnKind Widen(ColumnKind a, const ColumnKind& b) {
  if (a.base == ColumnKind::kUnset && !a.list) return b;
  const auto json_kind = ColumnKind{ColumnKind::kJson, false, {}};
  if (a.list != b.list || a.base == ColumnKind::kJson || b.base == ColumnKind::kJson) {
    return json_kind;
  }
  if (a.row_size && b.row_size && *a.row_size != *b.row_size) return json_kind;
  if (!a.row_size) a.row_size = b.row_size;
  if (a.base == ColumnKind::kUnset) a.base = b.base;
  if (b.base == ColumnKind::kUnset) return a;
  if (a.base == b.base) return a;
  const bool numbers = (a.base == ColumnKind::kInt || a.base == ColumnKind::kFloat) &&
                       (b.base == ColumnKind::kInt || b.base == ColumnKind::kFloat);
  if (!numbers) return json_kind;
  a.base = ColumnKind::kFloat;
  return a;
}

FieldSpec SpecOf(const std::string& name, const ColumnKind& kind) {
  FieldSpec spec{name, FieldType::kJson, "", {}};
  switch (kind.base) {
    case ColumnKind::kText:
      spec.type = FieldType::kText;
      break;
    case ColumnKind::kInt:
    case ColumnKind::kUnset:  // only empty lists: int64[]
      spec.type = kind.list || kind.base == ColumnKind::kInt ? FieldType::kInt64 : FieldType::kJson;
      break;
    case ColumnKind::kFloat:
      spec.type = FieldType::kFloat32;
      break;
    case ColumnKind::kJson:
      break;
  }
  if (kind.row_size) spec.inner_shape = {static_cast<std::uint32_t>(*kind.row_size)};
  return spec;
}

// `value` as its field stores it (little-endian numbers, flattened row by row).
std::vector<std::byte> Encode(const FieldSpec& spec, const json& value) {
  std::vector<std::byte> out;
  const auto append_number = [&](const json& number) {
    const std::size_t at = out.size();
    if (spec.type == FieldType::kInt64) {
      out.resize(at + 8);
      StoreLE<std::int64_t>(&out[at], number.get<std::int64_t>());
    } else {
      out.resize(at + 4);
      const float single = number.get<float>();
      std::uint32_t bits;
      std::memcpy(&bits, &single, sizeof bits);
      StoreLE<std::uint32_t>(&out[at], bits);
    }
  };
  if (spec.type == FieldType::kText) {
    const std::string& text = value.get_ref<const std::string&>();
    const auto* begin = reinterpret_cast<const std::byte*>(text.data());
    return {begin, begin + text.size()};
  }
  if (spec.type == FieldType::kJson) {
    const std::string text = value.dump();
    const auto* begin = reinterpret_cast<const std::byte*>(text.data());
    return {begin, begin + text.size()};
  }
  if (!value.is_array()) {
    append_number(value);
    return out;
  }
  for (const json& element : value) {
    if (element.is_array()) {
      for (const json& number : element) append_number(number);
    } else {
      append_number(element);
    }
  }
  return out;
}

// Why `value` cannot be stored as `spec` without changing a number (NumberProblem on each of
// its numbers); empty when it can.
std::string ValueProblem(const FieldSpec& spec, const json& value) {
  if (!IsNumericField(spec.type)) return "";
  if (!value.is_array()) return NumberProblem(spec.type, value);
  for (const json& element : value) {
    const std::string problem = ValueProblem(spec, element);
    if (!problem.empty()) return problem;
  }
  return "";
}

// One data row of the metadata file.
struct Row {
  std::size_t line = 0;
  std::string file_name;
  json columns;  // an object: column -> value
};

// Typed like pandas reads a CSV cell: an integer, else a float, else text; empty: absent.
json CsvCell(const std::string& cell) {
  if (cell.empty()) return nullptr;
  std::int64_t integer = 0;
  const char* end = cell.data() + cell.size();
  if (auto [at, error] = std::from_chars(cell.data(), end, integer);
      error == std::errc() && at == end) {
    return integer;
  }
  double number = 0;
  if (auto [at, error] = std::from_chars(cell.data(), end, number);
      error == std::errc() && at == end) {
    return number;
  }
  return cell;
}

// RFC 4180 records: fields split at commas, "quoted" fields may hold commas, "" and newlines.
// Hand-written: twenty lines, where a CSV library would be a dependency for one file.
Result<std::vector<std::pair<std::size_t, std::vector<std::string>>>> ParseCsv(
    std::string_view text, const std::string& name) {
  std::vector<std::pair<std::size_t, std::vector<std::string>>> records;
  std::vector<std::string> fields(1);
  std::size_t line = 1, record_line = 1;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        fields.back() += c;
      }
      continue;
    }
    if (c == '"' && fields.back().empty()) {
      quoted = any = true;
    } else if (c == ',') {
      fields.emplace_back();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !fields.back().empty()) records.emplace_back(record_line, std::move(fields));
      fields.assign(1, "");
      any = false;
      record_line = ++line;
    } else {
      fields.back() += c;
      any = true;
    }
  }
  if (quoted)
    return Status::InvalidInput(name + ":" + std::to_string(record_line) +
                                ": a quote is never closed");
  if (any || !fields.back().empty()) records.emplace_back(record_line, std::move(fields));
  return records;
}

// The rows of `path`, or rejects for rows that cannot be used.
Result<std::vector<Row>> ReadRows(const fs::path& path, bool csv, std::vector<Reject>& rejects) {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadWholeFile(path));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::string name = path.filename().string();
  std::vector<Row> rows;
  const auto reject = [&](std::size_t line, const std::string& why) {
    rejects.push_back({path.string() + ":" + std::to_string(line), why});
  };
  if (csv) {
    PACKREC_ASSIGN_OR_RETURN(auto records, ParseCsv(text, name));
    if (records.empty()) return rows;
    const std::vector<std::string> header = records.front().second;
    const auto file_column = std::find(header.begin(), header.end(), "file_name");
    if (file_column == header.end()) {
      return Status::InvalidInput(path.string() + ":1: the header has no file_name column");
    }
    for (std::size_t r = 1; r < records.size(); ++r) {
      const auto& [line, cells] = records[r];
      if (cells.size() != header.size()) {
        reject(line, std::to_string(cells.size()) + " cells, the header has " +
                         std::to_string(header.size()));
        continue;
      }
      Row row{line, cells[static_cast<std::size_t>(file_column - header.begin())], json::object()};
      for (std::size_t c = 0; c < header.size(); ++c) {
        if (header[c] != "file_name") row.columns[header[c]] = CsvCell(cells[c]);
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }
  std::size_t line = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view content = text.substr(begin, end - begin);
    ++line;
    begin = end + 1;
    if (content.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json object = json::parse(content, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object()) {
      reject(line, "not a JSON object");
      continue;
    }
    const auto file_name = object.find("file_name");
    if (file_name == object.end() || !file_name->is_string()) {
      reject(line, "no file_name string");
      continue;
    }
    Row row{line, file_name->get<std::string>(), json::object()};
    object.erase("file_name");
    row.columns = std::move(object);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

namespace {

// Row `row`'s values as `item`'s field values, in field order; why not, when a number cannot be
// stored as its column's type without changing it (the item's reject reason).
std::string AttachRow(const Row& row, const std::string& file,
                      const std::map<std::string, std::size_t>& field_of,
                      const std::vector<FieldSpec>& fields, SourceItem& item) {
  for (const auto& [column, value] : row.columns.items()) {
    if (value.is_null()) continue;
    const std::size_t field = field_of.at(column);
    const std::string problem = ValueProblem(fields[field], value);
    if (!problem.empty()) {
      return "line " + std::to_string(row.line) + " of " + file + ", column '" + column + "' (" +
             FieldTypeText(fields[field]) + "): " + problem;
    }
    item.field_values.emplace_back(field, Encode(fields[field], value));
  }
  std::sort(item.field_values.begin(), item.field_values.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return "";
}

}  // namespace

Status ApplyMetadataTable(const fs::path& root, SourceListing& listing) {
  const fs::path jsonl = root / "metadata.jsonl", csv = root / "metadata.csv";
  std::error_code error;
  const bool has_jsonl = fs::is_regular_file(jsonl, error),
             has_csv = fs::is_regular_file(csv, error);
  if (!has_jsonl && !has_csv) return Status::OK();
  if (has_jsonl && has_csv) {
    return Status::InvalidInput(root.string() +
                                " has both metadata.jsonl and metadata.csv; keep one");
  }
  const fs::path path = has_jsonl ? jsonl : csv;
  PACKREC_ASSIGN_OR_RETURN(std::vector<Row> rows, ReadRows(path, has_csv, listing.rejects));
  // Rows by image; an image two rows name is rejected with both.
  std::unordered_map<std::string, std::size_t> item_of;
  for (std::size_t i = 0; i < listing.items.size(); ++i) item_of.emplace(listing.items[i].key, i);
  std::vector<std::vector<std::size_t>> rows_of(listing.items.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto item = item_of.find(rows[r].file_name);
    if (item == item_of.end()) {
      listing.rejects.push_back({path.string() + ":" + std::to_string(rows[r].line),
                                 "its file_name '" + rows[r].file_name + "' is no listed image"});
      continue;
    }
    rows_of[item->second].push_back(r);
  }
  // Columns, typed over every row, in name order after the side-file fields.
  std::map<std::string, ColumnKind> kinds;
  for (const Row& row : rows) {
    for (const auto& [column, value] : row.columns.items()) {
      const std::optional<ColumnKind> kind = KindOf(value);
      ColumnKind& so_far = kinds[column];
      if (kind) so_far = Widen(so_far, *kind);
    }
  }
  std::map<std::string, std::size_t> field_of;
  for (const auto& [column, kind] : kinds) {
    for (const FieldSpec& existing : listing.fields) {
      if (existing.name == column) {
        return Status::InvalidInput(path.string() + ": column '" + column +
                                    "' has the name of the side files' field ." + column +
                                    "; rename one of them");
      }
    }
    FieldSpec spec = SpecOf(column, kind);
    const Status valid = ValidateSchema({spec});
    if (!valid.ok()) {
      return Status::InvalidInput(path.string() + ": column '" + column + "': " + valid.message());
    }
    field_of[column] = listing.fields.size();
    listing.fields.push_back(std::move(spec));
  }
  std::vector<SourceItem> kept;
  for (std::size_t i = 0; i < listing.items.size(); ++i) {
    SourceItem& item = listing.items[i];
    if (rows_of[i].size() != 1) {
      std::string why = "no row of " + path.filename().string() + " names it";
      if (rows_of[i].size() > 1) {
        why = "lines " + std::to_string(rows[rows_of[i][0]].line) + " and " +
              std::to_string(rows[rows_of[i][1]].line) + " of " + path.filename().string() +
              " both name it";
      }
      listing.rejects.push_back({item.path.string(), why});
      continue;
    }
    const std::string problem =
        AttachRow(rows[rows_of[i][0]], path.filename().string(), field_of, listing.fields, item);
    if (!problem.empty()) {
      listing.rejects.push_back({item.path.string(), problem});
      continue;
    }
    kept.push_back(std::move(item));
  }
  listing.items = std::move(kept);
  return Status::OK();
}

}  // namespace packrec
