// Checking JSON that sources hand in (WebDataset json members, MDS json columns, JSON fields) at
// simdjson's speed, by nlohmann/json's rules. simdjson refuses more documents than nlohmann, never
// fewer (integers over 64 bits, a UTF-8 byte-order mark, nesting deeper than 1024; differential
// tests in tests/formats/json_check_test.cc), so a document simdjson takes is JSON to nlohmann
// too, and one it refuses is asked of nlohmann. nlohmann alone cost 2 us for a 400-byte
// img2dataset json, a fifth of what keeping a sample's caption and JSON added to an import.
#ifndef PACKREC_LIB_STORAGE_JSON_CHECK_H_
#define PACKREC_LIB_STORAGE_JSON_CHECK_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace packrec {

// Whether `text` is one JSON value, as nlohmann::json::accept says. Thread-safe.
bool AcceptJson(std::string_view text);

// How deep arrays and objects nest in `text` (0 for a scalar; strings are skipped). A linear
// scan without recursion, for limits set below what JSON readers recurse to (Python's json
// module raises RecursionError near 1,000).
std::size_t JsonNestingDepth(std::string_view text);

// What simdjson reads of a document's top-level members `names` (three at most), or nullopt
// when it refuses the document: the caller then reads it with nlohmann, whose verdict stands.
struct JsonMembers {
  bool is_object = false;
  // Per name: whether the object has the member, and its value when that is a string (the last
  // of a name repeated counts, as when nlohmann builds the object).
  std::array<bool, 3> present{};
  std::array<std::optional<std::string>, 3> strings;
};
std::optional<JsonMembers> ReadJsonMembers(std::string_view text,
                                           const std::array<std::string_view, 3>& names);

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_JSON_CHECK_H_
