// Whole-dataset operations built on the Reader interface: verify (optionally decoding every
// image) and extract (writing the original files back).
#ifndef PACKREC_DATASET_OPS_H_
#define PACKREC_DATASET_OPS_H_

#include <cstdint>
#include <filesystem>
#include <memory>
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

struct ExtractOptions {
  bool overwrite = false;  // replace files that exist (else AlreadyExists)
  // Leave out each record that cannot be read (a checksum, a truncated or damaged shard: open the
  // reader with OpenOptions::allow_damaged_shards to reach the records of the good ones) or whose
  // key cannot be a file name, list it in ExtractStats::skipped, and extract every other record.
  // Without it the first such record is the error, found before any file is written.
  bool skip_bad_records = false;
};

// A record extract left out (skip_bad_records) and why.
struct ExtractSkipped {
  std::uint64_t record_index = 0;
  std::string key;  // empty when the record could not be read at all
  Status status;
};

struct ExtractStats {
  std::uint64_t files_written = 0;
  std::uint64_t bytes_written = 0;
  // Keys that differ only in ASCII case: separate files here, but one file (and an AlreadyExists
  // error, never an overwrite) on a case-insensitive file system.
  std::vector<std::string> case_collisions;
  std::vector<ExtractSkipped> skipped;  // in record order
};

// Writes every record to `out_dir / key`, byte for byte as stored (raw RGB records, from the HDF5
// pixels layout, as binary PPM with the key's extension replaced by .ppm). Refuses
// (InvalidArgument, naming the record) keys that are absolute, empty, contain "..", or resolve
// outside out_dir through a symlink, keys with control characters (newline, tab, ...), and two
// records that would be written to the same file (a collision). Existing files are an AlreadyExists
// error unless `overwrite`. A failure before any file is written leaves no out_dir it created.
Result<ExtractStats> ExtractDataset(const Reader& reader, const std::filesystem::path& out_dir,
                                    const ExtractOptions& options);
inline Result<ExtractStats> ExtractDataset(const Reader& reader,
                                           const std::filesystem::path& out_dir,
                                           bool overwrite = false) {
  return ExtractDataset(reader, out_dir, ExtractOptions{overwrite, false});
}

// Several datasets read as one: records in order, dataset 0's first, then 1's, ... For a loader
// over all of them (torch's ConcatDataset), or mixing them in set proportions (LoaderOptions::
// weights, one weight per record: proportion_k / records_k). The result keeps the parts alive and
// is as thread-safe as they are. Labels stay each part's own; `classes` and `fields` are the
// parts' when all have the same, else empty (fields then read as absent). The listing hash names
// the parts in order (each one's listing hash, counts and convert options), so a loader state of
// one concatenation resumes no other. Errors: InvalidArgument for no parts or a null one.
Result<std::unique_ptr<Reader>> ConcatenateDatasets(
    std::vector<std::shared_ptr<const Reader>> parts);

}  // namespace packrec

#endif  // PACKREC_DATASET_OPS_H_
