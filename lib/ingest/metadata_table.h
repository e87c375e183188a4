// Hugging Face imagefolder's metadata file beside the images: root/metadata.jsonl (one JSON
// object per line) or root/metadata.csv (a header row), each row naming an image by `file_name`
// (relative to root) and giving any other columns, which become the records' fields.
#ifndef PACKREC_LIB_INGEST_METADATA_TABLE_H_
#define PACKREC_LIB_INGEST_METADATA_TABLE_H_

#include <filesystem>

#include "packrec/ingest.h"
#include "packrec/status.h"

namespace packrec {

// Reads root's metadata file, when there is one, into `listing`: a field per column (typed from
// its values, docs/formats/fields.md), each item's values in SourceItem::field_values. A row naming
// no listed image, an image without a row and a second row for one image are rejects (the image,
// or the row as FILE:LINE); a column that cannot be typed or clashes with a side-file field, or a
// file that does not parse, is an error naming the file and line. Both files at once: an error.
Status ApplyMetadataTable(const std::filesystem::path& root, SourceListing& listing);

}  // namespace packrec

#endif  // PACKREC_LIB_INGEST_METADATA_TABLE_H_
