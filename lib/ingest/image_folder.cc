#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <utility>

#include "core/keys.h"
#include "ingest/image_folder.h"
#include "ingest/metadata_table.h"
#include "packrec/ingest.h"
#include "storage/field_block.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

// torchvision.datasets.folder.IMG_EXTENSIONS: the same files ImageFolder would list, so labels and
// order match it; encodings packrec cannot store are then rejected by name, not skipped silently.
constexpr std::array<std::string_view, 9> kImageExtensions = {
    ".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

bool HasImageExtension(std::string_view name) {
  return std::any_of(kImageExtensions.begin(), kImageExtensions.end(), [&](std::string_view ext) {
    if (name.size() < ext.size()) return false;
    const std::string_view tail = name.substr(name.size() - ext.size());
    return std::equal(tail.begin(), tail.end(), ext.begin(), [](char a, char b) {
      return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
    });
  });
}

std::string ErrorText(const std::error_code& error) { return error.message(); }

struct DirectoryId {
  dev_t device;
  ino_t inode;
  bool operator==(const DirectoryId&) const = default;
};

std::optional<DirectoryId> IdentifyDirectory(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return DirectoryId{st.st_dev, st.st_ino};
}

// A side file found while listing, before the schema (and so its field index) is known.
struct PendingSideFile {
  std::size_t item = 0;  // index into SourceListing::items
  std::string suffix;
  fs::path path;
};

using DirectoryFiles = std::span<const std::pair<std::string, std::string>>;

// The longest stem of `name` (up to one of its dots before `limit`) that `stems` holds, and the
// position of that dot; npos when none.
std::size_t LongestStemDot(const std::string& name, std::size_t limit,
                           const std::map<std::string, std::vector<std::size_t>>& stems) {
  std::size_t dot = limit == 0 ? std::string::npos : name.rfind('.', limit - 1);
  while (dot != std::string::npos && dot > 0) {
    if (stems.count(name.substr(0, dot))) return dot;
    dot = name.rfind('.', dot - 1);
  }
  return std::string::npos;
}

// One directory's files (sorted by name): every image becomes an item (`0001.mask.png` and
// `photo.thumb.jpg` too, as in torchvision's ImageFolder), and every other file whose name starts
// with an image's stem and a dot is matched to that image as a side file.
void AddDirectory(const fs::path& root, DirectoryFiles files, std::uint32_t label,
                  SourceListing& listing, std::vector<PendingSideFile>& side_files) {
  std::map<std::string, std::vector<std::size_t>> image_stems;  // stem -> files (images)
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& name = files[i].second;
    if (HasImageExtension(name)) image_stems[name.substr(0, name.rfind('.'))].push_back(i);
  }
  std::vector<std::size_t> suffix_dot(files.size(), std::string::npos);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& name = files[i].second;
    if (!HasImageExtension(name)) suffix_dot[i] = LongestStemDot(name, name.size(), image_stems);
  }
  std::vector<std::size_t> item_of(files.size(), SIZE_MAX);
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!HasImageExtension(files[i].second) || suffix_dot[i] != std::string::npos) continue;
    SourceItem item;
    item.key = files[i].first + "/" + files[i].second;
    item.path = root / item.key;
    item.label = label;
    item_of[i] = listing.items.size();
    listing.items.push_back(std::move(item));
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::size_t dot = suffix_dot[i];
    if (dot == std::string::npos) continue;
    const std::string& name = files[i].second;
    const fs::path path = root / (files[i].first + "/" + name);
    const std::vector<std::size_t>& images = image_stems.at(name.substr(0, dot));
    if (images.size() > 1) {
      listing.rejects.push_back({path.string(), "a side file of " + std::to_string(images.size()) +
                                                    " images with the same stem (" +
                                                    files[images[0]].second + ", " +
                                                    files[images[1]].second + "): not used"});
      continue;
    }
    side_files.push_back({item_of[images[0]], name.substr(dot + 1), path});
  }
}

FieldType SuffixType(std::string_view suffix) {
  const std::string_view last = suffix.substr(suffix.rfind('.') + 1);
  for (const std::string_view text : {"txt", "text", "caption", "cls", "cls2", "id", "index"}) {
    if (last == text) return FieldType::kText;
  }
  return last == "json" ? FieldType::kJson : FieldType::kBytes;
}

// The schema: one field per suffix seen, sorted; each side file then knows its field. A suffix
// that cannot name a field (not UTF-8, a control character, the record's own `label`, `key` or
// `image`) makes its files rejects, with the schema's reason.
void AssignFields(SourceListing& listing, const std::vector<PendingSideFile>& side_files) {
  std::map<std::string, std::size_t> fields;
  for (const PendingSideFile& side : side_files) fields.emplace(side.suffix, 0);
  std::map<std::string, std::string> unusable;  // suffix -> why
  for (auto& [suffix, index] : fields) {
    FieldSpec spec{suffix, SuffixType(suffix), suffix, {}};
    if (const Status valid = ValidateSchema({spec}); !valid.ok()) {
      unusable.emplace(suffix, valid.message());
      continue;
    }
    index = listing.fields.size();
    listing.fields.push_back(std::move(spec));
  }
  for (const PendingSideFile& side : side_files) {
    if (const auto why = unusable.find(side.suffix); why != unusable.end()) {
      listing.rejects.push_back(
          {side.path.string(), "its suffix cannot name a field: " + why->second});
      continue;
    }
    listing.items[side.item].side_files.push_back({fields.at(side.suffix), side.path});
  }
  for (SourceItem& item : listing.items) {
    std::sort(item.side_files.begin(), item.side_files.end(),
              [](const SideFile& a, const SideFile& b) { return a.field < b.field; });
  }
}

}  // namespace

std::string ImageExtensionList() {
  std::string list;
  for (const std::string_view extension : kImageExtensions) {
    list += (list.empty() ? "" : " ") + std::string(extension);
  }
  return list;
}

std::size_t CountLooseImages(const fs::path& root) {
  std::size_t count = 0;
  std::error_code error;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    std::error_code type_error;
    if (it->is_regular_file(type_error) && HasImageExtension(it->path().filename().string()))
      ++count;
  }
  return count;
}

Result<SourceListing> ListImageFolder(const fs::path& root) {
  std::error_code error;
  const fs::file_status status = fs::status(root, error);
  if (!fs::exists(status)) return Status::NotFound("input " + root.string() + " does not exist");
  if (!fs::is_directory(status)) {
    return Status::InvalidInput("input " + root.string() + " is not a directory");
  }
  SourceListing listing;
  listing.kind = "image-folder";
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    std::error_code type_error;
    if (it->is_directory(type_error)) listing.classes.push_back(it->path().filename().string());
  }
  if (error) return Status::IOError("list " + root.string() + ": " + ErrorText(error));
  // Python sorts str by code point, which is byte order for UTF-8.
  std::sort(listing.classes.begin(), listing.classes.end());
  for (const std::string& name : listing.classes) {
    if (!IsValidUtf8(name)) {
      return Status::InvalidArgument("class folder name in " + root.string() +
                                     " is not valid UTF-8: " + name);
    }
  }

  std::vector<PendingSideFile> side_suffixes;
  for (std::uint32_t label = 0; label < listing.classes.size(); ++label) {
    const fs::path class_dir = root / listing.classes[label];
    // (directory relative to root, file name): os.walk's sorted roots, then sorted names.
    std::vector<std::pair<std::string, std::string>> files;
    // The directories on the way down from class_dir, by identity, to see a symlink loop.
    std::vector<DirectoryId> ancestors;
    if (const auto id = IdentifyDirectory(class_dir)) ancestors.push_back(*id);
    fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink,
                                        error);
    for (fs::recursive_directory_iterator end; !error && it != end; it.increment(error)) {
      std::error_code type_error;
      if (it->is_directory(type_error)) {
        ancestors.resize(static_cast<std::size_t>(it.depth()) + 1);
        const std::optional<DirectoryId> id = IdentifyDirectory(it->path());
        if (id && std::find(ancestors.begin(), ancestors.end(), *id) != ancestors.end()) {
          it.disable_recursion_pending();
          listing.rejects.push_back(
              {it->path().string(),
               "a symlink loop: this directory is one it lies in (not listed again)"});
          continue;
        }
        if (id) ancestors.push_back(*id);
        continue;
      }
      files.emplace_back(it->path().parent_path().lexically_relative(root).generic_string(),
                         it->path().filename().string());
    }
    if (error) return Status::IOError("list " + class_dir.string() + ": " + ErrorText(error));
    std::sort(files.begin(), files.end());
    const std::size_t items_before = listing.items.size();
    for (std::size_t begin = 0, end = 0; begin < files.size(); begin = end) {
      end = begin;
      while (end < files.size() && files[end].first == files[begin].first) ++end;
      AddDirectory(root, std::span(files).subspan(begin, end - begin), label, listing,
                   side_suffixes);
    }
    if (listing.items.size() == items_before)
      listing.empty_classes.push_back(listing.classes[label]);
  }
  AssignFields(listing, side_suffixes);
  PACKREC_RETURN_IF_ERROR(ApplyMetadataTable(root, listing));
  return listing;
}

}  // namespace packrec
