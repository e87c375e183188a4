// The registry of storage formats: one descriptor per format folder (formats/X/X_format.h), in
// the order OpenDataset probes them. What the layers above it (ingest, bench) know of a format.
#ifndef PACKREC_LIB_DATASET_REGISTRY_H_
#define PACKREC_LIB_DATASET_REGISTRY_H_

#include <string_view>
#include <vector>

#include "storage/format_descriptor.h"

namespace packrec {

// Every format, packrec's own (readable) ones first.
const std::vector<const FormatDescriptor*>& FormatDescriptors();

// The format called `name` (empty: the default, the first), or null.
const FormatDescriptor* FindFormatDescriptor(std::string_view name);

}  // namespace packrec

#endif  // PACKREC_LIB_DATASET_REGISTRY_H_
