// What the shard format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "shard/shard_format.h"

namespace packrec::shard {
namespace {

void OptionsToJson(const WriterOptions& options, nlohmann::json& out) {
  out["shard_size_bytes"] = options.shard_size_bytes;
  out["align_bytes"] = options.align_bytes;
}

void OptionsFromJson(const nlohmann::json& in, WriterOptions& options) {
  options.shard_size_bytes = in.value("shard_size_bytes", options.shard_size_bytes);
  options.align_bytes = in.value("align_bytes", options.align_bytes);
}

}  // namespace

const FormatDescriptor& ShardFormat() {
  static const FormatDescriptor kDescriptor = [] {
    FormatDescriptor descriptor;
    descriptor.info = {
        "shard",
        "packrec's own sharded record files, read through mmap (docs/formats/shard.md)",
        {".pkr"},
        /*readable=*/true,
        /*single_file=*/false,
        /*resumable=*/true};
    descriptor.looks_like = LooksLikeShardDataset;
    descriptor.open = OpenShardDataset;
    descriptor.create = CreateShardWriter;
    descriptor.resume = ResumeShardWriter;
    descriptor.options_to_json = OptionsToJson;
    descriptor.options_from_json = OptionsFromJson;
    return descriptor;
  }();
  return kDescriptor;
}

}  // namespace packrec::shard
