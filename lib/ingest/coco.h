// COCO detection input: a folder of images and the instances JSON that annotates them
// (`packrec convert images/ out --annotations instances_train2017.json`).
#ifndef PACKREC_LIB_INGEST_COCO_H_
#define PACKREC_LIB_INGEST_COCO_H_

#include <filesystem>

#include "packrec/ingest.h"
#include "packrec/status.h"

namespace packrec::conversion {

// One item per entry of the JSON's "images", in its order: path root/file_name, key file_name,
// label 0, and the fields of docs/formats/fields.md's COCO table, one value per annotation of
// the image in the JSON's order: boxes (float32 N x 4, COCO's x, y, width, height in pixels),
// category_id (int64), iscrowd (int64), area (float32), annotation_id (int64) and segmentation
// (JSON: the list of each annotation's polygons or RLE, as the JSON has it). An image without
// annotations has every field present and empty. listing.categories_json keeps "categories".
// Named rejects (listing.rejects): an annotation whose image_id no image has, an image with a
// box of negative size, a malformed annotation, a file_name that leaves root.
// Errors: the JSON cannot be read or parsed, or has no "images" list, or repeats an image id.
Result<SourceListing> ListCocoImages(const std::filesystem::path& root,
                                     const std::filesystem::path& annotations);

}  // namespace packrec::conversion

#endif  // PACKREC_LIB_INGEST_COCO_H_
