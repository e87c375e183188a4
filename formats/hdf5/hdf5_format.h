// Entry points of the HDF5 format, used only by the registry (lib/dataset/registry.cc).
// hdf5.h is included only in this folder (hdf5_util.h and the .cc files).
#ifndef PACKREC_FORMATS_HDF5_HDF5_FORMAT_H_
#define PACKREC_FORMATS_HDF5_HDF5_FORMAT_H_

#include <filesystem>
#include <memory>

#include "packrec/reader.h"
#include "packrec/writer.h"
#include "storage/format_descriptor.h"

namespace packrec::hdf5 {

// This format's entry in the registry.
const FormatDescriptor& Hdf5Format();

// Beside a dataset FILE while it is written: the file under construction (FILE.tmp, renamed at
// Finish) and, when the payload total was not known up front, the payloads waiting to be copied
// into /data (FILE.payloads.tmp).
inline constexpr char kTempSuffix[] = ".tmp";
inline constexpr char kPayloadScratchSuffix[] = ".payloads.tmp";

// Whether `path` is a regular file that starts with the HDF5 signature; an error when it cannot
// be told (the file cannot be opened or read).
Result<bool> LooksLikeHdf5Dataset(const std::filesystem::path& path);
Result<std::unique_ptr<DatasetWriter>> CreateHdf5Writer(const std::filesystem::path& file,
                                                        const WriterOptions& options);
Result<ResumedWriter> ResumeHdf5Writer(const std::filesystem::path& file,
                                       const WriterOptions& options);
Result<std::unique_ptr<Reader>> OpenHdf5Dataset(const std::filesystem::path& file,
                                                const OpenOptions& options);

}  // namespace packrec::hdf5

#endif  // PACKREC_FORMATS_HDF5_HDF5_FORMAT_H_
