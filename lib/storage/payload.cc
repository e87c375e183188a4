#include "storage/payload.h"

#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <string>
#include <system_error>

#include "core/checksum.h"
#include "storage/field_block.h"

namespace packrec {

Result<CompressionSetting> ParseCompression(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view codec = text.substr(0, colon);
  CompressionSetting setting;
  int max_level = 0;
  if (codec == "none" && colon == std::string_view::npos) return setting;
  if (codec == "zstd") {
    setting = {Compression::kZstd, 3};
    max_level = ZSTD_maxCLevel();
  } else if (codec == "deflate") {
    setting = {Compression::kDeflate, 4};
    max_level = 9;
  }
  const std::string_view level =
      colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  int parsed = 0;
  const auto [end, error] = std::from_chars(level.data(), level.data() + level.size(), parsed);
  const bool level_ok = colon == std::string_view::npos ||
                        (error == std::errc() && end == level.data() + level.size() &&
                         parsed >= 1 && parsed <= max_level);
  if (max_level == 0 || !level_ok) {
    return Status::InvalidArgument(
        "compression must be none, zstd, zstd:1 to zstd:" + std::to_string(ZSTD_maxCLevel()) +
        ", deflate or deflate:1 to deflate:9, got '" + std::string(text) + "'");
  }
  if (colon != std::string_view::npos) setting.level = parsed;
  return setting;
}

std::string_view CompressionName(Compression codec) {
  switch (codec) {
    case Compression::kNone:
      return "none";
    case Compression::kZstd:
      return "zstd";
    case Compression::kDeflate:
      return "deflate";
  }
  return "none";
}

bool MayCompress(const RecordInput& record, const WriterOptions& options) {
  // JPEG and WebP are entropy-coded already: zstd would spend CPU to save nothing.
  return options.compression == Compression::kZstd && record.image.encoding != Encoding::kJpeg &&
         record.image.encoding != Encoding::kWebp && !record.bytes.empty();
}

Result<StoredPayload> PreparePayload(const RecordInput& record, const WriterOptions& options,
                                     std::vector<std::byte>& buffer) {
  StoredPayload stored{record.bytes, false};
  if (!MayCompress(record, options)) return stored;
  buffer.resize(ZSTD_compressBound(record.bytes.size()));
  const std::size_t size = ZSTD_compress(buffer.data(), buffer.size(), record.bytes.data(),
                                         record.bytes.size(), options.compression_level);
  if (ZSTD_isError(size)) {
    return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(size));
  }
  if (size < record.bytes.size()) stored = {std::span<const std::byte>(buffer.data(), size), true};
  return stored;
}

std::uint64_t StoredChecksum(const RecordInput& record, std::span<const std::byte> stored,
                             std::uint64_t index) {
  if (record.checksum && record.checksum->index == index && stored.data() == record.bytes.data() &&
      stored.size() == record.bytes.size()) {
    return record.checksum->xxh64;
  }
  return Xxh64(stored, /*seed=*/index);
}

Status ValidateCommonWriterOptions(const WriterOptions& options, FormatOwnedOptions owned) {
  const bool pixels = options.hdf5.layout == Hdf5Layout::kPixels;
  if (pixels && !owned.pixel_layout) {
    return Status::InvalidArgument("--hdf5-layout pixels needs --format hdf5");
  }
  if (pixels != (options.hdf5.pixel_height > 0 || options.hdf5.pixel_width > 0)) {
    return Status::InvalidArgument(pixels ? "--hdf5-layout pixels needs --size H W"
                                          : "--size applies to --hdf5-layout pixels only");
  }
  if (pixels && (options.hdf5.pixel_height == 0 || options.hdf5.pixel_width == 0 ||
                 options.hdf5.pixel_height > 65535 || options.hdf5.pixel_width > 65535)) {
    return Status::InvalidArgument("--size must be two numbers from 1 to 65535, got " +
                                   std::to_string(options.hdf5.pixel_height) + " " +
                                   std::to_string(options.hdf5.pixel_width));
  }
  if (options.compression == Compression::kDeflate) {
    if (!pixels) {
      return Status::InvalidArgument(
          "--compress deflate applies to --hdf5-layout pixels only (use zstd for encoded images)");
    }
    if (options.compression_level < 1 || options.compression_level > 9) {
      return Status::InvalidArgument("--compress deflate level must be 1 to 9, got " +
                                     std::to_string(options.compression_level));
    }
  }
  if (options.lmdb.values == LmdbValues::kCaffeDatum) {
    if (!owned.caffe_datum_values) {
      return Status::InvalidArgument("--lmdb-values caffe-datum needs --format lmdb");
    }
    if (options.compression != Compression::kNone) {
      return Status::InvalidArgument(
          "--lmdb-values caffe-datum stores images as Caffe reads them: no --compress");
    }
  }
  if (pixels && options.compression == Compression::kZstd) {
    return Status::InvalidArgument(
        "--hdf5-layout pixels takes --compress deflate (h5py cannot read zstd without a plugin)");
  }
  if (options.compression == Compression::kZstd &&
      (options.compression_level < 1 || options.compression_level > ZSTD_maxCLevel())) {
    return Status::InvalidArgument("--compress zstd level must be 1 to " +
                                   std::to_string(ZSTD_maxCLevel()) + ", got " +
                                   std::to_string(options.compression_level));
  }
  return ValidateSchema(options.fields);
}

Status CheckRecordFields(const WriterOptions& options, const RecordInput& record,
                         std::uint64_t index) {
  if (record.fields.size() > options.fields.size()) {
    return Status::InvalidArgument(
        "record " + std::to_string(index) + " has " + std::to_string(record.fields.size()) +
        " field values; the schema has " + std::to_string(options.fields.size()) + " fields");
  }
  for (std::size_t i = 0; i < record.fields.size() && !record.fields_checked; ++i) {
    if (!record.fields[i].present) continue;
    const Status valid = ValidateFieldValue(options.fields[i], record.fields[i].bytes);
    if (!valid.ok()) {
      return Status::InvalidArgument("record " + std::to_string(index) + ", field '" +
                                     options.fields[i].name + "': " + valid.message())
          .WithRecordIndex(index);
    }
  }
  return Status::OK();
}

Status CheckKeySize(std::uint64_t index, std::size_t key_size, std::size_t max_bytes) {
  if (key_size <= max_bytes) return Status::OK();
  return Status::InvalidArgument("key of record " + std::to_string(index) + " is " +
                                 std::to_string(key_size) + " bytes (max " +
                                 std::to_string(max_bytes) + ")");
}

Status DecompressPayload(std::span<const std::byte> stored, std::uint64_t raw_size,
                         ReadScratch& scratch, const std::string& where) {
  if (raw_size > kMaxRawRecordBytes) {
    return Status::Corruption(where + ": impossible decompressed size " + std::to_string(raw_size));
  }
  // The size is allocated before decompressing, so a damaged header must not choose it alone
  // (found by fuzz_lmdb_value: a few bytes asking for gigabytes). The frame's own content size
  // must agree, and no zstd frame expands more than 32768 times: its densest block is a 3-byte
  // header and 1 byte of RLE content standing for 128 KiB.
  const unsigned long long frame_size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (frame_size == ZSTD_CONTENTSIZE_ERROR) {
    return Status::Corruption(where + ": the payload is not a zstd frame");
  }
  if (frame_size != ZSTD_CONTENTSIZE_UNKNOWN && frame_size != raw_size) {
    return Status::Corruption(where + ": the zstd frame holds " + std::to_string(frame_size) +
                              " bytes, the record says " + std::to_string(raw_size));
  }
  if (raw_size / 32768 > stored.size()) {
    return Status::Corruption(where + ": " + std::to_string(stored.size()) +
                              " compressed bytes cannot hold " + std::to_string(raw_size));
  }
  scratch.bytes.resize(raw_size);
  const std::size_t size =
      ZSTD_decompress(scratch.bytes.data(), scratch.bytes.size(), stored.data(), stored.size());
  if (ZSTD_isError(size) || size != raw_size) {
    return Status::Corruption(
        where + ": zstd payload does not decompress to " + std::to_string(raw_size) + " bytes" +
        (ZSTD_isError(size) ? std::string(" (") + ZSTD_getErrorName(size) + ")" : ""));
  }
  return Status::OK();
}

Result<std::vector<std::byte>> DecompressZstdFrames(std::span<const std::byte> compressed,
                                                    std::uint64_t max_bytes,
                                                    const std::string& where) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> stream(ZSTD_createDStream(),
                                                                    &ZSTD_freeDStream);
  if (!stream) return Status::Internal("zstd: out of memory");
  std::vector<std::byte> out;
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  for (;;) {
    if (out.size() >= max_bytes) {
      return Status::InvalidInput(where + ": decompresses to more than " +
                                  std::to_string(max_bytes) + " bytes");
    }
    const std::size_t before = out.size();
    out.resize(static_cast<std::size_t>(
        std::min<std::uint64_t>(max_bytes, before + std::max<std::size_t>(1 << 20, before))));
    ZSTD_outBuffer chunk{out.data() + before, out.size() - before, 0};
    const std::size_t left = ZSTD_decompressStream(stream.get(), &chunk, &in);
    const bool room_left = chunk.pos < chunk.size;
    out.resize(before + chunk.pos);
    if (ZSTD_isError(left)) {
      return Status::Corruption(where + ": not a valid zstd stream (" +
                                std::string(ZSTD_getErrorName(left)) + ")");
    }
    if (in.pos == in.size && left == 0) break;
    if (in.pos == in.size && room_left) {
      return Status::Truncated(where + ": the zstd stream ends mid-frame");
    }
  }
  return out;
}

Status IndexOutOfRange(std::uint64_t index, std::uint64_t size) {
  return Status::OutOfRange("record index " + std::to_string(index) +
                            " is out of range (the dataset has " + std::to_string(size) +
                            " records)")
      .WithRecordIndex(index);
}

}  // namespace packrec
