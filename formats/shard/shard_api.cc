// The public entry points of packrec/shard.h, for programs that link the shard format alone.
// (A separate file: beside packrec::shard's own functions of the same names, unqualified calls
// would be ambiguous through argument-dependent lookup.)
#include "packrec/shard.h"

#include "shard/shard_format.h"

namespace packrec {

Result<std::unique_ptr<Reader>> OpenShardDataset(const std::filesystem::path& dir,
                                                 const OpenOptions& options) {
  return shard::OpenShardDataset(dir, options);
}

Result<std::unique_ptr<DatasetWriter>> CreateShardWriter(const std::filesystem::path& dir,
                                                         const WriterOptions& options) {
  return shard::CreateShardWriter(dir, options);
}

}  // namespace packrec
