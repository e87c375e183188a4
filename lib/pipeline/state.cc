// LoaderState as JSON: the one thing a checkpoint keeps of the loader. Every field is written and
// required on reading, so a state from a newer or damaged checkpoint is refused by name instead
// of resuming somewhere else.
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/checksum.h"
#include "packrec/loader.h"

namespace packrec {
namespace {

using nlohmann::json;

constexpr std::string_view kStateKind = "packrec.loader_state";
constexpr int kStateVersion = 1;

template <typename T>
Status Take(const json& body, const char* field, T* value) {
  const auto it = body.find(field);
  if (it == body.end()) {
    return Status::InvalidInput(std::string("loader state: field '") + field + "' is missing");
  }
  try {
    if constexpr (std::is_unsigned_v<T>) {
      if (!it->is_number_unsigned()) throw json::type_error::create(302, "not unsigned", nullptr);
      const auto wide = it->get<std::uint64_t>();
      if (wide > std::numeric_limits<T>::max()) {
        return Status::InvalidInput(std::string("loader state: field '") + field +
                                    "' is out of range");
      }
      *value = static_cast<T>(wide);
    } else {
      *value = it->get<T>();
    }
  } catch (const json::exception&) {
    return Status::InvalidInput(std::string("loader state: field '") + field +
                                "' has the wrong type");
  }
  return Status::OK();
}

}  // namespace

std::string DatasetFingerprint(const DatasetInfo& info) {
  // The listing hash is of the sorted listing, so a convert-time shuffle seed is part of the
  // order too. Without a listing hash (datasets written through the API may have none), the
  // payload size stands in for the records' identity.
  std::string shuffle_seed = "none";
  try {
    const json options = json::parse(info.options_json.empty() ? "{}" : info.options_json);
    const auto it = options.find("shuffle_seed");
    if (it != options.end() && !it->is_null()) shuffle_seed = it->dump();
  } catch (const json::exception&) {
    shuffle_seed = "unreadable:" + info.options_json;
  }
  const std::string identity =
      "packrec-dataset-v1 records=" + std::to_string(info.record_count) +
      " labels=" + std::to_string(info.label_count) +
      " rejected=" + std::to_string(info.rejected_count) + " listing=" + info.listing_hash +
      " shuffle_seed=" + shuffle_seed +
      (info.listing_hash.empty() ? " payload=" + std::to_string(info.payload_bytes) : "");
  return Hex64(Xxh64(identity));
}

std::string SelectionFingerprint(const LoaderOptions& options) {
  if (options.subset.empty() && options.weights.empty() && options.mix.empty() &&
      options.samples_per_epoch == 0) {
    return "";
  }
  // Each part's length first, so that no split of the same bytes between them collides.
  std::uint64_t hash = Xxh64(std::string_view("packrec-selection-v1"));
  const auto add = [&](const void* data, std::size_t size) {
    hash = Xxh64(std::span(static_cast<const std::byte*>(data), size), hash);
  };
  const std::uint64_t sizes[4] = {options.subset.size(), options.weights.size(),
                                  options.samples_per_epoch, options.mix.size()};
  add(sizes, sizeof sizes);
  add(options.subset.data(), options.subset.size() * sizeof(std::uint64_t));
  add(options.weights.data(), options.weights.size() * sizeof(double));
  for (const LoaderOptions::MixRange& range : options.mix) {
    const std::uint64_t bounds[2] = {range.first, range.count};
    add(bounds, sizeof bounds);
    add(&range.proportion, sizeof range.proportion);
  }
  return Hex64(hash);
}

std::string_view ShuffleModeName(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::kNone:
      return "none";
    case ShuffleMode::kGlobal:
      return "global";
    case ShuffleMode::kWindowed:
      return "windowed";
    case ShuffleMode::kShards:
      return "shards";
  }
  return "?";
}

std::string_view LastBatchName(LastBatch mode) {
  switch (mode) {
    case LastBatch::kShort:
      return "short";
    case LastBatch::kPad:
      return "pad";
    case LastBatch::kDrop:
      return "drop";
  }
  return "?";
}

bool ParseShuffleMode(std::string_view name, ShuffleMode* mode) {
  for (const ShuffleMode candidate :
       {ShuffleMode::kNone, ShuffleMode::kGlobal, ShuffleMode::kWindowed, ShuffleMode::kShards}) {
    if (ShuffleModeName(candidate) == name) {
      *mode = candidate;
      return true;
    }
  }
  return false;
}

bool ParseLastBatch(std::string_view name, LastBatch* mode) {
  for (const LastBatch candidate : {LastBatch::kShort, LastBatch::kPad, LastBatch::kDrop}) {
    if (LastBatchName(candidate) == name) {
      *mode = candidate;
      return true;
    }
  }
  return false;
}

std::string LoaderState::ToJson() const {
  json body;
  body["kind"] = kStateKind;
  body["version"] = kStateVersion;
  body["fingerprint"] = fingerprint;
  body["record_count"] = record_count;
  body["seed"] = seed;
  body["shuffle"] = ShuffleModeName(shuffle);
  body["shuffle_window"] = shuffle_window;
  body["last_batch"] = LastBatchName(last_batch);
  body["global_batch_size"] = global_batch_size;
  body["world_size"] = world_size;
  body["epoch"] = epoch;
  body["position"] = position;
  if (!selection.empty()) body["selection"] = selection;
  return body.dump();
}

Result<LoaderState> LoaderState::FromJson(std::string_view text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& error) {
    return Status::InvalidInput(std::string("loader state is not JSON: ") + error.what());
  }
  if (!body.is_object()) return Status::InvalidInput("loader state is not a JSON object");
  std::string kind;
  PACKREC_RETURN_IF_ERROR(Take(body, "kind", &kind));
  if (kind != kStateKind) {
    return Status::InvalidInput("loader state: kind is '" + kind + "', not '" +
                                std::string(kStateKind) + "'");
  }
  std::uint32_t version = 0;
  PACKREC_RETURN_IF_ERROR(Take(body, "version", &version));
  if (version != kStateVersion) {
    return Status::NotSupported("loader state version " + std::to_string(version) +
                                "; this packrec reads version " + std::to_string(kStateVersion));
  }
  LoaderState state;
  std::string shuffle;
  std::string last_batch;
  PACKREC_RETURN_IF_ERROR(Take(body, "fingerprint", &state.fingerprint));
  PACKREC_RETURN_IF_ERROR(Take(body, "record_count", &state.record_count));
  PACKREC_RETURN_IF_ERROR(Take(body, "seed", &state.seed));
  PACKREC_RETURN_IF_ERROR(Take(body, "shuffle", &shuffle));
  PACKREC_RETURN_IF_ERROR(Take(body, "shuffle_window", &state.shuffle_window));
  PACKREC_RETURN_IF_ERROR(Take(body, "last_batch", &last_batch));
  PACKREC_RETURN_IF_ERROR(Take(body, "global_batch_size", &state.global_batch_size));
  PACKREC_RETURN_IF_ERROR(Take(body, "world_size", &state.world_size));
  PACKREC_RETURN_IF_ERROR(Take(body, "epoch", &state.epoch));
  PACKREC_RETURN_IF_ERROR(Take(body, "position", &state.position));
  if (body.contains("selection")) {  // absent: no subset or weights
    PACKREC_RETURN_IF_ERROR(Take(body, "selection", &state.selection));
  }
  if (!ParseShuffleMode(shuffle, &state.shuffle)) {
    return Status::InvalidInput("loader state: shuffle '" + shuffle +
                                "' is not none, global, windowed or shards");
  }
  if (!ParseLastBatch(last_batch, &state.last_batch)) {
    return Status::InvalidInput("loader state: last_batch '" + last_batch +
                                "' is not short, pad or drop");
  }
  return state;
}

}  // namespace packrec
