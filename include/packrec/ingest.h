// Input listings: which files a conversion reads, in which order, with which labels.
#ifndef PACKREC_INGEST_H_
#define PACKREC_INGEST_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "packrec/status.h"
#include "packrec/writer.h"  // Reject

namespace packrec {

// A file beside an image that carries one field of its record: `0001.txt` or `0001.mask.png`
// beside `0001.jpg` (the layout img2dataset's "files" output writes).
struct SideFile {
  std::size_t field = 0;       // index into SourceListing::fields
  std::filesystem::path path;  // where to read the file
};

struct SourceItem {
  std::filesystem::path path;  // where to read the file
  std::string key;             // relative path stored with the record ('/' separated)
  std::uint32_t label = 0;
  std::vector<SideFile> side_files = {};  // sorted by field; at most one per field
  // Values given inline (a metadata.jsonl row): (field index, value bytes as stored), by field.
  std::vector<std::pair<std::size_t, std::vector<std::byte>>> field_values = {};
};

struct SourceListing {
  std::string kind;                  // "image-folder", "caffe-list" or "mxnet-list"
  std::vector<std::string> classes;  // image folders only: label i is classes[i]
  std::vector<SourceItem> items;
  std::vector<std::string> empty_classes;  // class folders without any image file
  // What listing left out, and why: a directory reached again through a symlink (a loop, which
  // os.walk(followlinks=True), and so ImageFolder, would follow forever).
  std::vector<Reject> rejects;
  // The fields the side files carry (their suffixes, sorted), which the dataset's schema becomes;
  // empty when no image has a side file.
  std::vector<FieldSpec> fields;
  // COCO input (--annotations): the JSON's "categories", which the manifest's options keep.
  std::string categories_json = {};
};

enum class ListFileKind { kAuto, kCaffe, kMxnet };

// Lists `root/<class>/.../<file>` exactly as torchvision's ImageFolder does: classes are the
// sorted names of root's sub-directories (byte order, as Python sorts str), labels their index;
// within a class, files sorted by (directory, name); symlinks followed; extensions matched
// case-insensitively against ImageFolder's list (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp).
// Side files: a file in an image's directory named <image stem>.<suffix> (the image's name without
// its extension, a dot, anything) carries a field named by the suffix: `0001.txt`, `0001.json`,
// `0001.cls`, `0001.mask.png` beside `0001.jpg`. An image file is a side file only when its suffix
// has two parts (`0001.mask.png`): `0001.png` beside `0001.jpg` stays a record of its own, as in
// ImageFolder. The longest matching stem wins. The suffix decides the type: txt, text, caption,
// cls, cls2, id and index are text; json is JSON; anything else is bytes kept with its suffix.
// Files that are neither images nor side files are not listed (as ImageFolder does).
// A root/metadata.jsonl or root/metadata.csv (Hugging Face imagefolder) adds a field per column,
// each image's values from the row whose file_name is its key (docs/formats/fields.md).
// Errors: NotFound (no such path), InvalidArgument (not a directory, a class name that is not
// UTF-8), IOError. A directory already being listed, reached again through a symlink, is not
// entered: it goes to `rejects`.
Result<SourceListing> ListImageFolder(const std::filesystem::path& root);

// Reads a list file: Caffe convert_imageset ("relative/path label", split at the last space) or
// MXNet im2rec .lst ("index<TAB>label[<TAB>label...]<TAB>path"; the first label is used and must
// be a non-negative integer). Paths are relative to `root`. Blank lines and lines starting with '#'
// are skipped. Errors name the file and line number.
Result<SourceListing> ReadListFile(const std::filesystem::path& list_file,
                                   const std::filesystem::path& root, ListFileKind kind);

// Hex xxHash64 over the classes and the (key, label) pairs in listing order.
std::string ListingHash(const SourceListing& listing);

// Reorders items with a deterministic permutation of `seed` (the same on every platform).
void ShuffleListing(SourceListing& listing, std::uint64_t seed);

}  // namespace packrec

#endif  // PACKREC_INGEST_H_
