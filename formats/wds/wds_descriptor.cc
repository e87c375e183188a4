// What the wds format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "wds/wds_format.h"

namespace packrec::wds {
const FormatDescriptor& WdsFormat() {
  static const FormatDescriptor kDescriptor = [] {
    FormatDescriptor descriptor;
    descriptor.info = {
        "wds",
        "WebDataset tar shards, for webdataset and GNU tar (docs/formats/exports.md)",
        {},
        /*readable=*/false,
        /*single_file=*/false,
        /*resumable=*/false};
    descriptor.create = CreateWdsWriter;
    return descriptor;
  }();
  return kDescriptor;
}

}  // namespace packrec::wds
