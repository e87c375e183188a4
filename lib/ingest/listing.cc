#include <array>
#include <utility>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/random.h"
#include "ingest/listing_hash.h"
#include "packrec/ingest.h"

namespace packrec {

namespace {
constexpr std::byte kSeparator[1] = {std::byte{0}};
}  // namespace

void HashListingClasses(Xxh64Stream& hash, const std::vector<std::string>& classes) {
  for (const std::string& name : classes) {
    hash.Update(AsBytes(name));
    hash.Update(kSeparator);
  }
  hash.Update(kSeparator);
}

void HashListingItem(Xxh64Stream& hash, std::string_view key, std::uint32_t label) {
  hash.Update(AsBytes(key));
  hash.Update(kSeparator);
  std::array<std::byte, 4> bytes{};
  StoreLE<std::uint32_t>(bytes.data(), label);
  hash.Update(bytes);
}

std::string ListingHash(const SourceListing& listing) {
  Xxh64Stream hash;
  HashListingClasses(hash, listing.classes);
  for (const SourceItem& item : listing.items) {
    HashListingItem(hash, item.key, item.label);
    // Side files only where there are any, so an image-only listing hashes as it always did.
    for (const SideFile& side : item.side_files) {
      constexpr std::byte kSideFileMark[1] = {std::byte{1}};
      hash.Update(kSideFileMark);
      hash.Update(AsBytes(listing.fields[side.field].name));
      hash.Update(kSeparator);
    }
    for (const auto& [field, value] : item.field_values) {
      constexpr std::byte kValueMark[1] = {std::byte{2}};
      hash.Update(kValueMark);
      hash.Update(AsBytes(listing.fields[field].name));
      hash.Update(kSeparator);
      std::array<std::byte, 8> digest{};
      StoreLE<std::uint64_t>(digest.data(), Xxh64(value));
      hash.Update(digest);
    }
  }
  return Hex64(hash.Digest());
}

void ShuffleListing(SourceListing& listing, std::uint64_t seed) {
  SplitMix64 random(seed);
  auto& items = listing.items;
  for (std::size_t i = items.size(); i > 1; --i) {
    std::swap(items[i - 1], items[random.Below(i)]);
  }
}

}  // namespace packrec
