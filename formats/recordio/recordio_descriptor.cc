// What the recordio format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "recordio/recordio_format.h"

namespace packrec::recordio {
const FormatDescriptor& RecordIoFormat() {
  static const FormatDescriptor kDescriptor = [] {
    FormatDescriptor descriptor;
    descriptor.info = {
        "recordio",
        "MXNet RecordIO (.rec and .idx), as im2rec writes it (docs/formats/exports.md)",
        {},
        /*readable=*/false,
        /*single_file=*/false,
        /*resumable=*/false};
    descriptor.create = CreateRecordIoWriter;
    return descriptor;
  }();
  return kDescriptor;
}

}  // namespace packrec::recordio
