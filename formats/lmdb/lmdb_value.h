// Reading one record's LMDB value, as the LMDB reader does and as the fuzz target drives it.
#ifndef PACKREC_FORMATS_LMDB_LMDB_VALUE_H_
#define PACKREC_FORMATS_LMDB_LMDB_VALUE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec::lmdb {

// Record `index`'s value: packrec's value header, the key and the payload, or, with `datum`, a
// caffe.Datum carrying them (docs/formats/lmdb.md), in a dataset of layout `format_version` (its
// manifest's: every value has that header version). Checks the header's bounds, its own checksum
// (version 2, always: it costs a hash of 40 bytes and the key), the payload's checksum when
// `verify`, and the stored size; decompresses zstd into `scratch`. Corruption errors name
// `data_file` and the record. The view points into `value` or `scratch`.
Result<RecordView> DecodeRecordValue(std::uint64_t index, std::span<const std::byte> value,
                                     bool datum, bool verify, std::uint32_t format_version,
                                     const std::string& data_file, ReadScratch& scratch);

// The field block of record `index`'s fields value (version 3), its header checked and, with
// `verify`, its checksum (Corruption naming `data_file` and the record). Points into `value`.
Result<std::span<const std::byte>> DecodeFieldsValue(std::uint64_t index,
                                                     std::span<const std::byte> value, bool verify,
                                                     const std::string& data_file);

// The key a value names, for reporting a damaged record; empty when even that cannot be read.
std::string RecordValueKey(std::span<const std::byte> value, bool datum);

}  // namespace packrec::lmdb

#endif  // PACKREC_FORMATS_LMDB_LMDB_VALUE_H_
