// Which record keys packrec stores. A key names a file below a directory (extract writes it
// there; the exports name their members by it), so it is decided once, here, and applied at
// convert time: a relative path of '/'-separated components, none empty, "." or "..", with no
// NUL and no other control character (a newline would also forge lines in rejects.tsv and in
// messages). Keys of datasets written before the rule (or through the writer API) are checked
// again where they are used (extract).
#ifndef PACKREC_LIB_CORE_KEYS_H_
#define PACKREC_LIB_CORE_KEYS_H_

#include <string>
#include <string_view>

namespace packrec {

// Empty when `key` is a legal key; otherwise why not, in words ("holds a control character").
std::string KeyProblem(std::string_view key);

// The key for a message: control characters as \xNN, so a newline cannot forge a second line.
std::string PrintableKey(std::string_view key);

// Whether `text` is well-formed UTF-8 (no overlong forms, nothing past U+10FFFF). Hand-written:
// a dozen lines, where the libraries that do it (simdutf, ICU) are not worth a dependency.
bool IsValidUtf8(std::string_view text);

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_KEYS_H_
