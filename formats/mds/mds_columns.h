// How an MDS column becomes a record field (docs/interop.md): each MDS encoding mapped to the
// field type that holds its values exactly.
#ifndef PACKREC_FORMATS_MDS_MDS_COLUMNS_H_
#define PACKREC_FORMATS_MDS_MDS_COLUMNS_H_

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "packrec/record.h"
#include "packrec/status.h"

namespace packrec::mds {

// The field of column `name` of MDS encoding `encoding` ("int", "str", "ndarray:float32:3,4"):
// int and int8 to uint32 int64[] of one element; float16 and float32 float32[] of one; uint64
// and float64 a JSON number (exactly); str, str_int, str_float, str_decimal text; json JSON;
// ndarray of int64 or float32 with a fixed shape int64[] / float32[] (inner shape: the extents
// after the first); any other ndarray a .npy file (bytes, suffix NAME.npy: dtype and shape
// kept); jpeg, png, pkl bytes with suffix NAME.jpg, NAME.png, NAME.pkl; bytes and anything else
// bytes. '/' in the name becomes
// '.', and image, label and key get an mds_ prefix (source_name keeps the column's name).
FieldSpec FieldOfColumn(const std::string& name, const std::string& encoding);

// Column bytes as MDS wrote them into `value` as the field FieldOfColumn gave holds it.
// InvalidInput saying what does not fit (a scalar of the wrong size, a damaged ndarray header,
// a float64 that is not finite, which JSON cannot hold).
Status ColumnValue(const std::string& encoding, const FieldSpec& spec,
                   std::span<const std::byte> bytes, std::vector<std::byte>& value);

}  // namespace packrec::mds

#endif  // PACKREC_FORMATS_MDS_MDS_COLUMNS_H_
