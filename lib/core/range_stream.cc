#include "core/range_stream.h"

#include <vector>

namespace packrec {

Status StreamRanges(const RandomAccessFile& file, std::uint64_t begin, std::uint64_t end,
                    const RangeOf& range_of, const OnRange& on_range) {
  if (begin >= end) return Status::OK();
  const auto [first_offset, first_size] = range_of(begin);
  file.AdviseSequential(first_offset, 0);
  std::vector<std::byte> window;
  for (std::uint64_t i = begin; i < end;) {
    const auto [start, size] = range_of(i);
    std::uint64_t window_end = start + size;
    std::uint64_t last = i;
    for (; last + 1 < end; ++last) {
      const auto [next_offset, next_size] = range_of(last + 1);
      if (next_offset < window_end || next_offset + next_size - start > kStreamWindowBytes) break;
      window_end = next_offset + next_size;
    }
    window.resize(window_end - start);
    PACKREC_RETURN_IF_ERROR(file.ReadExact(start, window));
    for (; i <= last; ++i) {
      const auto [offset, range_size] = range_of(i);
      PACKREC_RETURN_IF_ERROR(
          on_range(i, std::span<const std::byte>(window).subspan(offset - start, range_size)));
    }
  }
  return Status::OK();
}

}  // namespace packrec
