#include <doctest/doctest.h>

#include <algorithm>

#include "packrec/ingest.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Keys(const SourceListing& listing) {
  std::vector<std::string> keys;
  for (const SourceItem& item : listing.items) keys.push_back(item.key);
  return keys;
}

TEST_CASE("image folder assigns labels and order exactly as torchvision's ImageFolder") {
  test::TempDir dir;
  const fs::path root = dir / "root";
  for (const char* file :
       {"dog/b.jpg", "dog/a.JPEG", "dog/sub/c.png", "dog/sub dir/d.jpg", "dog/sub/deeper/e.jpeg",
        "cat/z.Jpg", "cat/notes.txt", "cat/x.webp", "Zebra/1.jpg", "élan/ü 1.jpg", "stray.jpg"}) {
    test::WriteText(root / file, "not decoded at listing time");
  }
  fs::create_directories(root / "empty");

  auto listing = ListImageFolder(root);
  REQUIRE(listing.ok());
  CHECK(listing->kind == "image-folder");
  // Sorted by code point: upper case before lower case, ASCII before 'é'.
  CHECK(listing->classes == std::vector<std::string>{"Zebra", "cat", "dog", "empty", "élan"});
  CHECK(listing->empty_classes == std::vector<std::string>{"empty"});
  // os.walk order: sorted directory paths ("dog" < "dog/sub" < "dog/sub dir"? no: ' ' < '/'),
  // then sorted names; .txt ignored, .webp listed (ImageFolder lists it), stray root files ignored.
  CHECK(Keys(*listing) == std::vector<std::string>{"Zebra/1.jpg", "cat/x.webp", "cat/z.Jpg",
                                                   "dog/a.JPEG", "dog/b.jpg", "dog/sub/c.png",
                                                   "dog/sub dir/d.jpg", "dog/sub/deeper/e.jpeg",
                                                   "élan/ü 1.jpg"});
  std::vector<std::uint32_t> labels;
  for (const SourceItem& item : listing->items) labels.push_back(item.label);
  CHECK(labels == std::vector<std::uint32_t>{0, 1, 1, 2, 2, 2, 2, 2, 4});
  CHECK(listing->items.back().path == root / "élan/ü 1.jpg");
}

TEST_CASE("image folder errors: missing root, root that is a file") {
  test::TempDir dir;
  auto missing = ListImageFolder(dir / "nope");
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("nope") != std::string::npos);
  test::WriteText(dir / "file", "x");
  auto file = ListImageFolder(dir / "file");
  CHECK(file.status().code() == StatusCode::kInvalidInput);
  CHECK(file.status().message().find("not a directory") != std::string::npos);
}

TEST_CASE("listing hash depends on keys, labels and classes, and shuffle is a seeded permutation") {
  SourceListing listing;
  listing.classes = {"a", "b"};
  for (std::uint32_t i = 0; i < 50; ++i) {
    listing.items.push_back({"", "k" + std::to_string(i), i % 2});
  }
  const std::string hash = ListingHash(listing);
  SourceListing relabeled = listing;
  relabeled.items[3].label = 0;
  CHECK(ListingHash(relabeled) != hash);
  SourceListing renamed = listing;
  renamed.classes[1] = "c";
  CHECK(ListingHash(renamed) != hash);

  SourceListing a = listing;
  SourceListing b = listing;
  ShuffleListing(a, 5);
  ShuffleListing(b, 5);
  CHECK(Keys(a) == Keys(b));
  CHECK(Keys(a) != Keys(listing));
  auto sorted = Keys(a);
  std::sort(sorted.begin(), sorted.end());
  auto original = Keys(listing);
  std::sort(original.begin(), original.end());
  CHECK(sorted == original);
  ShuffleListing(b, 6);
  CHECK(Keys(a) != Keys(b));
}

}  // namespace
}  // namespace packrec
