// A record's field values as one block of bytes, the same in every packrec format that stores
// fields (docs/formats/fields.md): a table of (offset, size) per schema field, then the values,
// each starting at a multiple of 8 so that int64 and float32 values can be viewed in place.
#ifndef PACKREC_LIB_STORAGE_FIELD_BLOCK_H_
#define PACKREC_LIB_STORAGE_FIELD_BLOCK_H_

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/record.h"
#include "packrec/status.h"

namespace packrec {

// Table entry offset of a field the record lacks.
inline constexpr std::uint32_t kAbsentFieldOffset = 0xffffffffu;
inline constexpr std::size_t kFieldTableEntrySize = 16;
inline constexpr std::size_t kFieldValueAlignment = 8;

std::optional<FieldType> ParseFieldType(std::string_view name);

// Checks a schema: names non-empty, unique, printable and not reserved ("image", "label", "key");
// known types; an inner shape only on numeric fields, without zeros. InvalidArgument naming the
// field.
Status ValidateSchema(const std::vector<FieldSpec>& fields);

// How deep a JSON field's value may nest: what Python's json module (and so ds[i], the Loader
// and a torch DataLoader worker's own stack) reads without a RecursionError, with room to spare.
inline constexpr std::size_t kMaxJsonFieldDepth = 512;

// Checks one value against its field: text UTF-8; JSON parses, without a byte-order mark (which
// JSON readers such as Python's refuse) and nested at most kMaxJsonFieldDepth deep; numbers fill
// whole elements.
// InvalidArgument saying what is wrong (the caller adds record and field).
Status ValidateFieldValue(const FieldSpec& spec, std::span<const std::byte> bytes);
// The JSON rules beyond parsing (no byte-order mark, kMaxJsonFieldDepth), for a caller that has
// parsed the value already.
Status CheckJsonFieldLimits(std::span<const std::byte> bytes);

// A value read back, checked against the schema it is read under before anyone interprets it:
// a manifest can lie (a text field declared int64[] must never be viewed as numbers, a bytes
// field declared json never handed to a JSON parser). Corruption "field 'NAME' does not hold what
// the schema declares (TYPE): WHY", for the caller to place (record, path, offset). An absent value
// passes.
Status CheckFieldValue(const FieldSpec& spec, const FieldView& value);
// Every value of a record (values.size() == schema.size()).
Status CheckFieldValues(const std::vector<FieldSpec>& schema, std::span<const FieldView> values);

// Why `number` (a JSON number) cannot be stored in a field of `type` (int64[] or float32[])
// without a change of value nobody asked for; empty when it can. int64 holds integers from
// -2^63 to 2^63 - 1. float32 holds a decimal to its precision (about 7 digits, as numpy's
// astype("float32") does), but not a magnitude beyond its range (which would become inf) nor an
// integer it would round (beyond 2^24, most are). Import sources make such a value a named reject.
std::string NumberProblem(FieldType type, const nlohmann::json& number);

// The field's type as messages say it: "text", "float32[] of N x 4".
std::string FieldTypeText(const FieldSpec& spec);

// int64[] or float32[].
bool IsNumericField(FieldType type);

// Bytes of one element of a numeric field (element size x inner shape); 0 for the others.
std::size_t FieldElementBytes(const FieldSpec& spec);

// Appends the block of `values` (one per schema field; fewer: the rest absent) to `out`, which
// must end at a multiple of 8 relative to where the block will be read from. InvalidArgument
// when a value is 4 GiB or more.
Status AppendFieldBlock(std::size_t field_count, std::span<const FieldView> values,
                        std::vector<std::byte>& out);

// How many table entries `block` has: `field_count`, or fewer when the schema gained fields
// after the record was written (those are absent). Corruption when the table cannot end where
// the block says.
Result<std::size_t> FieldTableEntries(std::span<const std::byte> block, std::size_t field_count);

// Views of the `field_count` values in `block` into `out` (pointing into `block`). Corruption
// (with what is wrong, for the caller to place) when a table entry points outside the block.
Status DecodeFieldBlock(std::span<const std::byte> block, std::size_t field_count,
                        std::vector<FieldView>& out);
// One value of `block`, checked the same way; with `verify`, also against its own XXH64.
Result<FieldView> DecodeFieldValue(std::span<const std::byte> block, std::size_t field_count,
                                   std::size_t field, bool verify = false);
// After the block failed its checksum: the first field whose value fails its own (or whose table
// entry is impossible); nullopt when every value is intact (the table or padding is damaged).
std::optional<std::size_t> FirstDamagedField(std::span<const std::byte> block,
                                             std::size_t field_count);

// The schema as manifests store it: [{"name", "type", "suffix", "shape"}], and back (Corruption
// naming `where` when malformed).
nlohmann::json SchemaToJson(const std::vector<FieldSpec>& fields);
Result<std::vector<FieldSpec>> SchemaFromJson(const nlohmann::json& json, std::string_view where);

// The suffix extract writes a field's values under: spec.suffix, else the field name.
std::string FieldFileSuffix(const FieldSpec& spec);

// Whether extract writes the field as a column of metadata.jsonl rather than as side files: it
// came from a metadata table (no suffix) and JSON can hold it (not bytes).
bool IsTableField(const FieldSpec& spec);

// A value as a metadata.jsonl column holds it: text a string, json parsed, numbers a list (of
// rows of the inner shape's first extent when it has one). Not for bytes fields.
nlohmann::json FieldValueToJson(const FieldSpec& spec, std::span<const std::byte> bytes);

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_FIELD_BLOCK_H_
