#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "packrec/ingest.h"

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

bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra;
    if (c < 0x80)
      extra = 0;
    else if ((c & 0xE0) == 0xC0 && c >= 0xC2)
      extra = 1;
    else if ((c & 0xF0) == 0xE0)
      extra = 2;
    else if ((c & 0xF8) == 0xF0 && c <= 0xF4)
      extra = 3;
    else
      return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      if (i + k >= text.size()) return false;
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += extra + 1;
  }
  return true;
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

}  // namespace

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
      const std::string name = it->path().filename().string();
      if (!HasImageExtension(name)) continue;
      files.emplace_back(it->path().parent_path().lexically_relative(root).generic_string(), name);
    }
    if (error) return Status::IOError("list " + class_dir.string() + ": " + ErrorText(error));
    if (files.empty()) listing.empty_classes.push_back(listing.classes[label]);
    std::sort(files.begin(), files.end());
    for (auto& [dir, name] : files) {
      SourceItem item;
      item.key = dir + "/" + name;
      item.path = root / item.key;
      item.label = label;
      listing.items.push_back(std::move(item));
    }
  }
  return listing;
}

}  // namespace packrec
