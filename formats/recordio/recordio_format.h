// MXNet RecordIO (dmlc-core's recordio, as im2rec writes it): the import source and the export
// writer (docs/interop.md). Per part: uint32 magic 0xced7230a, uint32 lrecord (the top 3 bits the
// part flag: 0 whole, 1 first, 2 middle, 3 last; the low 29 the length), the bytes, zero padding
// to 4. A record containing the magic at a 4-aligned offset is split there, the magic dropped;
// readers put it back between the parts. Image records start with IRHeader {uint32 flag,
// float32 label, uint64 id, uint64 id2}, then `flag` float32 labels when flag > 0, then the image.
#ifndef PACKREC_FORMATS_RECORDIO_RECORDIO_FORMAT_H_
#define PACKREC_FORMATS_RECORDIO_RECORDIO_FORMAT_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "packrec/source.h"
#include "packrec/writer.h"
#include "storage/format_descriptor.h"

namespace packrec::recordio {

// This format's entry in the registry.
const FormatDescriptor& RecordIoFormat();

inline constexpr std::uint32_t kMagic = 0xced7230a;
inline constexpr std::size_t kPartHeaderSize = 8;  // the magic, then lrecord (flag, length)
inline constexpr std::size_t kIrHeaderSize = 24;
// The field that holds a record's packed labels (IRHeader.flag float32 values, im2rec
// --pack-label), on import and export.
inline constexpr std::string_view kPackLabelField = "pack_label";
inline constexpr std::uint32_t kMaxPartLength = (1u << 29) - 1;

Result<std::unique_ptr<RecordSource>> OpenRecordIoSource(std::vector<std::filesystem::path> files,
                                                         const SourceOptions& options);
Result<std::unique_ptr<DatasetWriter>> CreateRecordIoWriter(const std::filesystem::path& dir,
                                                            const WriterOptions& options);

}  // namespace packrec::recordio

#endif  // PACKREC_FORMATS_RECORDIO_RECORDIO_FORMAT_H_
