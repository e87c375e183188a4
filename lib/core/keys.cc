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

}  // namespace packrec
