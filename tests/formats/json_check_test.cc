// The fast JSON check (storage/json_check.h) against nlohmann/json, whose rules packrec keeps:
// simdjson may refuse what nlohmann takes (the check then asks nlohmann), never take what
// nlohmann refuses. Tricky documents one by one, then a deterministic stream of mutated ones.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "storage/json_check.h"

namespace packrec {
namespace {

std::vector<std::string> TrickyDocuments() {
  std::vector<std::string> documents = {R"({"a":1})",
                                        R"("\udc00")",
                                        R"("\ud800")",
                                        R"("\ud800\u0041")",
                                        R"("\ud800\udc00")",
                                        R"("\u0000")",
                                        R"("\uDBFF\uDFFF")",
                                        R"({"\ud800":1})",
                                        "1e400",
                                        "-1e400",
                                        "1e-400",
                                        "123456789012345678901234567890",
                                        "-123456789012345678901234567890",
                                        "18446744073709551615",
                                        "18446744073709551616",
                                        "-0",
                                        "01",
                                        "1.",
                                        ".5",
                                        "+1",
                                        "1E5",
                                        "1e+5",
                                        "-",
                                        "2.5e",
                                        "\xEF\xBB\xBF{}",
                                        R"({"a":1,"a":2})",
                                        "[1,]",
                                        "{,}",
                                        "nul",
                                        "true false",
                                        " 1 ",
                                        "",
                                        " ",
                                        "\t\n\r 1",
                                        "\x0c 1",
                                        "NaN",
                                        "Infinity",
                                        "[1 2]",
                                        "{\"a\" 1}",
                                        "\"\xC3\x28\"",
                                        "\"\xED\xA0\x80\"",
                                        "\"\x7F\"",
                                        "\"\x01\"",
                                        R"("\x")",
                                        R"("\/")",
                                        "\"\xF4\x90\x80\x80\"",
                                        "\"\xF0\x9F\x98\x80\"",
                                        R"(["\uD83D\uDE00"])",
                                        std::string("{\"a\":\"b\"}\0", 10),
                                        std::string(2000, '[') + std::string(2000, ']')};
  return documents;
}

TEST_CASE("AcceptJson says what nlohmann::json::accept says") {
  for (const std::string& document : TrickyDocuments()) {
    CAPTURE(document);
    CHECK(AcceptJson(document) == nlohmann::json::accept(document));
  }
  // Mutations of a document with every kind of value, escapes and multi-byte characters.
  const std::vector<std::string> seeds = {
      R"({"url": "https://e.com/i/1.jpg", "key": "0001", "n": null, "w": 256, "f": -1.5e3,)"
      R"( "s": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/", "a": [1, 2, {"b": true}], "e": {}})",
      "[\"\xC3\xA9\xF0\x9F\x98\x80\", 0, -0, 1e5, 2E-3]", R"("\u00e9")"};
  const std::string alphabet =
      "{}[]\",:\\u0123456789abcdefABCDEF.eE+- \t\n\rtrufalsn\x80\xC3\xED\xF0\xF4\xBF\xA0\x7F\x01";
  std::uint64_t state = 1;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>(state >> 33);
  };
  int taken = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string document = seeds[static_cast<std::size_t>(i) % seeds.size()];
    for (std::size_t edits = 1 + next() % 3; edits > 0; --edits) {
      const std::size_t at = next() % (document.size() + 1);
      const char c = alphabet[next() % alphabet.size()];
      switch (next() % 3) {
        case 0:
          if (at < document.size()) document[at] = c;
          break;
        case 1:
          document.insert(document.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          if (at < document.size()) document.erase(at, 1);
      }
    }
    const bool accepted = AcceptJson(document);
    taken += accepted ? 1 : 0;
    if (accepted != nlohmann::json::accept(document)) FAIL_CHECK(document);
  }
  CHECK(taken > 100);  // the stream holds valid documents too, not only broken ones
}

TEST_CASE("ReadJsonMembers reads top-level strings, the last of a repeated name") {
  const std::array<std::string_view, 3> names = {"label", "key", "class"};
  const auto read = ReadJsonMembers(
      R"({"key": "a", "class": {"x": 1}, "key": "b\u00e9", "nested": {"label": 3}})", names);
  REQUIRE(read);
  CHECK(read->is_object);
  CHECK_FALSE(read->present[0]);  // only top-level members count
  CHECK(read->present[1]);
  CHECK(read->strings[1] == "b\xC3\xA9");
  CHECK(read->present[2]);
  CHECK_FALSE(read->strings[2]);  // not a string
  const auto last_not_string = ReadJsonMembers(R"({"key": "a", "key": 5})", names);
  REQUIRE(last_not_string);
  CHECK_FALSE(last_not_string->strings[1]);
  const auto array = ReadJsonMembers(R"([{"key": "a"}])", names);
  REQUIRE(array);
  CHECK_FALSE(array->is_object);
  // Refused by simdjson, taken by nlohmann: the caller asks nlohmann.
  CHECK_FALSE(ReadJsonMembers(R"({"key": "a", "n": 123456789012345678901234567890})", names));
  CHECK_FALSE(ReadJsonMembers(R"({"key": )", names));
}

}  // namespace
}  // namespace packrec
