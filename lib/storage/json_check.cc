#include "storage/json_check.h"

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace packrec {
namespace {

// Documents up to this size are parsed by one parser per thread, which keeps its buffers from
// document to document; a larger one by its own, freed after, so that no thread keeps a buffer
// the size of the largest document it ever met.
constexpr std::size_t kReusedParserBytes = 1 << 20;

template <typename Use>
auto WithParser(std::size_t size, const Use& use) {
  if (size > kReusedParserBytes) {
    simdjson::dom::parser parser;
    return use(parser);
  }
  thread_local simdjson::dom::parser parser;
  return use(parser);
}

}  // namespace

bool AcceptJson(std::string_view text) {
  const bool fast = WithParser(text.size(), [&](simdjson::dom::parser& parser) {
    return parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).error() ==
           simdjson::SUCCESS;
  });
  return fast || nlohmann::json::accept(text);
}

std::size_t JsonNestingDepth(std::string_view text) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<JsonMembers> ReadJsonMembers(std::string_view text,
                                           const std::array<std::string_view, 3>& names) {
  return WithParser(text.size(), [&](simdjson::dom::parser& parser) -> std::optional<JsonMembers> {
    const simdjson::simdjson_result<simdjson::dom::element> parsed =
        parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true);
    if (parsed.error() != simdjson::SUCCESS) return std::nullopt;
    JsonMembers members;
    simdjson::dom::object object;
    if (parsed.get(object) != simdjson::SUCCESS) return members;
    members.is_object = true;
    for (const simdjson::dom::key_value_pair field : object) {
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (field.key != names[i]) continue;
        members.present[i] = true;
        std::string_view value;
        if (field.value.get(value) == simdjson::SUCCESS) {
          members.strings[i] = std::string(value);
        } else {
          members.strings[i].reset();
        }
      }
    }
    return members;
  });
}

}  // namespace packrec
