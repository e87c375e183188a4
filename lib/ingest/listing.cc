#include <array>
#include <utility>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "core/random.h"
#include "packrec/ingest.h"

namespace packrec {

std::string ListingHash(const SourceListing& listing) {
  Xxh64Stream hash;
  static constexpr std::byte kSeparator[1] = {std::byte{0}};
  for (const std::string& name : listing.classes) {
    hash.Update(AsBytes(name));
    hash.Update(kSeparator);
  }
  hash.Update(kSeparator);
  for (const SourceItem& item : listing.items) {
    hash.Update(AsBytes(item.key));
    hash.Update(kSeparator);
    std::array<std::byte, 4> label{};
    StoreLE<std::uint32_t>(label.data(), item.label);
    hash.Update(label);
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
