#include "ingest/source_util.h"

#include <charconv>
#include <cstring>

namespace packrec {

bool ParseLabelText(std::string_view text, std::uint32_t* label) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.empty()) return false;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || value > UINT32_MAX) return false;
  std::string_view rest(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (!rest.empty()) {
    // "3.000000": a fraction of zeros only.
    if (rest.front() != '.') return false;
    rest.remove_prefix(1);
    for (const char c : rest) {
      if (c != '0') return false;
    }
  }
  *label = static_cast<std::uint32_t>(value);
  return true;
}

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::string_view SniffImageExtension(std::span<const std::byte> bytes) {
  const auto starts = [&](std::string_view magic, std::size_t at = 0) {
    return bytes.size() >= at + magic.size() &&
           std::memcmp(bytes.data() + at, magic.data(), magic.size()) == 0;
  };
  if (starts("\xff\xd8\xff")) return "jpg";
  if (starts("\x89PNG\r\n\x1a\n")) return "png";
  if (starts("RIFF") && starts("WEBP", 8)) return "webp";
  return "bin";
}

std::string RecordOrigin(const std::filesystem::path& file, std::uint64_t record,
                         std::uint64_t offset) {
  return file.string() + " record " + std::to_string(record) + " at byte " + std::to_string(offset);
}

Status SequentialFile::Open(const std::filesystem::path& path) {
  PACKREC_ASSIGN_OR_RETURN(file, RandomAccessFile::Open(path));
  PACKREC_ASSIGN_OR_RETURN(size, file->RegularFileSize());
  file->AdviseSequential(0, size);
  read_ahead.Reset();
  position = 0;
  number = 0;
  return Status::OK();
}

void ClassNameCollector::Note(std::uint32_t label, std::string_view name) {
  if (name.empty()) return;
  auto [it, inserted] = names_.try_emplace(label, name);
  if (!inserted && it->second != name) contradicted_ = true;
}

std::vector<std::string> ClassNameCollector::Complete() const {
  if (contradicted_ || names_.empty() || names_.rbegin()->first + 1 != names_.size()) return {};
  std::vector<std::string> classes;
  classes.reserve(names_.size());
  for (const auto& [label, name] : names_) classes.push_back(name);
  return classes;
}

}  // namespace packrec
