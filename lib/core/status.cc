#include "packrec/status.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace packrec {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "Invalid argument";
    case StatusCode::kNotFound:
      return "Not found";
    case StatusCode::kAlreadyExists:
      return "Already exists";
    case StatusCode::kInvalidInput:
      return "Invalid input";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kTruncated:
      return "Truncated";
    case StatusCode::kNotSupported:
      return "Not supported";
    case StatusCode::kIOError:
      return "I/O error";
    case StatusCode::kOutOfRange:
      return "Out of range";
    case StatusCode::kInternal:
      return "Internal error";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  Status with = *this;
  with.message_ = std::move(message);
  return with;
}

Status Status::WithSuffix(std::string_view suffix) const {
  Status with = *this;
  if (!ok()) with.message_ += suffix;
  return with;
}

Status Status::WithPath(std::string path) const {
  Status with = *this;
  if (!ok()) with.path_ = std::move(path);
  return with;
}

Status Status::WithRecordIndex(std::uint64_t index) const {
  Status with = *this;
  if (!ok()) with.record_index_ = index;
  return with;
}

Status Status::WithRemedy(Remedy remedy) const {
  Status with = *this;
  if (!ok()) with.remedy_ = remedy;
  return with;
}

Status Status::WithByteOffset(std::uint64_t offset) const {
  Status with = *this;
  if (!ok()) with.byte_offset_ = offset;
  return with;
}

void DieOnValueOfError(const Status& status) {
  std::fprintf(stderr,
               "packrec: the value of a Result holding an error was asked for (check ok() "
               "first): %s\n",
               status.ToString().c_str());
  std::abort();
}

}  // namespace packrec
