#include "core/keys.h"

#include <algorithm>
#include <cstdio>

namespace packrec {

std::string KeyProblem(std::string_view key) {
  if (key.empty()) return "is empty";
  if (key.find('\0') != std::string_view::npos) return "holds a NUL byte";
  if (std::any_of(key.begin(), key.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return "holds a control character (a newline, a tab...)";
  }
  if (key.front() == '/') return "is an absolute path (it must be relative)";
  for (std::size_t start = 0; start <= key.size();) {
    std::size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    const std::string_view part = key.substr(start, end - start);
    if (part.empty()) return "has an empty path component ('//' or a trailing '/')";
    if (part == "." || part == "..") return "has a '.' or '..' path component";
    start = end + 1;
  }
  return "";
}

std::string PrintableKey(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra;
    // The range the first continuation byte must fall in: narrower after E0 (overlong), ED
    // (surrogates), F0 (overlong) and F4 (past U+10FFFF).
    unsigned char low = 0x80, high = 0xBF;
    if (c < 0x80) {
      extra = 0;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (extra > text.size() - i - 1) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) return false;
    }
    i += extra + 1;
  }
  return true;
}

}  // namespace packrec
