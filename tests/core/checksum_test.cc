#include <doctest/doctest.h>

#include <vector>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/random.h"

namespace packrec {
namespace {

TEST_CASE("xxh64 matches the reference vectors and the streaming form") {
  // Reference values of XXH64 from the xxHash specification's test suite.
  CHECK(Xxh64(std::string_view(""), 0) == 0xef46db3751d8e999ull);
  CHECK(Xxh64(std::string_view("a"), 0) == 0xd24ec4f1a98c6e5bull);
  CHECK(Xxh64(std::string_view("abc"), 0) == 0x44bc2cf5ad770999ull);
  const std::string text(1000, 'x');
  Xxh64Stream stream(7);
  stream.Update(AsBytes(std::string_view(text).substr(0, 333)));
  stream.Update(AsBytes(std::string_view(text).substr(333)));
  CHECK(stream.Digest() == Xxh64(std::string_view(text), 7));
  CHECK(Xxh64(std::string_view(text), 7) != Xxh64(std::string_view(text), 8));
}

TEST_CASE("hex64 round trips and rejects malformed text") {
  std::uint64_t value = 0;
  CHECK(Hex64(0x0123456789abcdefull) == "0123456789abcdef");
  CHECK(ParseHex64("0123456789abcdef", &value));
  CHECK(value == 0x0123456789abcdefull);
  CHECK_FALSE(ParseHex64("0123456789ABCDEF", &value));
  CHECK_FALSE(ParseHex64("0123", &value));
  CHECK_FALSE(ParseHex64("0123456789abcdeg", &value));
}

TEST_CASE("splitmix64 is fixed by its seed and Below stays in range") {
  SplitMix64 a(42);
  SplitMix64 b(42);
  for (int i = 0; i < 100; ++i) CHECK(a.Next() == b.Next());
  SplitMix64 zero(0);
  CHECK(zero.Next() == 0xe220a8397b1dcdafull);  // the published first output for seed 0
  SplitMix64 c(1);
  std::vector<int> seen(7);
  for (int i = 0; i < 7000; ++i) {
    const std::uint64_t v = c.Below(7);
    REQUIRE(v < 7);
    ++seen[v];
  }
  for (int count : seen) CHECK(count > 800);
}

}  // namespace
}  // namespace packrec
