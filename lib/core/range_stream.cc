#include "core/range_stream.h"

#include <algorithm>
#include <vector>

#include "core/checksum.h"

namespace packrec {

Result<std::uint64_t> HashFileXxh64(const RandomAccessFile& file, std::uint64_t size) {
  Xxh64Stream hash;
  std::vector<std::byte> chunk(static_cast<std::size_t>(std::min(kStreamWindowBytes, size)));
  for (std::uint64_t offset = 0; offset < size; offset += chunk.size()) {
    const std::span<std::byte> part =
        std::span<std::byte>(chunk).first(std::min<std::uint64_t>(chunk.size(), size - offset));
    PACKREC_RETURN_IF_ERROR(file.ReadExact(offset, part));
    hash.Update(part);
  }
  return hash.Digest();
}

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
