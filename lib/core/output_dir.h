// Preparing a dataset output directory without ever deleting something that is not ours.
#ifndef PACKREC_LIB_CORE_OUTPUT_DIR_H_
#define PACKREC_LIB_CORE_OUTPUT_DIR_H_

#include <filesystem>

#include "packrec/status.h"

namespace packrec {

// Makes `dir` an empty directory to write a dataset into.
// - missing: created (with parents); *created = true.
// - an empty directory: used.
// - a directory holding a packrec dataset (`marker_file` present) and `overwrite`: the marker is
//   removed first (so no reader sees a half-deleted dataset), then the rest.
// - anything else: AlreadyExists ("pass --overwrite") or InvalidArgument (not a dataset, not a
//   directory); nothing is touched.
Status PrepareOutputDirectory(const std::filesystem::path& dir, const char* marker_file,
                              bool overwrite, bool* created);

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_OUTPUT_DIR_H_
