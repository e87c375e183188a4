// What the wds format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "wds/wds_format.h"

namespace packrec::wds {

const FormatDescriptor& WdsFormat() {
  // Never destroyed: a thread still reading when the process exits (a Python daemon thread)
  // finds it whole while exit() runs the static destructors.
  static const FormatDescriptor& kDescriptor = *new FormatDescriptor{
      .info = {.name = "wds",
               .summary =
                   "WebDataset tar shards, for webdataset and GNU tar (docs/formats/exports.md)",
               .suffixes = {},
               .readable = false,
               .single_file = false,
               .resumable = false,
               .stores_fields = true,
               .file_suffixes = {".tar", ".tar.gz", ".tgz"}},
      .create = CreateWdsWriter,
      .side_file_suffixes = {},  // nothing beside its output
  };
  return kDescriptor;
}

}  // namespace packrec::wds
