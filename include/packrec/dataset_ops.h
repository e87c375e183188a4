// Whole-dataset operations built on the Reader interface: verify (optionally decoding every
// image) and extract (writing the original files back).
#ifndef PACKREC_DATASET_OPS_H_
#define PACKREC_DATASET_OPS_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec {

struct VerifyOptions {
  bool deep = false;  // also decode every image (CheckDecodes)
};

// The reader's own Verify, then, with `deep`, a decode of every record that passed.
VerifyStats VerifyDataset(const Reader& reader, const VerifyOptions& options,
                          VerifyReporter& reporter);

struct ExtractStats {
  std::uint64_t files_written = 0;
  std::uint64_t bytes_written = 0;
  // Keys that differ only in ASCII case: separate files here, but one file (and an AlreadyExists
  // error, never an overwrite) on a case-insensitive file system.
  std::vector<std::string> case_collisions;
};

// Writes every record to `out_dir / key`, byte for byte as stored (raw RGB records, from the HDF5
// pixels layout, as binary PPM with the key's extension replaced by .ppm). Refuses
// (InvalidArgument, naming the record) keys that are absolute, empty, contain "..", or resolve
// outside out_dir through a symlink, keys with control characters (newline, tab, ...), and two
// records that would be written to the same file (a collision). Existing files are an AlreadyExists
// error unless `overwrite`.
Result<ExtractStats> ExtractDataset(const Reader& reader, const std::filesystem::path& out_dir,
                                    bool overwrite = false);

}  // namespace packrec

#endif  // PACKREC_DATASET_OPS_H_
