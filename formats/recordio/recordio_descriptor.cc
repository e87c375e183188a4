// What the recordio format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "recordio/recordio_format.h"

namespace packrec::recordio {

const FormatDescriptor& RecordIoFormat() {
  // Never destroyed: a thread still reading when the process exits (a Python daemon thread)
  // finds it whole while exit() runs the static destructors.
  static const FormatDescriptor& kDescriptor = *new FormatDescriptor{
      .info = {.name = "recordio",
               .summary =
                   "MXNet RecordIO (.rec and .idx), as im2rec writes it (docs/formats/exports.md)",
               .suffixes = {},
               .readable = false,
               .single_file = false,
               .resumable = false,
               .stores_fields = true,
               .file_suffixes = {".rec"}},
      .create = CreateRecordIoWriter,
      .side_file_suffixes = {},  // nothing beside its output
  };
  return kDescriptor;
}

}  // namespace packrec::recordio
