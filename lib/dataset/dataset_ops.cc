#include "packrec/dataset_ops.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "core/file_io.h"
#include "core/tree_writer.h"
#include "packrec/image.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

// A key may only name a path below the output directory: relative, no empty, "." or ".."
// components, no NUL. Checked on the key's text, before any file system call.
bool HasControlCharacter(std::string_view key) {
  return std::any_of(key.begin(), key.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

// The key for a message: control characters as \xNN, so a newline cannot forge a second line.
std::string Printable(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

bool IsSafeRelativeKey(std::string_view key) {
  if (key.empty() || key.front() == '/' || key.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= key.size()) {
    std::size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    const std::string_view part = key.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

VerifyStats VerifyDataset(const Reader& reader, const VerifyOptions& options,
                          VerifyReporter& reporter) {
  VerifyStats stats = reader.Verify(reporter);
  if (!options.deep) return stats;
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < reader.size(); ++i) {
    Result<RecordView> view = reader.Read(i, scratch);
    if (!view.ok()) continue;  // Verify above has reported it
    Status decoded =
        view->encoding != Encoding::kRawRgb ? CheckDecodes(view->bytes)
        : view->bytes.size() == std::uint64_t{view->width} * view->height * 3
            ? Status::OK()
            : Status::Corruption("raw RGB record of " + std::to_string(view->bytes.size()) +
                                 " bytes is not " + std::to_string(view->width) + "x" +
                                 std::to_string(view->height) + "x3");
    if (!decoded.ok()) {
      reporter.Report({"", i, std::string(view->key), std::nullopt,
                       decoded.WithContext("record " + std::to_string(i) + " (key '" +
                                           std::string(view->key) + "') does not decode")});
      ++stats.problems;
    }
  }
  return stats;
}

Result<ExtractStats> ExtractDataset(const Reader& reader, const fs::path& out_dir, bool overwrite) {
  // Directories opened by descriptor without following links, files renamed into place: nothing
  // is created or written outside out_dir, whatever links are in it or appear while we write.
  PACKREC_ASSIGN_OR_RETURN(TreeWriter tree, TreeWriter::Open(out_dir));
  // Every key is checked before the first file is written, so a bad key leaves no partial tree.
  ExtractStats stats;
  std::unordered_map<std::string, std::uint64_t> targets;  // file name -> first record
  std::unordered_map<std::string, std::uint64_t> folded;   // ASCII-lowercased name -> record
  Status keys_ok = reader.ForEach([&](const RecordView& view) -> Status {
    const std::string where =
        "record " + std::to_string(view.index) + " (key '" + Printable(view.key) + "')";
    if (!IsSafeRelativeKey(view.key)) {
      return Status::InvalidArgument(where + ": key would escape the output directory; refusing");
    }
    if (HasControlCharacter(view.key)) {
      return Status::InvalidArgument(where +
                                     ": key holds a control character (a newline, a tab...); "
                                     "refusing to make such a file name");
    }
    fs::path name{std::string(view.key)};
    if (view.encoding == Encoding::kRawRgb) name.replace_extension(".ppm");
    const auto [first, fresh] = targets.emplace(name.generic_string(), view.index);
    if (!fresh) {
      return Status::InvalidArgument(where + ": record " + std::to_string(first->second) +
                                     " is extracted to the same file " + name.generic_string() +
                                     " (a key collision); refusing");
    }
    const auto [other, unique] = folded.emplace(AsciiLower(name.generic_string()), view.index);
    if (!unique) {
      stats.case_collisions.push_back("records " + std::to_string(other->second) + " and " +
                                      std::to_string(view.index) + " (" + name.generic_string() +
                                      ") differ only in case");
    }
    return Status::OK();
  });
  PACKREC_RETURN_IF_ERROR(keys_ok);
  Status status = reader.ForEach([&](const RecordView& view) -> Status {
    const std::string where =
        "record " + std::to_string(view.index) + " (key '" + Printable(view.key) + "')";
    fs::path target{std::string(view.key)};
    // Decoded pixels are written as binary PPM (P6), which every image tool opens.
    std::string ppm_header;
    if (view.encoding == Encoding::kRawRgb) {
      target.replace_extension(".ppm");
      ppm_header =
          "P6\n" + std::to_string(view.width) + " " + std::to_string(view.height) + "\n255\n";
    }
    std::span<const std::byte> contents = view.bytes;
    std::vector<std::byte> ppm;
    if (!ppm_header.empty()) {
      const auto header = AsBytes(ppm_header);
      ppm.assign(header.begin(), header.end());
      ppm.insert(ppm.end(), view.bytes.begin(), view.bytes.end());
      contents = ppm;
    }
    const Status written = tree.Write(target.generic_string(), contents, overwrite);
    if (!written.ok()) return written.WithContext(where);
    ++stats.files_written;
    stats.bytes_written += contents.size();
    return Status::OK();
  });
  if (!status.ok()) return status;
  return stats;
}

}  // namespace packrec
