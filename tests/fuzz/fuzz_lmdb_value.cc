// Fuzz target: the LMDB reader's record-value decoding (packrec's value header, key and payload,
// or a caffe.Datum carrying them), with and without checksum verification, in both layouts.
#include <cstddef>
#include <cstdint>
#include <span>

#include "lmdb/lmdb_value.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> value(reinterpret_cast<const std::byte*>(data), size);
  packrec::ReadScratch scratch;
  for (const bool datum : {false, true}) {
    for (const bool verify : {false, true}) {
      for (const std::uint32_t layout : {1u, 2u}) {
        (void)packrec::lmdb::DecodeRecordValue(0, value, datum, verify, layout, "fuzz", scratch);
      }
    }
    (void)packrec::lmdb::RecordValueKey(value, datum);
  }
  return 0;
}
