// LoaderState as JSON: the one thing a checkpoint keeps of the loader. Every field is written and
// required on reading, so a state from a newer or damaged checkpoint is refused by name instead
// of resuming somewhere else.
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

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

std::string_view ShuffleModeName(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::kNone: return "none";
    case ShuffleMode::kGlobal: return "global";
    case ShuffleMode::kWindowed: return "windowed";
  }
  return "?";
}

std::string_view LastBatchName(LastBatch mode) {
  switch (mode) {
    case LastBatch::kShort: return "short";
    case LastBatch::kPad: return "pad";
    case LastBatch::kDrop: return "drop";
  }
  return "?";
}

bool ParseShuffleMode(std::string_view name, ShuffleMode* mode) {
  for (const ShuffleMode candidate :
       {ShuffleMode::kNone, ShuffleMode::kGlobal, ShuffleMode::kWindowed}) {
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
  if (!ParseShuffleMode(shuffle, &state.shuffle)) {
    return Status::InvalidInput("loader state: shuffle '" + shuffle + "' is not none, global or windowed");
  }
  if (!ParseLastBatch(last_batch, &state.last_batch)) {
    return Status::InvalidInput("loader state: last_batch '" + last_batch + "' is not short, pad or drop");
  }
  return state;
}

}  // namespace packrec
