#include <doctest/doctest.h>

#include "packrec/status.h"

namespace packrec {
namespace {

Result<int> Half(int value) {
  if (value % 2 != 0) return Status::InvalidArgument("odd: " + std::to_string(value));
  return value / 2;
}

Result<int> Quarter(int value) {
  PACKREC_ASSIGN_OR_RETURN(const int half, Half(value));
  return Half(half);
}

TEST_CASE("status carries code and message, and context is prepended") {
  const Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "OK");
  const Status error = Status::Corruption("bad bytes").WithContext("shard-000001.pkr");
  CHECK_FALSE(error.ok());
  CHECK(error.code() == StatusCode::kCorruption);
  CHECK(error.message() == "shard-000001.pkr: bad bytes");
  CHECK(error.ToString() == "Corruption: shard-000001.pkr: bad bytes");
  CHECK(Status::OK().WithContext("x").ok());
}

TEST_CASE("result holds a value or the error, and ASSIGN_OR_RETURN propagates it") {
  Result<int> quarter = Quarter(8);
  REQUIRE(quarter.ok());
  CHECK(*quarter == 2);
  Result<int> failed = Quarter(6);  // 6 / 2 = 3 is odd
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == StatusCode::kInvalidArgument);
  CHECK(failed.status().message() == "odd: 3");
}

}  // namespace
}  // namespace packrec
