// Everything public in one include.
#ifndef PACKREC_PACKREC_H_
#define PACKREC_PACKREC_H_

#include "packrec/bench.h"
#include "packrec/convert.h"
#include "packrec/dataset_ops.h"
#include "packrec/image.h"
#include "packrec/ingest.h"
#include "packrec/loader.h"
#include "packrec/merge.h"
#include "packrec/reader.h"
#include "packrec/record.h"
#include "packrec/status.h"
#include "packrec/synth.h"
#include "packrec/writer.h"

namespace packrec {
// "0.1.0"
const char* Version();
}  // namespace packrec

#endif  // PACKREC_PACKREC_H_
