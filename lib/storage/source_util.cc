#include "storage/source_util.h"

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

void FileListSource::RejectUnopenedFile(SourceRecord& record, const Status& why) {
  const std::filesystem::path& file = files_[file_index_];
  record = SourceRecord{};
  record.origin = file.string();
  record.status = why.WithSuffix("; the file is not read");
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(file, error);
  LeaveFile(error ? 0 : size);
}

Status SequentialFile::Open(const std::filesystem::path& path) {
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> opened, RandomAccessFile::Open(path));
  PACKREC_ASSIGN_OR_RETURN(size, opened->RegularFileSize());
  file = std::move(opened);
  file->AdviseSequential(0, size);
  read_ahead.Reset();
  position = 0;
  number = 0;
  window_size_ = 0;
  return Status::OK();
}

std::span<const std::byte> SequentialFile::Windowed(std::uint64_t from) const {
  if (from < window_offset_ || from >= window_offset_ + window_size_) return {};
  return std::span<const std::byte>(window_)
      .first(window_size_)
      .subspan(static_cast<std::size_t>(from - window_offset_));
}

Status SequentialFile::EndIfFailed(Status read) {
  if (!read.ok()) position = size;
  return read;
}

Status SequentialFile::FillWindow(std::uint64_t from) {
  window_size_ = 0;
  if (from >= size) {
    return EndIfFailed(Status::Truncated("read past the end of the file (byte " +
                                         std::to_string(from) + " of " + std::to_string(size) +
                                         ")"));
  }
  // No bigger than the file: a file of a few KiB (a .lst, a small shard, each fuzz input) does
  // not pay for zeroing and mapping a whole window.
  const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(kWindowBytes, size));
  if (window_.size() < wanted) window_.resize(wanted);
  const auto length = static_cast<std::size_t>(std::min<std::uint64_t>(kWindowBytes, size - from));
  PACKREC_RETURN_IF_ERROR(EndIfFailed(file->ReadExact(from, std::span(window_).first(length))));
  window_offset_ = from;
  window_size_ = length;
  return Status::OK();
}

Status SequentialFile::Read(std::uint64_t offset, std::span<std::byte> out) {
  while (!out.empty()) {
    std::span<const std::byte> have = Windowed(offset);
    if (have.empty()) {
      if (out.size() >= kWindowBytes) return EndIfFailed(file->ReadExact(offset, out));
      PACKREC_RETURN_IF_ERROR(FillWindow(offset));
      have = Windowed(offset);
    }
    const std::size_t n = std::min(have.size(), out.size());
    std::memcpy(out.data(), have.data(), n);
    out = out.subspan(n);
    offset += n;
  }
  return Status::OK();
}

Status SequentialFile::AppendTo(std::uint64_t offset, std::size_t length,
                                std::vector<std::byte>& out) {
  out.reserve(out.size() + length);
  while (length > 0) {
    std::span<const std::byte> have = Windowed(offset);
    if (have.empty()) {
      if (length >= kWindowBytes) {  // a record as large as the window: straight into `out`
        const std::size_t before = out.size();
        out.resize(before + length);
        return EndIfFailed(file->ReadExact(offset, std::span(out).subspan(before)));
      }
      PACKREC_RETURN_IF_ERROR(FillWindow(offset));
      have = Windowed(offset);
    }
    const std::size_t n = std::min(have.size(), length);
    out.insert(out.end(), have.begin(), have.begin() + static_cast<std::ptrdiff_t>(n));
    offset += n;
    length -= n;
  }
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
