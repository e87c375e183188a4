#include "lmdb/lmdb_value.h"

#include <cstring>

#include <optional>

#include "core/checksum.h"
#include "core/endian.h"
#include "lmdb/lmdb_layout.h"
#include "storage/payload.h"

namespace packrec::lmdb {
namespace {

// The packrec part of a value: the whole value, or field 1729 of a Datum (whose data field is
// then the payload).
struct ValueParts {
  std::span<const std::byte> packrec;
  std::span<const std::byte> payload;
  std::uint64_t label = 0;
};
std::optional<ValueParts> Split(std::span<const std::byte> value, bool datum,
                                std::string* problem) {
  if (!datum) return ValueParts{value, {}};
  DatumFields fields;
  if (!ParseDatum(value, &fields)) {
    *problem =
        "not a well-formed caffe.Datum with packrec's field " + std::to_string(kDatumPackrecField);
    return std::nullopt;
  }
  if (!fields.encoded || !fields.has_label) {
    *problem = "caffe.Datum without encoded = true and a label";
    return std::nullopt;
  }
  return ValueParts{fields.packrec, fields.data, fields.label};
}

}  // namespace

Result<RecordView> DecodeRecordValue(std::uint64_t index, std::span<const std::byte> value,
                                     bool datum, bool verify, std::uint32_t format_version,
                                     const std::string& data_file, ReadScratch& scratch) {
  // Built only for an error: formatting it for every record cost more than the read.
  const auto where = [&] { return data_file + ": record " + std::to_string(index); };
  std::string problem;
  const std::optional<ValueParts> parts = Split(value, datum, &problem);
  if (!parts) return Status::Corruption(where() + ": " + problem);
  const std::span<const std::byte> packrec = parts->packrec;
  ValueHeader header;
  if (!DecodeValueHeader(packrec, &header)) {
    return Status::Corruption(where() + ": malformed value header");
  }
  const std::size_t header_size = ValueHeaderSize(header.version);
  if (header.version != ValueHeaderVersionOf(format_version)) {
    return Status::Corruption(where() + ": value header version " + std::to_string(header.version) +
                              " in a dataset of layout version " + std::to_string(format_version));
  }
  if (packrec.size() < header_size + header.key_size) {
    return Status::Corruption(where() + ": malformed value header (its key runs past the value)");
  }
  const std::span<const std::byte> key_bytes = packrec.subspan(header_size, header.key_size);
  if (header.version >= 2) {
    const std::uint64_t computed = ValueHeaderChecksum(packrec, key_bytes, index);
    if (computed != header.header_checksum) {
      return Status::Corruption(where() +
                                ": value header checksum mismatch (its label, size, flags or key "
                                "changed since it was written; stored " +
                                Hex64(header.header_checksum) + ", computed " + Hex64(computed) +
                                ")");
    }
  }
  RecordView view;
  view.index = index;
  view.key = std::string_view(reinterpret_cast<const char*>(key_bytes.data()), key_bytes.size());
  view.label = header.label;
  view.width = header.width;
  view.height = header.height;
  view.channels = header.channels;
  view.encoding = static_cast<Encoding>(header.encoding);
  std::span<const std::byte> stored = packrec.subspan(header_size + header.key_size);
  if (datum) {
    if (!stored.empty()) return Status::Corruption(where() + ": payload inside packrec's field");
    stored = parts->payload;
    if (parts->label != header.label) {
      return Status::Corruption(where() + ": caffe.Datum label " + std::to_string(parts->label) +
                                " differs from the packrec header's " +
                                std::to_string(header.label));
    }
  }
  if (verify) {
    const std::uint64_t computed = Xxh64(stored, /*seed=*/index);
    if (computed != header.checksum) {
      return Status::Corruption(where() + " (key '" + std::string(view.key) +
                                "'): checksum mismatch (stored " + Hex64(header.checksum) +
                                ", computed " + Hex64(computed) + ")");
    }
  }
  if ((header.flags & kValueZstd) != 0) {
    PACKREC_RETURN_IF_ERROR(DecompressPayload(stored, header.raw_size, scratch, where()));
    view.bytes = scratch.bytes;
  } else {
    if (stored.size() != header.raw_size) {
      return Status::Corruption(where() + ": payload is " + std::to_string(stored.size()) +
                                " bytes, the header says " + std::to_string(header.raw_size));
    }
    view.bytes = stored;
  }
  return view;
}

std::string RecordValueKey(std::span<const std::byte> value, bool datum) {
  std::string ignored;
  const std::optional<ValueParts> parts = Split(value, datum, &ignored);
  ValueHeader header;
  if (!parts || !DecodeValueHeader(parts->packrec, &header) ||
      ValueHeaderSize(header.version) + header.key_size > parts->packrec.size()) {
    return "";
  }
  return std::string(
      reinterpret_cast<const char*>(parts->packrec.data()) + ValueHeaderSize(header.version),
      header.key_size);
}

Result<std::span<const std::byte>> DecodeFieldsValue(std::uint64_t index,
                                                     std::span<const std::byte> value, bool verify,
                                                     const std::string& data_file) {
  const auto where = [&] { return data_file + ": record " + std::to_string(index) + "'s fields"; };
  if (value.size() < kFieldsHeaderSize ||
      std::memcmp(value.data(), kFieldsMagic.data(), kFieldsMagic.size()) != 0 ||
      LoadLE<std::uint32_t>(&value[4]) != 0) {
    return Status::Corruption(where() + ": malformed fields value header");
  }
  const std::span<const std::byte> block = value.subspan(kFieldsHeaderSize);
  if (verify) {
    const std::uint64_t stored = LoadLE<std::uint64_t>(&value[8]);
    const std::uint64_t computed = Xxh64(block, /*seed=*/index);
    if (computed != stored) {
      return Status::Corruption(where() + ": checksum mismatch (stored " + Hex64(stored) +
                                ", computed " + Hex64(computed) + ")");
    }
  }
  return block;
}

}  // namespace packrec::lmdb
