// Sequential reads of many small byte ranges of one file with pread, batched into windows.
#ifndef PACKREC_LIB_CORE_RANGE_STREAM_H_
#define PACKREC_LIB_CORE_RANGE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>

#include "core/file_io.h"
#include "packrec/status.h"

namespace packrec {

// Windows of up to this many bytes (one larger range is read alone): small enough to stay in L2
// between the copy and what the caller does with it (128 KiB beat 256 KiB and 1 MiB when
// measured; docs/benchmarks.md).
inline constexpr std::uint64_t kStreamWindowBytes = 128 << 10;

// (offset, size) of range i in the file.
using RangeOf = std::function<std::pair<std::uint64_t, std::uint64_t>(std::uint64_t)>;
// Called in order with range i's bytes, valid during the call.
using OnRange = std::function<Status(std::uint64_t, std::span<const std::byte>)>;

// Reads ranges [begin, end) in order: each window holds range i and the ranges after it that
// follow it in the file and still fit. Reading through read() instead of a mapping avoids page
// faults and turns a file that shrinks under the reader into an error instead of SIGBUS.
// Single-threaded on purpose: a reader thread handing windows over cost more in wake-ups than it
// saved (measured); overlapping I/O with work is the loader's job. Stops at the first error.
Status StreamRanges(const RandomAccessFile& file, std::uint64_t begin, std::uint64_t end,
                    const RangeOf& range_of, const OnRange& on_range);

// XXH64 (seed 0) of the first `size` bytes of `file`, read in windows of kStreamWindowBytes.
Result<std::uint64_t> HashFileXxh64(const RandomAccessFile& file, std::uint64_t size);

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_RANGE_STREAM_H_
