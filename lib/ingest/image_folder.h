// What the image-folder lister knows about names, for the messages of the converter.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace packrec {

// The extensions ListImageFolder takes as images (torchvision's IMG_EXTENSIONS), space-separated.
std::string ImageExtensionList();

// Files named as images directly in `root` (not in a class folder): how flat a folder is, for the
// message that explains the layout. 0 when `root` cannot be listed.
std::size_t CountLooseImages(const std::filesystem::path& root);

}  // namespace packrec
