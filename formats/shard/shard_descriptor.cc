// What the shard format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "shard/shard_format.h"

namespace packrec::shard {
namespace {

void OptionsToJson(const WriterOptions& options, nlohmann::json& out) {
  out["shard_size_bytes"] = options.shard_size_bytes;
  out["align_bytes"] = options.shard.align_bytes;
}

void OptionsFromJson(const nlohmann::json& in, WriterOptions& options) {
  options.shard_size_bytes = in.value("shard_size_bytes", options.shard_size_bytes);
  options.shard.align_bytes = in.value("align_bytes", options.shard.align_bytes);
}

}  // namespace

const FormatDescriptor& ShardFormat() {
  // Never destroyed: a thread still reading when the process exits (a Python daemon thread)
  // finds it whole while exit() runs the static destructors.
  static const FormatDescriptor& kDescriptor = *new FormatDescriptor{
      .info = {.name = "shard",
               .summary = "packrec's own sharded record files, read through mmap or from a URL "
                          "(docs/formats/shard.md)",
               .suffixes = {".pkr"},
               .readable = true,
               .single_file = false,
               .resumable = true,
               .stores_fields = true},
      .looks_like = LooksLikeShardDataset,
      .open = OpenShardDataset,
      .open_url = OpenRemoteShardDataset,
      .create = CreateShardWriter,
      .resume = ResumeShardWriter,
      .options_to_json = OptionsToJson,
      .options_from_json = OptionsFromJson,
      .side_file_suffixes = {},  // nothing beside its output
  };
  return kDescriptor;
}

}  // namespace packrec::shard
