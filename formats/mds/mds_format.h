// MosaicML Streaming's MDS (index.json + shard.NNNNN.mds, optionally zstd-compressed as
// .mds.zstd): the import source (docs/interop.md). A shard: uint32 sample count n, n + 1 uint32
// absolute offsets, the writer's JSON config, the samples. A sample: a uint32 size for each
// variable-size column, then every column's bytes, columns in index.json order (sorted by name).
#ifndef PACKREC_FORMATS_MDS_MDS_FORMAT_H_
#define PACKREC_FORMATS_MDS_MDS_FORMAT_H_

#include <filesystem>
#include <memory>

#include "packrec/source.h"

namespace packrec::mds {

Result<std::unique_ptr<RecordSource>> OpenMdsSource(const std::filesystem::path& dir,
                                                    const SourceOptions& options);

}  // namespace packrec::mds

#endif  // PACKREC_FORMATS_MDS_MDS_FORMAT_H_
