// The shard format on its own: what a program that reads or writes only shard datasets calls,
// linking packrec::shard (core, storage and this format: no HDF5, LMDB, protobuf, libarchive,
// OpenCV or CUDA). OpenDataset and CreateDatasetWriter (packrec::packrec) reach the same code
// through the format registry; the contracts in reader.h and writer.h hold here unchanged.
#ifndef PACKREC_SHARD_H_
#define PACKREC_SHARD_H_

#include <filesystem>
#include <memory>

#include "packrec/reader.h"
#include "packrec/status.h"
#include "packrec/writer.h"

namespace packrec {

// Opens the shard dataset in directory `dir` (docs/formats/shard.md). NotFound when `dir` holds
// no manifest.json; Corrupt / Truncated for a damaged dataset, naming the file.
Result<std::unique_ptr<Reader>> OpenShardDataset(const std::filesystem::path& dir,
                                                 const OpenOptions& options = {});

// Creates a shard writer at directory `dir`, as CreateDatasetWriter does for `options.format`
// "shard" (which is WriterOptions' default).
Result<std::unique_ptr<DatasetWriter>> CreateShardWriter(const std::filesystem::path& dir,
                                                         const WriterOptions& options = {});

}  // namespace packrec

#endif  // PACKREC_SHARD_H_
