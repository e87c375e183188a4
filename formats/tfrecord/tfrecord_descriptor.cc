// What the tfrecord format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "tfrecord/tfrecord_format.h"

namespace packrec::tfrecord {
const FormatDescriptor& TfRecordFormat() {
  static const FormatDescriptor kDescriptor = [] {
    FormatDescriptor descriptor;
    descriptor.info = {
        "tfrecord",
        "TFRecord files of tf.Example, with DALI's index files (docs/formats/exports.md)",
        {},
        /*readable=*/false,
        /*single_file=*/false,
        /*resumable=*/false};
    descriptor.create = CreateTfRecordWriter;
    return descriptor;
  }();
  return kDescriptor;
}

}  // namespace packrec::tfrecord
