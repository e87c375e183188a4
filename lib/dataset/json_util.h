// Reading numbers out of JSON documents that may come from outside or be damaged (manifests,
// journals, loader states, merge parts).
#ifndef PACKREC_LIB_DATASET_JSON_UTIL_H_
#define PACKREC_LIB_DATASET_JSON_UTIL_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace packrec {

// `value` as an unsigned integer of type T. nlohmann's get<T>() converts a float, a negative
// number or a too-large one with a plain cast, and for a float out of range that is undefined
// behaviour (found by fuzz_manifest). This takes only an unsigned integer that fits, and throws
// nlohmann::json::type_error otherwise, which the callers' catch blocks report as damage.
template <typename T>
T GetUnsigned(const nlohmann::json& value) {
  if (!value.is_number_unsigned()) {
    throw nlohmann::json::type_error::create(
        302, "expected an unsigned integer, got " + std::string(value.type_name()), &value);
  }
  const auto wide = value.get<std::uint64_t>();
  if (wide > std::numeric_limits<T>::max()) {
    throw nlohmann::json::out_of_range::create(406,
                                               std::to_string(wide) + " does not fit in " +
                                                   std::to_string(std::numeric_limits<T>::digits) +
                                                   " bits",
                                               &value);
  }
  return static_cast<T>(wide);
}

}  // namespace packrec

#endif  // PACKREC_LIB_DATASET_JSON_UTIL_H_
