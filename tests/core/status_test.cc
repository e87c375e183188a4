#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

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

TEST_CASE("status carries where the error is and what to do as fields, which context keeps") {
  const Status error = Status::Corruption("record 7: checksum mismatch")
                           .WithPath("/data/shard-000001.pkr")
                           .WithRecordIndex(7)
                           .WithByteOffset(4096)
                           .WithRemedy(Remedy::kOverwriteToRestart);
  CHECK(error.path() == "/data/shard-000001.pkr");
  CHECK(error.record_index() == std::optional<std::uint64_t>(7));
  CHECK(error.byte_offset() == std::optional<std::uint64_t>(4096));
  CHECK(error.remedy() == Remedy::kOverwriteToRestart);
  // The message is the message: no advice or fields are written into it.
  CHECK(error.message() == "record 7: checksum mismatch");
  const Status wrapped = error.WithContext("merging parts/");
  CHECK(wrapped.message() == "merging parts/: record 7: checksum mismatch");
  CHECK(wrapped.record_index() == error.record_index());
  CHECK(wrapped.path() == error.path());
  CHECK(wrapped.remedy() == error.remedy());
  const Status extended = error.WithSuffix("; 3 records are kept");
  CHECK(extended.message() == "record 7: checksum mismatch; 3 records are kept");
  CHECK(extended.record_index() == error.record_index());
  CHECK(extended.path() == error.path());
  CHECK(Status::OK().WithSuffix("x").ok());
  // OK stays OK, with no fields.
  const Status ok =
      Status::OK().WithRecordIndex(3).WithPath("x").WithRemedy(Remedy::kResumeOnceFixed);
  CHECK(ok.ok());
  CHECK_FALSE(ok.record_index().has_value());
  CHECK(ok.path().empty());
  CHECK(ok.remedy() == Remedy::kNone);
  CHECK_FALSE(Status::NotFound("x").record_index().has_value());
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

TEST_CASE("value() of an error aborts with the error in every build, asserts on or off") {
  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(pipe_ends[1], STDERR_FILENO);
    const Result<int> missing = Status::NotFound("no such dataset: /data/x.pkr");
    const int value = missing.value();
    std::_Exit(value == 0 ? 10 : 11);  // not reached: value() aborts
  }
  ::close(pipe_ends[1]);
  std::string said;
  char buffer[512];
  for (ssize_t got; (got = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;) {
    said.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(pipe_ends[0]);
  int wait_status = 0;
  REQUIRE(::waitpid(child, &wait_status, 0) == child);
  CHECK(WIFSIGNALED(wait_status));
  if (WIFSIGNALED(wait_status)) CHECK(WTERMSIG(wait_status) == SIGABRT);
  CHECK_MESSAGE(said.find("no such dataset: /data/x.pkr") != std::string::npos, said);
}

}  // namespace
}  // namespace packrec
