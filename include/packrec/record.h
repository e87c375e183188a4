// What a record is: the bytes of one image plus the metadata a loader needs without decoding.
#ifndef PACKREC_RECORD_H_
#define PACKREC_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace packrec {

// What to do with an input or a record that cannot be used (convert's --on-error, the loader's
// on_bad_record): fail with its error, or leave it out, count it and go on (convert lists it in
// rejects.tsv).
enum class OnBadRecord : std::uint8_t { kFail, kSkip };

// Encoding of a record's payload. Values are stored on disk (docs/formats/shard.md): never
// renumber.
enum class Encoding : std::uint8_t {
  kUnknown = 0,
  kJpeg = 1,
  kPng = 2,
  kRawRgb = 3,  // decoded pixels: height x width x 3 uint8, rows without padding (HDF5 pixels)
  kWebp = 4,    // a still WebP (lossy or lossless); a dataset holding one has a newer version
};

// Chroma subsampling of a JPEG, as its SOF segment declares it.
enum class Subsampling : std::uint8_t {
  kNone = 0,  // not a JPEG, or not known
  k444,
  k422,
  k420,
  kGray,
  k440,
  k411,
  kOther,
};

std::string_view EncodingName(Encoding encoding);
std::string_view SubsamplingName(Subsampling subsampling);

// What the image's header says, read without decoding the pixels.
struct ImageInfo {
  Encoding encoding = Encoding::kUnknown;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint8_t channels = 0;  // components as stored: 1 gray, 3 color, 4 CMYK/RGBA, 2 gray+alpha
  Subsampling subsampling = Subsampling::kNone;
  bool progressive = false;
};

// The type of a field a record carries beside its image and label (docs/formats/fields.md).
// Values are stored on disk: never renumber.
enum class FieldType : std::uint8_t {
  kText = 1,     // UTF-8 text (a caption), stored as written
  kJson = 2,     // JSON text that parses, stored as written (not re-serialised)
  kBytes = 3,    // opaque bytes (a .png mask, .npy, .wav), with the suffix they came with
  kInt64 = 4,    // int64[]: little-endian int64 values (class ids, boxes as N x 4)
  kFloat32 = 5,  // float32[]: little-endian IEEE floats (boxes, embeddings)
};

// "text", "json", "bytes", "int64[]", "float32[]".
std::string_view FieldTypeName(FieldType type);

// One named field of a dataset's schema. Every record has a value for it, or lacks it (a record
// may lack any field: the value is then absent, never a default).
struct FieldSpec {
  std::string name;  // unique in the schema; not "image", "label" or "key"
  FieldType type = FieldType::kBytes;
  // The file suffix the values came with, without the leading dot ("txt", "mask.png"): extract
  // writes each value to <image stem>.<suffix>. Empty: the field name is the suffix.
  std::string suffix;
  // Numeric fields: the shape of one element (boxes: {4}); a value holds N such elements. Empty:
  // a flat array.
  std::vector<std::uint32_t> inner_shape;
  // The name the source gave it where that is no field name: a tf.Example feature's
  // ("image/object/bbox/xmin", stored as the field image.object.bbox.xmin), which a TFRecord
  // export names it by again. Empty: the field's name.
  std::string source_name = {};

  bool operator==(const FieldSpec&) const = default;
};

// One field's value in one record: its bytes as stored (numbers little-endian), or absent. A view
// of a field whose value is missing has present == false and no bytes.
struct FieldView {
  bool present = false;
  std::span<const std::byte> bytes;
};

// One record as a reader hands it out. The spans point either into the reader's mapping or into
// the caller's ReadScratch; see Reader::Read for how long they stay valid.
struct RecordView {
  std::uint64_t index = 0;  // global record index in the dataset
  std::string_view key;     // the record's relative path in the source, UTF-8 or raw bytes
  std::uint32_t label = 0;
  std::span<const std::byte> bytes;  // the encoded image exactly as stored at convert time
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::uint8_t channels = 0;
  Encoding encoding = Encoding::kUnknown;
  // One value per field of the dataset's schema (DatasetInfo::fields), in that order; empty when
  // the dataset has no fields. Valid as long as `bytes` is.
  std::span<const FieldView> fields;
};

}  // namespace packrec

#endif  // PACKREC_RECORD_H_
