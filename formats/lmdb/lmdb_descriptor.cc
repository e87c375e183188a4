// What the lmdb format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "lmdb/lmdb_format.h"

namespace packrec::lmdb {
namespace {

void OptionsToJson(const WriterOptions& options, nlohmann::json& out) {
  out["lmdb_values"] = options.lmdb_values == LmdbValues::kCaffeDatum ? "caffe-datum" : "packrec";
}

void OptionsFromJson(const nlohmann::json& in, WriterOptions& options) {
  if (in.value("lmdb_values", std::string("packrec")) == "caffe-datum") {
    options.lmdb_values = LmdbValues::kCaffeDatum;
  }
}

}  // namespace

const FormatDescriptor& LmdbFormat() {
  static const FormatDescriptor kDescriptor = [] {
    FormatDescriptor descriptor;
    descriptor.info = {
        "lmdb",
        "one LMDB environment, which python-lmdb, Caffe and DALI read (docs/formats/lmdb.md)",
        {".lmdb"},
        /*readable=*/true,
        /*single_file=*/false,
        /*resumable=*/true};
    descriptor.looks_like = LooksLikeLmdbDataset;
    descriptor.open = OpenLmdbDataset;
    descriptor.create = CreateLmdbWriter;
    descriptor.resume = ResumeLmdbWriter;
    descriptor.options_to_json = OptionsToJson;
    descriptor.options_from_json = OptionsFromJson;
    descriptor.uses_payload_total = true;
    return descriptor;
  }();
  return kDescriptor;
}

}  // namespace packrec::lmdb
