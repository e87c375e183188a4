// What every format does the same way with a record's payload: optional zstd on the way in,
// decompression on the way out, and the checks on writer options and keys that go with them.
// payload.cc is the only file that includes zstd.h.
#ifndef PACKREC_LIB_STORAGE_PAYLOAD_H_
#define PACKREC_LIB_STORAGE_PAYLOAD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "packrec/reader.h"
#include "packrec/status.h"
#include "packrec/writer.h"

namespace packrec {

// Records larger than this never decompress (guards a forged raw size).
inline constexpr std::uint64_t kMaxRawRecordBytes = 1ull << 32;

struct StoredPayload {
  std::span<const std::byte> bytes;  // record.bytes, or a zstd frame in the caller's buffer
  bool zstd = false;
};

// With zstd enabled, compresses payloads that are not JPEG (entropy-coded data does not compress;
// trying would only burn convert time) and keeps the frame only when it is smaller.
Result<StoredPayload> PreparePayload(const RecordInput& record, const WriterOptions& options,
                                     std::vector<std::byte>& buffer);
// Whether PreparePayload tries to compress `record` (false: it stores record.bytes as they are).
bool MayCompress(const RecordInput& record, const WriterOptions& options);

// The checksum a writer stores for record `index` stored as `stored`: record.checksum when it was
// computed for that index over those very bytes, else XXH64(stored, seed = index).
std::uint64_t StoredChecksum(const RecordInput& record, std::span<const std::byte> stored,
                             std::uint64_t index);

// The options of WriterOptions that belong to one format, which the others refuse.
struct FormatOwnedOptions {
  bool pixel_layout = false;        // hdf5_layout kPixels, pixel_height, pixel_width
  bool caffe_datum_values = false;  // lmdb_values kCaffeDatum
};

// Checks the options every writer shares (compression level), naming the flag, and refuses the
// options of another format than the calling writer's (`owned`: the ones it takes).
Status ValidateCommonWriterOptions(const WriterOptions& options, FormatOwnedOptions owned = {});
// `result`, or its error marked with the record and the file it is about (Status::record_index,
// Status::path): what every format's Reader::Read returns.
template <typename T>
Result<T> AtRecord(Result<T> result, std::uint64_t index, const std::string& path) {
  if (result.ok()) return result;
  Status status = result.status();
  if (!status.record_index()) status = status.WithRecordIndex(index);
  if (status.path().empty()) status = status.WithPath(path);
  return status;
}

// InvalidArgument (naming the record and field) when record `index`'s field values do not match
// the schema in `options` (ValidateFieldValue).
Status CheckRecordFields(const WriterOptions& options, const RecordInput& record,
                         std::uint64_t index);

// InvalidArgument when a key is longer than `max_bytes`, naming the record.
Status CheckKeySize(std::uint64_t index, std::size_t key_size, std::size_t max_bytes);

// Decompresses one zstd frame that must hold exactly `raw_size` bytes into scratch.bytes.
// Corruption (prefixed with `where`) otherwise.
Status DecompressPayload(std::span<const std::byte> stored, std::uint64_t raw_size,
                         ReadScratch& scratch, const std::string& where);

// Decompresses a whole zstd stream (one or more frames), refusing more than `max_bytes` out
// (InvalidInput), a damaged stream (Corruption) or one cut short (Truncated), each prefixed
// with `where`.
Result<std::vector<std::byte>> DecompressZstdFrames(std::span<const std::byte> compressed,
                                                    std::uint64_t max_bytes,
                                                    const std::string& where);

// The OutOfRange error of Read(index) on a dataset of `size` records.
Status IndexOutOfRange(std::uint64_t index, std::uint64_t size);

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_PAYLOAD_H_
