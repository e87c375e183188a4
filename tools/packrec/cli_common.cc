#include "cli_common.h"

#include <charconv>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "packrec/image.h"

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

std::string CodeId(StatusCode code) {
  std::string id;
  bool capital = true;
  for (const char c : StatusCodeName(code)) {
    if (c == ' ') {
      capital = true;
      continue;
    }
    id += capital && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    capital = false;
  }
  return id;
}

std::string PrintableText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&](unsigned char byte) {
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
    out += escaped;
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      escape(byte);
      ++i;
      continue;
    }
    if (byte < 0x80) {
      out += static_cast<char>(byte);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation bytes only (overlong
    // forms and surrogates are let through: they print, and no terminal reads them as controls).
    const std::size_t length = byte >= 0xf0 && byte < 0xf5   ? 4
                               : byte >= 0xe0 && byte < 0xf0 ? 3
                               : byte >= 0xc2 && byte < 0xe0 ? 2
                                                             : 0;
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (!valid) {
      escape(byte);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

void AddRemoteOptions(CLI::App* command, RemoteOptions& remote) {
  auto* cache = command->add_option("--cache", remote.cache_dir,
                                    "A dataset at a URL: keep what is downloaded in this local "
                                    "directory, shared by every process that names it");
  command
      ->add_option("--cache-size", remote.cache_size_bytes,
                   "The cache's limit (e.g. 50GiB): least recently used blocks go first")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1} << 20, std::uint64_t{1} << 60))
      ->needs(cache);
  cache->needs("--cache-size");
  command
      ->add_option("--remote-timeout", remote.timeout_seconds,
                   "A dataset at a URL: a request with no byte for this many seconds is tried "
                   "again (default 30)")
      ->check(CLI::Range(0.001, 86400.0));
  command
      ->add_option("--remote-tries", remote.max_tries,
                   "A dataset at a URL: tries per request before the read fails (default 5)")
      ->check(CLI::Range(1u, 100u));
}

void AddMaxPixelsOption(CLI::App* command) {
  command
      ->add_option_function<std::uint64_t>(
          "--max-pixels",
          [](const std::uint64_t& pixels) {
            // The range is checked by the validator below; a refusal here cannot happen.
            (void)SetMaxImagePixels(pixels);
          },
          "Refuse images of more than N pixels (width x height) from their header, before "
          "decoding: decompression bombs and images too large to train on (default: "
          "PACKREC_MAX_IMAGE_PIXELS, else 178956970 as PIL; at most 268435456)")
      ->check(CLI::Range(std::uint64_t{1}, kMaxImagePixels));
}

std::string_view Advice(Remedy remedy) {
  switch (remedy) {
    case Remedy::kNone:
      return {};
    case Remedy::kOverwriteToReplace:
      return "pass --overwrite to replace it";
    case Remedy::kOverwriteToRestart:
      return "pass --overwrite to start again";
    case Remedy::kResumeOrOverwrite:
      return "pass --resume to continue it, or --overwrite to start again";
    case Remedy::kResumeOnceFixed:
      return "once that is fixed, run the same command with --resume to continue";
    case Remedy::kSkipBadInput:
      return "pass --on-error skip to leave it out";
  }
  return {};
}

int Fail(const std::string& command, const Status& status, bool json) {
  std::string text = status.ToString();
  if (const std::string_view advice = Advice(status.remedy()); !advice.empty()) {
    text += "; ";
    text += advice;
  }
  std::cerr << "packrec " << command << ": error: " << PrintableText(text) << "\n";
  if (json) std::cout << ErrorJson(command, status) << "\n";
  return ExitCodeFor(status);
}

namespace {

nlohmann::json OptionalNumber(const std::optional<std::uint64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string DumpError(nlohmann::json error) {
  nlohmann::json out;
  out["error"] = std::move(error);
  // Paths and keys of raw bytes are not UTF-8: replaced (U+FFFD), not nlohmann's exception.
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The error object's fields from a status, advice in the CLI's words (Advice).
nlohmann::json ErrorFields(const std::string& command, const Status& status) {
  nlohmann::json error;
  error["command"] = command;
  error["code"] = CodeId(status.code());
  error["exit_code"] = ExitCodeFor(status);
  error["message"] = status.message();
  const std::string_view advice = Advice(status.remedy());
  error["advice"] = advice.empty() ? nlohmann::json(nullptr) : nlohmann::json(advice);
  error["path"] = status.path().empty() ? nlohmann::json(nullptr) : nlohmann::json(status.path());
  error["record_index"] = OptionalNumber(status.record_index());
  error["byte_offset"] = OptionalNumber(status.byte_offset());
  return error;
}

}  // namespace

std::string ErrorJson(const std::string& command, const Status& status) {
  return DumpError(ErrorFields(command, status));
}

std::string UsageErrorJson(const std::string& command, const std::string& message) {
  nlohmann::json error = ErrorFields(command, Status::InvalidArgument(message));
  error["advice"] = "see packrec " + (command.empty() ? std::string() : command + " ") + "--help";
  return DumpError(std::move(error));
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
