#include <doctest/doctest.h>

#include <vector>

#include "storage/source_util.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> Pattern(std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<std::byte>((i * 2654435761u) >> 11);
  }
  return bytes;
}

// The record sources read through SequentialFile's window: whatever the sizes asked for, what
// comes out is the file's bytes at those offsets.
TEST_CASE("sequential file: reads across, inside and past its window give the file's bytes") {
  test::TempDir dir;
  constexpr std::size_t kWindow = SequentialFile::kWindowBytes;
  const std::vector<std::byte> content = Pattern(3 * kWindow + 12345);
  test::WriteBytes(dir / "data", content);
  SequentialFile in;
  REQUIRE(in.Open(dir / "data").ok());
  REQUIRE(in.size == content.size());
  // Headers and bodies as a source reads them: small reads, reads that straddle the window's
  // end, one larger than the window, a skip ahead, and appends after what `out` already holds.
  const std::vector<std::size_t> sizes = {12, 30000, kWindow - 30012 + 7, kWindow + 100, 1, 4096};
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    std::vector<std::byte> header(8);
    REQUIRE(in.Read(offset, header).ok());
    CHECK(std::equal(header.begin(), header.end(), content.begin() + offset));
    std::vector<std::byte> out = {std::byte{1}, std::byte{2}};
    REQUIRE(in.AppendTo(offset + 8, sizes[i], out).ok());
    REQUIRE(out.size() == 2 + sizes[i]);
    CHECK(out[0] == std::byte{1});
    CHECK(std::equal(out.begin() + 2, out.end(), content.begin() + offset + 8));
    offset += 8 + sizes[i] + (i == 3 ? 5000 : 0);
  }
  // Backwards, before the window, then the file's last byte.
  std::vector<std::byte> back(100);
  REQUIRE(in.Read(10, back).ok());
  CHECK(std::equal(back.begin(), back.end(), content.begin() + 10));
  std::vector<std::byte> last;
  REQUIRE(in.AppendTo(content.size() - 1, 1, last).ok());
  CHECK(last == std::vector<std::byte>{content.back()});
  // Past the end: Truncated, not bytes that were never in the file.
  std::vector<std::byte> past(10);
  CHECK(in.Read(content.size() - 5, past).code() == StatusCode::kTruncated);
  std::vector<std::byte> more;
  CHECK(in.AppendTo(content.size(), 1, more).code() == StatusCode::kTruncated);
}

TEST_CASE("sequential file: a file cut short after it was opened reads Truncated") {
  test::TempDir dir;
  const std::vector<std::byte> content = Pattern(2 * SequentialFile::kWindowBytes);
  test::WriteBytes(dir / "data", content);
  SequentialFile in;
  REQUIRE(in.Open(dir / "data").ok());
  test::TruncateFile(dir / "data", 1000);
  std::vector<std::byte> out;
  CHECK_FALSE(in.at_end());
  const Status read = in.AppendTo(0, 5000, out);
  CHECK(read.code() == StatusCode::kTruncated);
  CHECK(read.ToString().find((dir / "data").string()) != std::string::npos);
  // The failed read ends the file: a source reading on would fail at the same byte each time.
  CHECK(in.at_end());
}

}  // namespace
}  // namespace packrec
