// One input made ready for the writer: the key rule, the probe, and a re-encode or decode when
// the options ask for one. Runs on the conversion's worker threads, one input per call.
#include <array>
#include <string>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/keys.h"
#include "decode/foreign.h"
#include "ingest/convert_internal.h"
#include "packrec/image.h"
#include "storage/field_block.h"

namespace packrec::conversion {
namespace {

// Why `key` cannot be a record's key, for that record's reject (which follows --on-error); empty
// when it can. Decided once, at convert time: too long for any format (it used to stop a whole
// import, even under --on-error skip), or against the key rule (core/keys.h: a file name with a
// newline, an import's `a//b` or `../x`), which extract would otherwise refuse whole. A key too
// long to store is not quoted.
std::string KeyRejection(std::string_view key) {
  if (key.size() > kMaxRecordKeyBytes) {
    return "its key is " + std::to_string(key.size()) + " bytes, over the " +
           std::to_string(kMaxRecordKeyBytes) + " a key may have";
  }
  const std::string problem = KeyProblem(key);
  return problem.empty() ? problem : "its key '" + PrintableKey(key) + "' " + problem;
}

// A record rejected before its bytes are looked at, for `why`.
Prepared Rejected(const std::string& why, std::uint64_t input_bytes) {
  Prepared prepared;
  prepared.input_bytes = input_bytes;
  prepared.status = Status::InvalidInput(why);
  return prepared;
}

// Probes (and, when asked, re-encodes or decodes) one input's bytes.
Prepared PrepareBytes(Result<std::vector<std::byte>> bytes, const ConvertOptions& options) {
  Prepared prepared;
  if (!bytes.ok()) {
    prepared.status = bytes.status();
    return prepared;
  }
  prepared.input_bytes = bytes->size();
  Result<ImageInfo> image = ProbeImage(*bytes);
  // BMP, GIF, TIFF, PPM/PGM are not stored as they are: transcoded below (foreign.h).
  const bool foreign = !image.ok() && !ForeignImageKind(*bytes).empty();
  if (!image.ok() && !foreign) {
    prepared.status = image.status();
    return prepared;
  }
  if (options.writer.hdf5.layout == Hdf5Layout::kPixels) {
    Result<std::vector<std::byte>> pixels =
        DecodeResizedRgb(*bytes, options.writer.hdf5.pixel_width, options.writer.hdf5.pixel_height);
    if (!pixels.ok()) {
      prepared.status = pixels.status();
      return prepared;
    }
    prepared.bytes = std::move(pixels).value();
    prepared.image = ImageInfo{Encoding::kRawRgb,
                               options.writer.hdf5.pixel_width,
                               options.writer.hdf5.pixel_height,
                               3,
                               Subsampling::kNone,
                               false};
    return prepared;
  }
  const bool reencode = options.resize_short > 0 || options.quality > 0;
  if (reencode || foreign) {
    Result<std::vector<std::byte>> transcoded =
        reencode ? TranscodeToJpeg(*bytes, options.resize_short, options.quality)
                 : TranscodeForeignToPng(*bytes);
    if (!transcoded.ok()) {
      prepared.status = transcoded.status();
      return prepared;
    }
    // The key says what is stored: extract then writes a .png (.jpg) that is one. A JPEG
    // re-encoded keeps its key (.jpg, .jpeg or none of them, as it came).
    if (foreign) {
      prepared.stored_extension = reencode ? ".jpg" : ".png";
    } else if (image->encoding != Encoding::kJpeg) {
      prepared.stored_extension = ".jpg";
    }
    image = ProbeImage(*transcoded);
    if (!image.ok()) {
      prepared.status = image.status().WithContext("after re-encoding");
      return prepared;
    }
    bytes = std::move(transcoded);
  }
  prepared.bytes = std::move(bytes).value();
  prepared.image = *image;
  return prepared;
}

}  // namespace

std::uint64_t InputStamp(std::string_view key, const FileStamp& stamp) {
  std::array<std::byte, 16> fields{};
  StoreLE<std::uint64_t>(&fields[0], stamp.size);
  StoreLE<std::int64_t>(&fields[8], stamp.mtime_ns);
  return Xxh64(fields, Xxh64(key));
}

std::string Prepared::StoredKey(std::string_view key) const {
  if (stored_extension.empty()) return std::string(key);
  std::filesystem::path path{std::string(key)};
  path.replace_extension(stored_extension);
  return path.generic_string();
}

Prepared PrepareItem(const SourceItem& item, const ConvertOptions& options,
                     const std::vector<FieldSpec>& fields) {
  if (const std::string why = KeyRejection(item.key); !why.empty()) return Rejected(why, 0);
  FileStamp stamp;
  Prepared prepared = PrepareBytes(ReadWholeFile(item.path, &stamp), options);
  prepared.input_stamp = InputStamp(item.key, stamp);
  if (!prepared.status.ok()) return prepared;
  for (const SideFile& side : item.side_files) {
    const FieldSpec& spec = fields[side.field];
    FileStamp side_stamp;
    Result<std::vector<std::byte>> value = ReadWholeFile(side.path, &side_stamp);
    Status valid = value.ok() ? ValidateFieldValue(spec, *value) : value.status();
    if (!valid.ok()) {
      prepared.status = Status::InvalidInput(
          "its side file " + side.path.string() + " (field '" + spec.name + "', " +
          std::string(FieldTypeName(spec.type)) + "): " + valid.message());
      return prepared;
    }
    prepared.input_bytes += value->size();
    prepared.input_stamp += InputStamp(item.key + '\0' + spec.name, side_stamp);
    prepared.field_values.emplace_back(side.field, std::move(value).value());
  }
  // Values from a metadata table row, checked by the writer (they were typed from them).
  prepared.field_values.insert(prepared.field_values.end(), item.field_values.begin(),
                               item.field_values.end());
  return prepared;
}

// A container record's field values, moved into `prepared` (checked where the source read them).
void TakeFields(SourceRecord& record, Prepared& prepared) {
  prepared.field_values.reserve(record.fields.size());
  for (std::size_t field = 0; field < record.fields.size(); ++field) {
    if (!record.fields[field]) continue;
    prepared.input_bytes += record.fields[field]->size();
    prepared.field_values.emplace_back(field, std::move(*record.fields[field]));
  }
}

Prepared PrepareSourceRecord(SourceRecord& record, const ConvertOptions& options) {
  if (const std::string why = KeyRejection(record.key); !why.empty()) {
    return Rejected(why, record.bytes.size());
  }
  if (record.image.encoding != Encoding::kRawRgb) {
    Prepared prepared = PrepareBytes(std::move(record.bytes), options);
    if (prepared.status.ok()) TakeFields(record, prepared);
    return prepared;
  }
  Prepared prepared;
  prepared.input_bytes = record.bytes.size();
  if (options.writer.hdf5.layout == Hdf5Layout::kPixels || options.resize_short > 0 ||
      options.quality > 0) {
    prepared.status = Status::InvalidInput(
        "a raw-pixel record cannot be resized or re-encoded; import it as PNG (--caffe-raw png)");
    return prepared;
  }
  prepared.bytes = std::move(record.bytes);
  prepared.image = record.image;
  TakeFields(record, prepared);
  return prepared;
}

}  // namespace packrec::conversion
