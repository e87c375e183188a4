// Entry points of the shard format, used only by the registry (lib/dataset/registry.cc).
#ifndef PACKREC_FORMATS_SHARD_SHARD_FORMAT_H_
#define PACKREC_FORMATS_SHARD_SHARD_FORMAT_H_

#include <filesystem>
#include <memory>
#include <string_view>

#include "packrec/reader.h"
#include "packrec/writer.h"
#include "storage/format_descriptor.h"

namespace packrec::shard {

// This format's entry in the registry.
const FormatDescriptor& ShardFormat();

// Whether `path` holds a dataset of this format; an error when the path cannot be read.
Result<bool> LooksLikeShardDataset(const std::filesystem::path& path);
Result<std::unique_ptr<DatasetWriter>> CreateShardWriter(const std::filesystem::path& dir,
                                                         const WriterOptions& options);
Result<ResumedWriter> ResumeShardWriter(const std::filesystem::path& dir,
                                        const WriterOptions& options);
Result<std::unique_ptr<Reader>> OpenShardDataset(const std::filesystem::path& dir,
                                                 const OpenOptions& options);
// A shard dataset at a URL (storage/object_store.h): manifest, headers and indexes by ranged GETs
// at open, records by ranged GETs as they are read.
Result<std::unique_ptr<Reader>> OpenRemoteShardDataset(std::string_view url,
                                                       const OpenOptions& options);

}  // namespace packrec::shard

#endif  // PACKREC_FORMATS_SHARD_SHARD_FORMAT_H_
