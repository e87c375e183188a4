// TFRecord files of tf.Example: the import source and the export writer (docs/interop.md).
// Framing per record: uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32
// masked CRC-32C of the data, all little-endian. tf.Example is parsed and written by libprotobuf
// from example.proto.
#ifndef PACKREC_FORMATS_TFRECORD_TFRECORD_FORMAT_H_
#define PACKREC_FORMATS_TFRECORD_TFRECORD_FORMAT_H_

#include <filesystem>
#include <memory>
#include <vector>

#include "packrec/source.h"
#include "packrec/writer.h"
#include "storage/format_descriptor.h"

namespace packrec::tfrecord {

// This format's entry in the registry.
const FormatDescriptor& TfRecordFormat();

inline constexpr std::size_t kFrameHeaderSize = 12;  // length + its CRC
inline constexpr std::size_t kFrameFooterSize = 4;   // the data's CRC

// True when `header` (12 bytes) is a TFRecord frame header whose CRC matches.
bool LooksLikeFrameHeader(std::span<const std::byte> header);

Result<std::unique_ptr<RecordSource>> OpenTfRecordSource(std::vector<std::filesystem::path> files,
                                                         const SourceOptions& options);
Result<std::unique_ptr<DatasetWriter>> CreateTfRecordWriter(const std::filesystem::path& dir,
                                                            const WriterOptions& options);

}  // namespace packrec::tfrecord

#endif  // PACKREC_FORMATS_TFRECORD_TFRECORD_FORMAT_H_
