// What the lmdb format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "lmdb/lmdb_format.h"

namespace packrec::lmdb {
namespace {

void OptionsToJson(const WriterOptions& options, nlohmann::json& out) {
  out["lmdb_values"] = options.lmdb.values == LmdbValues::kCaffeDatum ? "caffe-datum" : "packrec";
}

void OptionsFromJson(const nlohmann::json& in, WriterOptions& options) {
  if (in.value("lmdb_values", std::string("packrec")) == "caffe-datum") {
    options.lmdb.values = LmdbValues::kCaffeDatum;
  }
}

}  // namespace

const FormatDescriptor& LmdbFormat() {
  // Never destroyed: a thread still reading when the process exits (a Python daemon thread)
  // finds it whole while exit() runs the static destructors.
  static const FormatDescriptor& kDescriptor = *new FormatDescriptor{
      .info = {.name = "lmdb",
               .summary = "one LMDB environment, which python-lmdb, Caffe and DALI read "
                          "(docs/formats/lmdb.md)",
               .suffixes = {".lmdb"},
               .readable = true,
               .single_file = false,
               .resumable = true,
               .stores_fields = true},
      .looks_like = LooksLikeLmdbDataset,
      .open = OpenLmdbDataset,
      .create = CreateLmdbWriter,
      .resume = ResumeLmdbWriter,
      .options_to_json = OptionsToJson,
      .options_from_json = OptionsFromJson,
      .uses_payload_total = true,
      .side_file_suffixes = {},  // nothing beside its output
  };
  return kDescriptor;
}

}  // namespace packrec::lmdb
