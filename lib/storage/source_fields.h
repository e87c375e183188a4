// Fields of sources that meet them while reading (a WebDataset sample's members, a tf.Example's
// features): the schema grows by name as records bring new ones, each field's type fixed by the
// value it first had; and NumPy's .npy container, which WebDataset samples carry arrays in.
#ifndef PACKREC_LIB_STORAGE_SOURCE_FIELDS_H_
#define PACKREC_LIB_STORAGE_SOURCE_FIELDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "packrec/record.h"
#include "packrec/source.h"
#include "packrec/status.h"

namespace packrec {

// A source's schema as it grows. Used by the source's reading thread only.
class GrowingSchema {
 public:
  // The field named `name`, when the source has met it.
  const FieldSpec* Find(std::string_view name) const;
  // Its place in the schema (and in SourceRecord::fields).
  std::optional<std::size_t> IndexOf(std::string_view name) const;
  // Stores `value` as field `spec.name` of `record`: a new name joins the schema (and
  // record.added_fields); a known one must have spec's type and inner shape. The value must be
  // one its type takes (ValidateFieldValue). InvalidInput naming the field otherwise (the
  // record's reject reason); `what` names it as the source does ("member txt", "feature x").
  // `checked`: the caller has made sure the value is one of spec's type (a JSON member it
  // parsed), which is then not checked again.
  Status Set(SourceRecord& record, const FieldSpec& spec, std::vector<std::byte> value,
             std::string_view what, bool checked = false);

 private:
  std::vector<FieldSpec> fields_;
  std::unordered_map<std::string, std::size_t> index_;
};

// A .npy array whose elements packrec's numeric field types hold exactly: little-endian int64
// ('<i8') or float32 ('<f4'), C order, at least one dimension.
struct NpyArray {
  FieldType type = FieldType::kFloat32;
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> data;  // into the bytes parsed
};
// The array in `bytes` (NumPy format 1.0, 2.0 or 3.0), or nullopt when it is none of those (any
// other dtype, Fortran order, a 0-d array, sizes that disagree): such a member is kept as bytes.
std::optional<NpyArray> ParseNpy(std::span<const std::byte> bytes);
// The .npy bytes numpy.save writes for `data` (format 1.0; 2.0 when the header needs it) as an
// array of `type` and `shape`.
std::vector<std::byte> EncodeNpy(FieldType type, std::span<const std::uint64_t> shape,
                                 std::span<const std::byte> data);
// The same for any NumPy dtype string ("<f8", "|u1").
std::vector<std::byte> EncodeNpy(std::string_view descr, std::span<const std::uint64_t> shape,
                                 std::span<const std::byte> data);

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_SOURCE_FIELDS_H_
