// Fuzz target: the importers of other tools' containers (docs/interop.md): WebDataset tars,
// TFRecord, RecordIO with its .lst, MDS (index.json and its shards), Caffe LMDB Datums and a
// directory of tars with a packrec-export.json. The input's first byte picks the source (its low
// six bits mod 6) and options (bit 6: raw Caffe pixels as raw RGB, and TFRecord's CRCs made right;
// bit 7: deferred checks); the rest is split at kSplit into the source's files
// (tests/fuzz/make_import_seeds.py writes the seeds). Every record is read the way `packrec
// convert` reads it (deferred checks finished on the side when the source offers them). A damaged
// record or an error is fine; a crash, a hang, or a source whose place in its files goes back or
// past their end is not.
#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/crc32c.h"
#include "core/file_io.h"
#include "fuzz_util.h"
#include "packrec/source.h"

namespace {

namespace fs = std::filesystem;
using packrec::SourceFormat;

// Parts of an input are separated by this line; the seeds use it, and libFuzzer learns it from
// the comparisons.
constexpr std::string_view kSplit = "\n--packrec-fuzz-part--\n";
// Enough for every seed and what grows from it; a source with more records is read this far.
constexpr int kMaxRecords = 4096;

std::vector<std::string_view> SplitParts(std::string_view text) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = text.find(kSplit);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + kSplit.size());
  }
  parts.push_back(text);
  return parts;
}

void WriteFile(const fs::path& path, std::string_view bytes) {
  // The scratch directory must take it: that is not what is fuzzed.
  if (!packrec::WriteWholeFile(path, packrec::AsBytes(bytes), true).ok()) std::abort();
}

std::uintmax_t SizeOfFiles(const std::vector<fs::path>& files) {
  std::uintmax_t total = 0;
  for (const fs::path& file : files) {
    std::error_code error;
    const std::uintmax_t size = fs::file_size(file, error);
    if (!error) total += size;
  }
  return total;
}

// Writes each part as one value of a fresh LMDB, under Caffe-style keys.
void WriteLmdb(const fs::path& dir, const std::vector<std::string_view>& values) {
  fs::create_directories(dir);
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  if (mdb_env_create(&env) != 0 || mdb_env_set_mapsize(env, std::size_t{64} << 20) != 0 ||
      mdb_env_open(env, dir.c_str(), 0, 0644) != 0 || mdb_txn_begin(env, nullptr, 0, &txn) != 0 ||
      mdb_dbi_open(txn, nullptr, 0, &dbi) != 0) {
    std::abort();
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::string key = std::to_string(100000000 + i).substr(1) + "_image" + std::to_string(i);
    MDB_val k{key.size(), key.data()};
    MDB_val v{values[i].size(), const_cast<char*>(values[i].data())};
    if (mdb_put(txn, dbi, &k, &v, 0) != 0) std::abort();
  }
  if (mdb_txn_commit(txn) != 0) std::abort();
  mdb_env_close(env);
}

// Rewrites each TFRecord frame's two CRCs to match its bytes, so that mutations of lengths and
// of tf.Example payloads get past the CRC checks to the parsing behind them.
std::string WithTfRecordCrcsMadeRight(std::string_view frames) {
  std::string out(frames);
  auto* bytes = reinterpret_cast<std::byte*>(out.data());
  std::size_t at = 0;
  while (out.size() - at >= 12) {
    std::uint64_t length = 0;
    std::memcpy(&length, bytes + at, 8);
    const std::uint32_t length_crc = packrec::MaskCrc32c(packrec::Crc32c({bytes + at, 8}));
    std::memcpy(bytes + at + 8, &length_crc, 4);
    if (length > out.size() - at - 12 || out.size() - at - 12 - length < 4) break;
    const std::uint32_t data_crc = packrec::MaskCrc32c(packrec::Crc32c({bytes + at + 12, length}));
    std::memcpy(bytes + at + 12 + length, &data_crc, 4);
    at += 16 + length;
  }
  return out;
}

struct Prepared {
  std::string spec;
  SourceFormat format = SourceFormat::kAuto;
};

Prepared Prepare(const fs::path& dir, unsigned kind, bool crcs_right,
                 const std::vector<std::string_view>& parts) {
  auto part = [&](std::size_t i) { return i < parts.size() ? parts[i] : std::string_view(); };
  switch (kind) {
    case 0:
      WriteFile(dir / "data.tfrecord", crcs_right ? WithTfRecordCrcsMadeRight(part(0)) : part(0));
      return {(dir / "data.tfrecord").string(), SourceFormat::kTfRecord};
    case 1:
      WriteFile(dir / "data.rec", part(0));
      if (parts.size() > 1) WriteFile(dir / "data.lst", part(1));
      return {(dir / "data.rec").string(), SourceFormat::kRecordIo};
    case 2:
      for (std::size_t i = 0; i < parts.size(); ++i) {
        WriteFile(dir / ("shard-" + std::to_string(i) + ".tar"), parts[i]);
      }
      return {(dir / "shard-*.tar").string(), SourceFormat::kWebDataset};
    case 3:
      // index.json, then the shards it may name: shard.00000.mds, shard.00001.mds.zstd,
      // shard.00001.mds (which an index naming both is read from, when it is there).
      WriteFile(dir / "index.json", part(0));
      if (parts.size() > 1) WriteFile(dir / "shard.00000.mds", part(1));
      if (parts.size() > 2) WriteFile(dir / "shard.00001.mds.zstd", part(2));
      if (parts.size() > 3) WriteFile(dir / "shard.00001.mds", part(3));
      return {dir.string(), SourceFormat::kMds};
    case 4:
      WriteLmdb(dir / "caffe", parts);
      return {(dir / "caffe").string(), SourceFormat::kCaffeLmdb};
    default:
      // packrec export's manifest, then its tars (train-00000.tar, ...), format detected.
      WriteFile(dir / "packrec-export.json", part(0));
      for (std::size_t i = 1; i < parts.size(); ++i) {
        WriteFile(dir / ("train-0000" + std::to_string(i - 1) + ".tar"), parts[i]);
      }
      return {dir.string(), SourceFormat::kAuto};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned choice = data[0];
  const unsigned kind = (choice & 0x3f) % 6;  // bits 6 and 7: options
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  const fs::path dir = packrec::fuzz::FreshDir("source");
  // Bit 6 is also TFRecord's: its CRCs made right.
  Prepared prepared = Prepare(dir, kind, (choice & 0x40) != 0, SplitParts(rest));

  packrec::SourceOptions options;
  options.read_ahead = false;
  options.raw_pixels = (choice & 0x40) != 0 ? packrec::RawPixels::kRaw : packrec::RawPixels::kPng;
  if (prepared.format == SourceFormat::kAuto) {
    packrec::Result<SourceFormat> detected = packrec::DetectSourceFormat(prepared.spec);
    if (!detected.ok() || *detected == SourceFormat::kImageFolder ||
        *detected == SourceFormat::kListFile) {
      return 0;
    }
    prepared.format = *detected;
  }
  packrec::Result<std::unique_ptr<packrec::RecordSource>> opened =
      packrec::OpenRecordSource(prepared.spec, prepared.format, options);
  if (!opened.ok()) return 0;
  packrec::RecordSource& source = **opened;
  const bool deferred = (choice & 0x80) != 0 && source.DeferChecks();
  const std::uintmax_t file_bytes = SizeOfFiles(source.files());
  std::uint64_t place = 0;
  packrec::SourceRecord record;
  for (int i = 0; i < kMaxRecords; ++i) {
    packrec::Result<bool> more = source.Next(record);
    if (!more.ok() || !*more) break;
    if (deferred) source.FinishRecord(record);
    // The place the prefetching thread keeps ahead of: never back, never past the files.
    const std::uint64_t now = source.bytes_read();
    if (now < place || now > file_bytes) std::abort();
    place = now;
    (void)source.classes();
  }
  return 0;
}
