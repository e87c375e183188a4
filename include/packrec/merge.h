// Merge: the parts of a partitioned conversion (ConvertOptions::part_count, `convert --part I/N`)
// joined into the one dataset a single conversion of the same input would have written.
#ifndef PACKREC_MERGE_H_
#define PACKREC_MERGE_H_

#include <cstdint>
#include <filesystem>
#include <vector>

#include "packrec/status.h"

namespace packrec {

struct MergeOptions {
  bool overwrite = false;     // replace `output` if it holds a packrec dataset
  bool remove_parts = false;  // delete the parts once the merged dataset is complete
};

struct MergeStats {
  std::uint32_t parts = 0;
  std::uint64_t records = 0;
  std::uint64_t rejected = 0;
  std::uint64_t output_bytes = 0;
  double elapsed_seconds = 0;
};

// `parts`: the part datasets, or directories holding them (every part-*-of-* inside is taken),
// in any order. In place: when `parts` is just `output`, a directory of parts, the merged
// dataset is written beside it and moved into it, and the parts are removed (not for HDF5, whose
// dataset is one file). Before writing anything, checks that they are the parts of one conversion:
// the same part count, every part exactly once, the same listing hash, classes, source and options,
// item ranges that follow each other with no gap or overlap, and records + rejects = items in
// each. Then streams the records, in part order, through the format's writer with the parts'
// options, so the result is record for record (and for shards byte for byte) what one
// conversion writes; rejects lists are joined.
// Errors: InvalidInput naming the part and what disagrees (InvalidArgument: no parts); the parts'
// open errors; the writer's (AlreadyExists without overwrite, IOError). On error nothing is left at
// `output`.
Result<MergeStats> MergeParts(const std::vector<std::filesystem::path>& parts,
                              const std::filesystem::path& output, const MergeOptions& options);

}  // namespace packrec

#endif  // PACKREC_MERGE_H_
