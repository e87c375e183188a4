#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <vector>

#include "core/file_io.h"
#include "packrec/ingest.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  while (!text.empty() && (text.front() == ' ')) text.remove_prefix(1);
  return text;
}

bool ParseLabel(std::string_view text, bool allow_float, std::uint32_t* label) {
  text = Trim(text);
  std::uint32_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc() && end == text.data() + text.size()) {
    *label = value;
    return true;
  }
  if (!allow_float) return false;
  // im2rec writes labels as floats ("3.000000").
  double real = 0;
  auto [float_end, float_error] = std::from_chars(text.data(), text.data() + text.size(), real);
  if (float_error != std::errc() || float_end != text.data() + text.size() || real < 0 ||
      real > UINT32_MAX || std::floor(real) != real) {
    return false;
  }
  *label = static_cast<std::uint32_t>(real);
  return true;
}

std::string LineWhere(const fs::path& file, std::size_t line) {
  return file.string() + ":" + std::to_string(line);
}

}  // namespace

Result<SourceListing> ReadListFile(const fs::path& list_file, const fs::path& root,
                                   ListFileKind kind) {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadWholeFile(list_file));
  const std::string_view text = AsText(bytes);
  if (text.find('\0') != std::string_view::npos ||
      (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0xFF)) {
    return Status::InvalidInput("input " + list_file.string() +
                                " is not a directory (an image folder) or a text list file");
  }
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return Status::InvalidArgument("--root " + root.string() + " is not a directory");
  }
  SourceListing listing;
  std::size_t line_number = 0;
  for (const std::string_view text_line : SplitLines(text)) {
    const std::string_view line = Trim(text_line);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    if (kind == ListFileKind::kAuto) {
      kind =
          line.find('\t') != std::string_view::npos ? ListFileKind::kMxnet : ListFileKind::kCaffe;
    }
    SourceItem item;
    std::string_view path;
    if (kind == ListFileKind::kCaffe) {
      // convert_imageset splits at the last space, so paths may contain spaces.
      const std::size_t space = line.find_last_of(' ');
      if (space == std::string_view::npos ||
          !ParseLabel(line.substr(space + 1), false, &item.label)) {
        return Status::InvalidInput(LineWhere(list_file, line_number) +
                                    ": expected '<path> <label>' with a non-negative integer "
                                    "label (Caffe list format)");
      }
      path = Trim(line.substr(0, space));
    } else {
      std::vector<std::string_view> fields;
      std::size_t field_start = 0;
      for (;;) {
        const std::size_t tab = line.find('\t', field_start);
        fields.push_back(line.substr(field_start, tab - field_start));
        if (tab == std::string_view::npos) break;
        field_start = tab + 1;
      }
      std::uint32_t ignored_index = 0;
      if (fields.size() < 3 || !ParseLabel(fields[0], false, &ignored_index) ||
          !ParseLabel(fields[1], true, &item.label)) {
        return Status::InvalidInput(LineWhere(list_file, line_number) +
                                    ": expected '<index>\\t<label>\\t<path>' with a "
                                    "non-negative integer label (MXNet .lst format)");
      }
      path = fields.back();
    }
    if (path.empty()) {
      return Status::InvalidInput(LineWhere(list_file, line_number) + ": empty path");
    }
    while (path.size() > 2 && path.substr(0, 2) == "./") path.remove_prefix(2);
    item.key = std::string(path);
    item.path = root / item.key;
    listing.items.push_back(std::move(item));
  }
  listing.kind = kind == ListFileKind::kMxnet ? "mxnet-list" : "caffe-list";
  return listing;
}

}  // namespace packrec
