// The one URL parser every s3:// and http(s):// caller uses (storage/object_store.h ParseUrl):
// the edge cases the four hand-written splits it replaced treated differently.
#include <doctest/doctest.h>

#include "storage/object_store.h"

namespace packrec {
namespace {

TEST_CASE("ParseUrl splits s3 URLs into bucket and key, the same way for every caller") {
  const auto parse = [](std::string_view url) {
    Result<ParsedUrl> parsed = ParseUrl(url);
    REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
    return *parsed;
  };
  ParsedUrl url = parse("s3://bucket/dir/ds.pkr/");
  CHECK(url.s3);
  CHECK(url.text == "s3://bucket/dir/ds.pkr");
  CHECK(url.bucket == "bucket");
  CHECK(url.key == "dir/ds.pkr");
  CHECK(url.BucketUrl() == "s3://bucket");
  CHECK(url.KeyPrefix() == "dir/ds.pkr/");
  // A bucket alone: no key, and no prefix (merge.cc once made the bucket's name the prefix).
  url = parse("s3://bucket");
  CHECK(url.bucket == "bucket");
  CHECK(url.key.empty());
  CHECK(url.KeyPrefix().empty());
  CHECK(parse("s3://bucket/").key.empty());
  CHECK(parse("s3://bucket//x").key == "x");
  // http(s): the text only.
  url = parse("https://host:8080/a/b/");
  CHECK_FALSE(url.s3);
  CHECK(url.text == "https://host:8080/a/b");
  CHECK(url.bucket.empty());
  // Refused, by name.
  CHECK(ParseUrl("s3://").status().code() == StatusCode::kInvalidArgument);
  CHECK(ParseUrl("s3:///key").status().message().find("no bucket") != std::string::npos);
  CHECK(ParseUrl("/local/path").status().code() == StatusCode::kInvalidArgument);
  CHECK(ParseUrl("ftp://x/y").status().message().find("ftp://x/y") != std::string::npos);
}

}  // namespace
}  // namespace packrec
