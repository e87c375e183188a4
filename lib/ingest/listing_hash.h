// The bytes a listing hash is made of, in one place: ListingHash (a file listing) and imports
// (records streamed from a source) hash classes and (key, label) pairs the same way.
#ifndef PACKREC_LIB_INGEST_LISTING_HASH_H_
#define PACKREC_LIB_INGEST_LISTING_HASH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/checksum.h"

namespace packrec {

// Each class name and a 0 byte, then one more 0 byte.
void HashListingClasses(Xxh64Stream& hash, const std::vector<std::string>& classes);
// The key, a 0 byte, the label as 4 little-endian bytes.
void HashListingItem(Xxh64Stream& hash, std::string_view key, std::uint32_t label);

}  // namespace packrec

#endif  // PACKREC_LIB_INGEST_LISTING_HASH_H_
