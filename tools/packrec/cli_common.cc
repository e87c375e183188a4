#include "cli_common.h"

#include <charconv>
#include <cstdio>
#include <iostream>

namespace packrec::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return kExitUsage;
    case StatusCode::kNotFound:
    case StatusCode::kInvalidInput:
      return kExitInput;
    case StatusCode::kAlreadyExists:
      return kExitOutputExists;
    case StatusCode::kCorruption:
    case StatusCode::kTruncated:
      return kExitCorrupt;
    case StatusCode::kIOError:
      return kExitIO;
    case StatusCode::kNotSupported:
      return kExitNotSupported;
    case StatusCode::kInternal:
      break;
  }
  return kExitInternal;
}

int Fail(const std::string& command, const Status& status) {
  std::cerr << "packrec " << command << ": error: " << status.ToString() << "\n";
  return ExitCodeFor(status);
}

const CLI::Validator& Uint64Digits() {
  static const CLI::Validator validator(
      [](std::string& value) -> std::string {
        std::uint64_t parsed = 0;
        const char* end = value.data() + value.size();
        const auto [stop, error] = std::from_chars(value.data(), end, parsed);
        if (value.empty() || error != std::errc() || stop != end) {
          return "must be a whole number from 0 to 18446744073709551615, got '" + value + "'";
        }
        return "";
      },
      "UINT64");
  return validator;
}

std::string HumanBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace packrec::cli
