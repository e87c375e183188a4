// Entry points of the LMDB format, used only by the registry (lib/dataset/registry.cc).
// lmdb.h is included only in this folder's .cc files.
#ifndef PACKREC_FORMATS_LMDB_LMDB_FORMAT_H_
#define PACKREC_FORMATS_LMDB_LMDB_FORMAT_H_

#include <filesystem>
#include <memory>

#include "packrec/reader.h"
#include "packrec/source.h"
#include "packrec/writer.h"
#include "storage/format_descriptor.h"

namespace packrec::lmdb {

// This format's entry in the registry.
const FormatDescriptor& LmdbFormat();

// Whether `path` holds a dataset of this format; an error when the path cannot be read.
Result<bool> LooksLikeLmdbDataset(const std::filesystem::path& path);
Result<std::unique_ptr<DatasetWriter>> CreateLmdbWriter(const std::filesystem::path& dir,
                                                        const WriterOptions& options);
Result<ResumedWriter> ResumeLmdbWriter(const std::filesystem::path& dir,
                                       const WriterOptions& options);
Result<std::unique_ptr<Reader>> OpenLmdbDataset(const std::filesystem::path& dir,
                                                const OpenOptions& options);
// A Caffe image database (values caffe.Datum): a directory holding data.mdb, or the file itself.
Result<std::unique_ptr<RecordSource>> OpenCaffeLmdbSource(const std::filesystem::path& path,
                                                          const SourceOptions& options);

}  // namespace packrec::lmdb

#endif  // PACKREC_FORMATS_LMDB_LMDB_FORMAT_H_
