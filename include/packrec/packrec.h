// Everything packrec::packrec links, in one include. The bench (packrec/bench.h) is its own
// target, packrec::bench; a reader of shard datasets alone needs only packrec/shard.h and
// packrec::shard.
#ifndef PACKREC_PACKREC_H_
#define PACKREC_PACKREC_H_

#include "packrec/convert.h"
#include "packrec/dataset_ops.h"
#include "packrec/gpu.h"
#include "packrec/image.h"
#include "packrec/ingest.h"
#include "packrec/loader.h"
#include "packrec/merge.h"
#include "packrec/reader.h"
#include "packrec/record.h"
#include "packrec/status.h"
#include "packrec/synth.h"
#include "packrec/version.h"
#include "packrec/writer.h"

#endif  // PACKREC_PACKREC_H_
