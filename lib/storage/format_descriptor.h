// What a storage format folder exports about itself (formats/X/X_format.h: `XFormat()`), and all
// the registry (lib/dataset/registry.cc) and the layers above it know of the format: its name and
// traits, its entry points, its own options, and the files its writer keeps beside its output.
#ifndef PACKREC_LIB_STORAGE_FORMAT_DESCRIPTOR_H_
#define PACKREC_LIB_STORAGE_FORMAT_DESCRIPTOR_H_

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/format.h"
#include "packrec/reader.h"
#include "packrec/status.h"
#include "packrec/writer.h"

namespace packrec {

struct FormatDescriptor {
  FormatInfo info;

  // Readable formats: whether `path` holds a dataset of this format (an error when the path
  // cannot be read), and opening it. Null for exports.
  Result<bool> (*looks_like)(const std::filesystem::path& path) = nullptr;
  Result<std::unique_ptr<Reader>> (*open)(const std::filesystem::path& path,
                                          const OpenOptions& options) = nullptr;
  // Formats read from URLs (https://, http://, s3://; storage/object_store.h): opening one. Null
  // for the others. A URL has no directory listing to detect a format by: OpenDataset hands it
  // to the first format that has this.
  Result<std::unique_ptr<Reader>> (*open_url)(std::string_view url,
                                              const OpenOptions& options) = nullptr;

  Result<std::unique_ptr<DatasetWriter>> (*create)(const std::filesystem::path& path,
                                                   const WriterOptions& options) = nullptr;
  // Resumable formats: reopening an interrupted conversion (ResumeDatasetWriter). Else null.
  Result<ResumedWriter> (*resume)(const std::filesystem::path& path,
                                  const WriterOptions& options) = nullptr;

  // The options only this format takes, written into the convert options a manifest records (its
  // identity for --resume and merge) and read back from them (merge writes with the parts'
  // options). Null: the format has none. `from_json` may throw nlohmann::json::exception.
  void (*options_to_json)(const WriterOptions& options, nlohmann::json& out) = nullptr;
  void (*options_from_json)(const nlohmann::json& in, WriterOptions& options) = nullptr;

  // Whether the writer uses WriterOptions::expected_payload_bytes (LMDB sizes its map with it,
  // HDF5 places /data with it), so a caller should add up the inputs' sizes up front.
  bool uses_payload_total = false;

  // Files the writer of a dataset at PATH keeps at PATH + suffix while it works (temporaries, the
  // resume journal of a single-file format): removed with the dataset when a run starts over.
  std::vector<std::string> side_file_suffixes;
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_FORMAT_DESCRIPTOR_H_
