// WebDataset tar shards: the import source and the export writer (docs/interop.md). libarchive
// reads and writes the tar framing; wds_source.cc and wds_writer.cc are the only files that
// include archive.h.
#ifndef PACKREC_FORMATS_WDS_WDS_FORMAT_H_
#define PACKREC_FORMATS_WDS_WDS_FORMAT_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "packrec/source.h"
#include "packrec/writer.h"
#include "storage/format_descriptor.h"

namespace packrec::wds {

// This format's entry in the registry.
const FormatDescriptor& WdsFormat();

Result<std::unique_ptr<RecordSource>> OpenWdsSource(std::vector<std::filesystem::path> files,
                                                    const SourceOptions& options);
Result<std::unique_ptr<DatasetWriter>> CreateWdsWriter(const std::filesystem::path& dir,
                                                       const WriterOptions& options);

// The suffix of the member a field is exported as (and read back from): its own
// (FieldFileSuffix), with .npy after it for an array whose suffix does not say so already.
std::string MemberSuffix(const FieldSpec& spec);

}  // namespace packrec::wds

#endif  // PACKREC_FORMATS_WDS_WDS_FORMAT_H_
