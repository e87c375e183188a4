// Reading numbers out of JSON documents that may come from outside or be damaged (manifests,
// journals, loader states, merge parts).
#ifndef PACKREC_LIB_STORAGE_JSON_UTIL_H_
#define PACKREC_LIB_STORAGE_JSON_UTIL_H_

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

// `object`'s field `name`, null when it has none or `object` is not an object. operator[] on a
// const object that lacks the key is undefined behaviour in nlohmann/json, and value() throws when
// the field's type is not the default's: a damaged or foreign document must not end the process.
inline const nlohmann::json& FieldOrNull(const nlohmann::json& object, const char* name) {
  static const nlohmann::json kNone;
  if (!object.is_object()) return kNone;
  const auto found = object.find(name);
  return found == object.end() ? kNone : *found;
}

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_JSON_UTIL_H_
