// What the tfrecord format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "tfrecord/tfrecord_format.h"

namespace packrec::tfrecord {

const FormatDescriptor& TfRecordFormat() {
  // Never destroyed: a thread still reading when the process exits (a Python daemon thread)
  // finds it whole while exit() runs the static destructors.
  static const FormatDescriptor& kDescriptor = *new FormatDescriptor{
      .info =
          {.name = "tfrecord",
           .summary =
               "TFRecord files of tf.Example, with DALI's index files (docs/formats/exports.md)",
           .suffixes = {},
           .readable = false,
           .single_file = false,
           .resumable = false,
           .stores_fields = true,
           .file_suffixes = {".tfrecord", ".tfrecords"}},
      .create = CreateTfRecordWriter,
      .side_file_suffixes = {},  // nothing beside its output
  };
  return kDescriptor;
}

}  // namespace packrec::tfrecord
