// Import sources and export writers through the library: CRC-32C against published vectors,
// source specs (globs, braces), detection, round trips through every export format, refusals.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/crc32c.h"
#include "core/endian.h"
#include "core/file_io.h"
#include "formats/shard_test_util.h"
#include "packrec/convert.h"
#include "packrec/reader.h"
#include "packrec/source.h"
#include "storage/source_util.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

TEST_CASE("CRC-32C matches RFC 3720's test vectors and TFRecord's mask") {
  std::vector<std::byte> zeros(32), ones(32, std::byte{0xff}), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[static_cast<std::size_t>(i)] = static_cast<std::byte>(i);
    down[static_cast<std::size_t>(i)] = static_cast<std::byte>(31 - i);
  }
  CHECK(Crc32c(zeros) == 0x8a9136aau);
  CHECK(Crc32c(ones) == 0x62a8ab43u);
  CHECK(Crc32c(up) == 0x46dd794eu);
  CHECK(Crc32c(down) == 0x113fdb5cu);
  CHECK(Crc32c(AsBytes("123456789")) == 0xe3069283u);
  // Extending in pieces equals one pass, at every split point (the hardware path's tail too).
  const std::span<const std::byte> all(up);
  for (std::size_t split = 0; split <= all.size(); ++split) {
    CHECK(Crc32c(all.subspan(split), Crc32c(all.first(split))) == 0x46dd794eu);
  }
  CHECK(MaskCrc32c(0) == 0xa282ead8u);
}

// The definition, a bit at a time (RFC 3720's reflected polynomial 0x82f63b78): the reference the
// library's folding paths, taken from a few hundred bytes up, must agree with.
std::uint32_t Crc32cBitwise(std::span<const std::byte> bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (const std::byte b : bytes) {
    crc ^= static_cast<std::uint8_t>(b);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82f63b78u : 0u);
  }
  return ~crc;
}

TEST_CASE("CRC-32C agrees with its bitwise definition at every size a record has") {
  std::vector<std::byte> bytes(300000);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (std::byte& b : bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<std::byte>(state >> 56);
  }
  const std::span<const std::byte> all(bytes);
  // Short tails, the sizes where wider paths take over, JPEG-sized records; odd offsets too.
  for (const std::size_t size : {0u, 1u, 7u, 8u, 15u, 63u, 64u, 127u, 255u, 256u, 257u, 1023u,
                                 4096u, 30011u, 262144u, 299999u}) {
    for (const std::size_t offset : {0u, 1u}) {
      const std::span<const std::byte> piece = all.subspan(offset, size);
      CAPTURE(size);
      CAPTURE(offset);
      CHECK(Crc32c(piece) == Crc32cBitwise(piece));
    }
  }
  // A record hashed in two calls (a frame's header, then its data) equals one pass.
  const std::span<const std::byte> record = all.first(30011);
  CHECK(Crc32c(record.subspan(12), Crc32c(record.first(12))) == Crc32cBitwise(record));
}

TEST_CASE("source specs: paths, globs and brace ranges expand in order; misses are NotFound") {
  test::TempDir dir;
  for (const char* name : {"train-000000.tar", "train-000001.tar", "train-000002.tar", "x.txt"}) {
    test::WriteText(dir / name, "x");
  }
  Result<std::vector<fs::path>> braces =
      ExpandSourceSpec((dir / "train-{000000..000002}.tar").string());
  REQUIRE(braces.ok());
  REQUIRE(braces->size() == 3);
  CHECK((*braces)[0] == dir / "train-000000.tar");
  CHECK((*braces)[2] == dir / "train-000002.tar");
  Result<std::vector<fs::path>> list =
      ExpandSourceSpec((dir / "train-{000001,000002}.tar").string());
  REQUIRE(list.ok());
  CHECK(list->size() == 2);
  Result<std::vector<fs::path>> glob = ExpandSourceSpec((dir / "train-*.tar").string());
  REQUIRE(glob.ok());
  CHECK(*glob == *braces);
  Result<std::vector<fs::path>> missing =
      ExpandSourceSpec((dir / "train-{000000..000003}.tar").string());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("train-000003.tar") != std::string::npos);
  CHECK(ExpandSourceSpec((dir / "none-*.tar").string()).status().code() == StatusCode::kNotFound);
  CHECK(ExpandSourceSpec((dir / "train-{000000..").string()).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(ExpandSourceSpec((dir / "t{9..1}").string()).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(ParseSourceFormat("wds").value() == SourceFormat::kWebDataset);
  CHECK(ParseSourceFormat("nope").status().message().find("caffe-lmdb") != std::string::npos);
}

// `tree` converted into a packrec dataset at `out`, opened.
std::unique_ptr<Reader> ConvertAndOpen(const fs::path& tree, const fs::path& out) {
  ConvertOptions options;
  options.source = tree;
  options.output = out;
  const Result<ConvertStats> converted = Convert(options);
  REQUIRE_MESSAGE(converted.ok(), converted.status().ToString());
  Result<std::unique_ptr<Reader>> reader = OpenDataset(out);
  REQUIRE(reader.ok());
  return std::move(*reader);
}

// Reads `source` to its end, checking after every record the place it says it has reached in its
// files: never back (strictly forward when `each_record_moves_on`), never past them, all of them
// at the end. The import keeps the kernel reading ahead of that place. Returns the records read.
std::uint64_t CheckPlaceInFiles(RecordSource& source, bool each_record_moves_on) {
  std::uint64_t total = 0;
  for (const fs::path& file : source.files()) total += fs::file_size(file);
  REQUIRE(source.files().size() > 1);
  std::uint64_t last = 0, records = 0;
  SourceRecord record;
  while (source.Next(record).value()) {
    REQUIRE(record.status.ok());
    ++records;
    const std::uint64_t reached = source.bytes_read();
    CHECK((each_record_moves_on ? reached > last : reached >= last));
    CHECK(reached <= total);
    last = reached;
  }
  CHECK(source.bytes_read() == total);
  return records;
}

// What reading on gives once `file` was cut short under `source`: the records that still read,
// and the failures (each Truncated, its origin `file`'s), in at most 100 calls.
struct AfterCut {
  std::size_t good = 0, failed = 0, calls = 0;
};
AfterCut ReadOnAfterCut(RecordSource& source, const fs::path& file) {
  AfterCut after;
  SourceRecord record;
  for (; after.calls < 100; ++after.calls) {
    Result<bool> more = source.Next(record);
    REQUIRE(more.ok());
    if (!*more) break;
    if (record.status.ok()) {
      ++after.good;
      continue;
    }
    ++after.failed;
    CHECK(record.status.code() == StatusCode::kTruncated);
    CHECK(record.origin.find(file.string() + " record ") == 0);
  }
  return after;
}

TEST_CASE("every export format round-trips through an import: keys, labels, bytes, classes") {
  test::TempDir dir;
  const fs::path tree = dir / "tree";
  test::SynthTree(tree, 3, 7);
  // One image larger than the window the sources read their files through: it is read past the
  // window, not through it.
  const std::vector<std::byte> big = test::MakeJpeg(2400, 1800, 11);
  REQUIRE(big.size() > SequentialFile::kWindowBytes);
  const fs::path first_class = *fs::directory_iterator(tree);
  test::WriteBytes(first_class / "big.jpg", big);
  const std::unique_ptr<Reader> expected = ConvertAndOpen(tree, dir / "direct");
  for (const char* format : {"wds", "tfrecord", "recordio"}) {
    CAPTURE(format);
    ConvertOptions out;
    out.source = tree;
    out.output = dir / (std::string(format) + "-export");
    out.writer.format = format;
    out.writer.shard_size_bytes = 20000;  // several files
    Result<ConvertStats> exported = Convert(out);
    REQUIRE_MESSAGE(exported.ok(), exported.status().ToString());
    CHECK(exported->records_written == 22);
    CHECK(fs::exists(out.output / "packrec-export.json"));
    for (const auto& entry : fs::directory_iterator(out.output)) {
      CHECK(entry.path().extension() != ".tmp");
    }
    Result<SourceFormat> detected = DetectSourceFormat(out.output.string());
    REQUIRE(detected.ok());
    CHECK(SourceFormatName(*detected) == format);
    ConvertOptions back;
    back.source = out.output;
    back.output = dir / (std::string(format) + "-back");
    Result<ConvertStats> imported = Convert(back);
    REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
    Result<std::unique_ptr<Reader>> reader = OpenDataset(back.output);
    REQUIRE(reader.ok());
    REQUIRE((*reader)->size() == expected->size());
    if (std::string(format) != "recordio") {
      CHECK((*reader)->info().classes == expected->info().classes);
    }
    CHECK((*reader)->info().source_kind == format);
    test::CheckSameRecords(**reader, *expected);
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource(out.output.string(), *detected, {});
    REQUIRE(source.ok());
    // wds reads a block of several samples at once: its place may stay put for a record.
    CHECK(CheckPlaceInFiles(**source, false) == expected->size());
  }
}

TEST_CASE("a packrec dataset imports into another packrec format, record for record") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 5);
  ConvertOptions first;
  first.source = dir / "tree";
  first.output = dir / "a.lmdb";
  first.writer.format = "lmdb";
  REQUIRE(Convert(first).ok());
  ConvertOptions second;
  second.source = dir / "a.lmdb";
  second.output = dir / "b.h5";
  second.writer.format = "hdf5";
  Result<ConvertStats> stats = Convert(second);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  Result<std::unique_ptr<Reader>> a = OpenDataset(dir / "a.lmdb");
  Result<std::unique_ptr<Reader>> b = OpenDataset(dir / "b.h5");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*b)->info().classes == (*a)->info().classes);
  test::CheckSameRecords(**a, **b);
}

TEST_CASE("imports refuse --shuffle and --part (they stream), naming why") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 3);
  ConvertOptions out;
  out.source = dir / "tree";
  out.output = dir / "wds";
  out.writer.format = "wds";
  REQUIRE(Convert(out).ok());
  ConvertOptions shuffled;
  shuffled.source = dir / "wds";
  shuffled.output = dir / "s";
  shuffled.shuffle_seed = 3;
  Result<ConvertStats> refused = Convert(shuffled);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("--shuffle") != std::string::npos);
  ConvertOptions part = shuffled;
  part.shuffle_seed.reset();
  part.part_count = 2;
  CHECK(Convert(part).status().message().find("--part") != std::string::npos);
  CHECK(!fs::exists(dir / "s"));
}

TEST_CASE("exports refuse what their format cannot carry, and leave nothing behind") {
  test::TempDir dir;
  SUBCASE("raw pixels (the hdf5 pixels layout) into wds") {
    test::SynthTree(dir / "tree", 1, 2);
    ConvertOptions pixels;
    pixels.source = dir / "tree";
    pixels.output = dir / "pixels.h5";
    pixels.writer.format = "hdf5";
    pixels.writer.hdf5.layout = Hdf5Layout::kPixels;
    pixels.writer.hdf5.pixel_height = pixels.writer.hdf5.pixel_width = 16;
    REQUIRE(Convert(pixels).ok());
    ConvertOptions out;
    out.source = dir / "pixels.h5";
    out.output = dir / "wds";
    out.writer.format = "wds";
    Result<ConvertStats> refused = Convert(out);
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK(refused.status().message().find("raw") != std::string::npos);
    CHECK(!fs::exists(dir / "wds"));
  }
  SUBCASE("a key with a tab into recordio's .lst; a label float32 cannot hold") {
    std::vector<test::TestRecord> records = test::MakeRecords(3);
    records[1].key = "has\ttab.jpg";
    test::WriteDataset(dir / "tabs", records);
    ConvertOptions out;
    out.source = dir / "tabs";
    out.output = dir / "rec";
    out.writer.format = "recordio";
    Result<ConvertStats> refused = Convert(out);
    CHECK(refused.status().message().find("record 1") != std::string::npos);
    CHECK(refused.status().message().find("tab") != std::string::npos);
    CHECK(!fs::exists(dir / "rec"));
    records[1].key = "fine.jpg";
    records[2].label = (1u << 24) + 1;
    test::WriteDataset(dir / "labels", records);
    out.source = dir / "labels";
    refused = Convert(out);
    CHECK(refused.status().message().find("float32") != std::string::npos);
    CHECK(!fs::exists(dir / "rec"));
  }
}

TEST_CASE("a TFRecord cut every 97 bytes through its last frame: the records before it import") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 1, 3);
  const test::OneFileExport tf = test::ExportOneFile(dir / "tree", dir / "tf", "tfrecord");
  const std::vector<std::byte> whole = test::ReadBytes(tf.file);
  const std::uint64_t last = tf.offsets.back();
  int cuts = 0;
  for (std::uint64_t cut = last + 1; cut < whole.size(); cut += 97) {
    test::WriteBytes(dir / "cut.tfrecord",
                     std::vector<std::byte>(whole.begin(), whole.begin() + static_cast<long>(cut)));
    ConvertOptions in;
    in.source = dir / "cut.tfrecord";
    in.output = dir / "cut";
    in.writer.overwrite = true;
    Result<ConvertStats> failed = Convert(in);
    CHECK(failed.status().code() == StatusCode::kInvalidInput);
    CHECK(failed.status().message().find("at byte " + std::to_string(last)) != std::string::npos);
    CHECK(failed.status().message().find("truncated") != std::string::npos);
    in.on_error = OnBadRecord::kSkip;
    Result<ConvertStats> skipped = Convert(in);
    REQUIRE(skipped.ok());
    CHECK(skipped->records_written == 2);
    REQUIRE(skipped->rejects.size() == 1);
    ++cuts;
  }
  CHECK(cuts > 5);
}

// The import's workers run a TFRecord's CRC check and tf.Example parse (DeferChecks): what they
// finish must be what Next alone hands out, damage included.
TEST_CASE("a TFRecord read with its checks deferred gives the records Next alone gives") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 4);
  const test::OneFileExport tf = test::ExportOneFile(dir / "tree", dir / "tf", "tfrecord");
  std::vector<std::byte> bytes = test::ReadBytes(tf.file);
  REQUIRE(tf.offsets.size() == 12);
  bytes[tf.offsets[5] + 12 + 40] ^= std::byte{1};  // inside record 5's data: its data CRC fails
  test::WriteBytes(dir / "damaged.tfrecord", bytes);

  const auto read_all = [&](bool defer) {
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource((dir / "damaged.tfrecord").string(), SourceFormat::kTfRecord, {});
    REQUIRE(source.ok());
    CHECK((*source)->DeferChecks() == true);
    if (!defer) {  // a fresh source, never asked to defer
      source = OpenRecordSource((dir / "damaged.tfrecord").string(), SourceFormat::kTfRecord, {});
      REQUIRE(source.ok());
    }
    std::vector<SourceRecord> records;
    SourceRecord record;
    for (;;) {
      Result<bool> more = (*source)->Next(record);
      REQUIRE(more.ok());
      if (!*more) break;
      if (defer) (*source)->FinishRecord(record);
      records.push_back(std::move(record));
    }
    return std::pair{std::move(records), (*source)->classes()};
  };
  const auto [direct, direct_classes] = read_all(false);
  const auto [deferred, deferred_classes] = read_all(true);
  REQUIRE(direct.size() == 12);
  REQUIRE(deferred.size() == direct.size());
  for (std::size_t i = 0; i < direct.size(); ++i) {
    CAPTURE(i);
    CHECK(deferred[i].status.code() == direct[i].status.code());
    CHECK(deferred[i].status.message() == direct[i].status.message());
    CHECK(deferred[i].origin == direct[i].origin);
    CHECK(direct[i].status.ok() == (i != 5));
    if (!direct[i].status.ok()) continue;
    CHECK(deferred[i].key == direct[i].key);
    CHECK(deferred[i].label == direct[i].label);
    CHECK(deferred[i].bytes == direct[i].bytes);
  }
  CHECK(direct[5].status.message().find("data CRC") != std::string::npos);
  CHECK(direct_classes.size() == 3);
  CHECK(deferred_classes == direct_classes);
}

}  // namespace
}  // namespace packrec

namespace packrec {
namespace {

TEST_CASE("a directory holding only container files imports as that format, files sorted") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 6);
  ConvertOptions out;
  out.source = dir / "tree";
  out.output = dir / "tf-export";
  out.writer.format = "tfrecord";
  out.writer.shard_size_bytes = 20000;
  REQUIRE(Convert(out).ok());
  // As another tool leaves them: the data files (and their .idx) without packrec's manifest.
  fs::create_directories(dir / "plain");
  int copied = 0;
  for (const auto& entry : fs::directory_iterator(out.output)) {
    if (entry.path().filename() == "packrec-export.json") continue;
    fs::copy_file(entry.path(), dir / "plain" / entry.path().filename());
    copied += entry.path().extension() == ".tfrecord" ? 1 : 0;
  }
  REQUIRE(copied > 1);
  Result<SourceFormat> detected = DetectSourceFormat((dir / "plain").string());
  REQUIRE(detected.ok());
  CHECK(*detected == SourceFormat::kTfRecord);
  ConvertOptions in;
  in.source = dir / "plain";
  in.output = dir / "back";
  Result<ConvertStats> imported = Convert(in);
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  CHECK(imported->records_written == 12);
  Result<std::unique_ptr<Reader>> reader = OpenDataset(dir / "back");
  REQUIRE(reader.ok());
  ReadScratch scratch;
  Result<RecordView> first = (*reader)->Read(0, scratch);
  REQUIRE(first.ok());
  CHECK(std::string(first->key).rfind((*reader)->info().classes.at(0) + "/", 0) == 0);
  // A tree with sub-directories stays an image folder.
  CHECK(DetectSourceFormat((dir / "tree").string()).value() == SourceFormat::kImageFolder);
  // --from a format the directory holds no files of: said so, not "cannot read a directory".
  Result<std::unique_ptr<RecordSource>> wrong =
      OpenRecordSource((dir / "plain").string(), SourceFormat::kRecordIo, {});
  CHECK(wrong.status().code() == StatusCode::kInvalidInput);
  CHECK(wrong.status().message() == "--from recordio: " + (dir / "plain").string() +
                                        " is a directory without *.rec files (it holds tfrecord "
                                        "files); name the files (a glob or a brace range), or "
                                        "leave out --from to detect the format");
  wrong = OpenRecordSource((dir / "tree").string(), SourceFormat::kWebDataset, {});
  CHECK(wrong.status().code() == StatusCode::kInvalidInput);
  CHECK(wrong.status().message().find(" is a directory without *.tar") != std::string::npos);
  CHECK(wrong.status().message().find("(it holds") == std::string::npos);
}

// Writes `bytes` leaving every all-zero 4 KiB block unwritten (a hole), and sets the size, so a
// file that ends in zeros ends in a hole.
void WriteSparse(const fs::path& path, const std::vector<std::byte>& bytes) {
  {
    std::ofstream out(path, std::ios::binary);
    for (std::size_t at = 0; at < bytes.size(); at += 4096) {
      const std::size_t size = std::min<std::size_t>(4096, bytes.size() - at);
      const auto block = std::span(bytes).subspan(at, size);
      if (std::all_of(block.begin(), block.end(), [](std::byte b) { return b == std::byte{0}; })) {
        continue;
      }
      out.seekp(static_cast<std::streamoff>(at));
      out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(size));
    }
  }
  fs::resize_file(path, bytes.size());
}

TEST_CASE("a WebDataset tar of sparse members reads their holes as zeros, a trailing one too") {
  test::TempDir dir;
  fs::create_directories(dir / "src");
  const auto pattern = [](std::size_t size, int seed) {
    std::vector<std::byte> bytes(size);
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 31 + seed) | 1);
    return bytes;
  };
  const auto join = [](std::initializer_list<std::vector<std::byte>> parts) {
    std::vector<std::byte> all;
    for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  // A hole inside, a hole at the end (no data block follows it), a hole at the start.
  const std::vector<std::vector<std::byte>> members = {
      join({pattern(4096, 1), std::vector<std::byte>(12288), pattern(3000, 2)}),
      join({pattern(5000, 3), std::vector<std::byte>(20000)}),
      join({std::vector<std::byte>(8192), pattern(100, 4)})};
  const std::vector<std::string> keys = {"a", "b", "c"};
  std::size_t stored = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    WriteSparse(dir / "src" / (keys[i] + ".jpg"), members[i]);
    stored += members[i].size();
  }
  // GNU tar's own sparse headers, and pax's (the two sparse encodings libarchive reads).
  for (const std::string tar_format : {"gnu", "posix"}) {
    CAPTURE(tar_format);
    const fs::path tar = dir / (tar_format + ".tar");
    const std::string command = "cd " + test::Quote(dir / "src") +
                                " && tar --sparse --format=" + tar_format + " -cf " +
                                test::Quote(tar) + " a.jpg b.jpg c.jpg";
    REQUIRE(std::system(command.c_str()) == 0);
    // The zeros are not in the tar: the members really are sparse.
    REQUIRE(fs::file_size(tar) < stored);
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource(tar.string(), SourceFormat::kWebDataset, {});
    REQUIRE(source.ok());
    SourceRecord record;
    for (std::size_t i = 0; i < members.size(); ++i) {
      CAPTURE(i);
      REQUIRE((*source)->Next(record).value());
      REQUIRE(record.status.ok());
      CHECK(record.key == keys[i] + ".jpg");
      CHECK(record.bytes == members[i]);
    }
    CHECK_FALSE((*source)->Next(record).value());
  }
}

// `tar` gives one record: sample 0's Corruption reject ("truncated or damaged member"), its origin
// naming `tar`, the sample and `member`; nothing after it (the rest of a damaged tar is not read).
void CheckDamagedMemberEndsTar(const fs::path& tar, const std::string& member) {
  Result<std::unique_ptr<RecordSource>> source =
      OpenRecordSource(tar.string(), SourceFormat::kWebDataset, {});
  REQUIRE(source.ok());
  SourceRecord record;
  REQUIRE((*source)->Next(record).value());
  CHECK(record.status.code() == StatusCode::kCorruption);
  CHECK(record.status.message().find("truncated or damaged member") != std::string::npos);
  CHECK(record.origin.find(tar.string() + " sample 0 at byte ") == 0);
  CHECK(record.origin.find("(member " + member + ")") != std::string::npos);
  CHECK_FALSE((*source)->Next(record).value());
}

// A sparse map whose entries go backwards (a damaged or forged header; libarchive hands the blocks
// over in the map's order) is a damaged member, not bytes written over the ones before them.
TEST_CASE("a WebDataset sparse member whose map goes backwards is one named reject") {
  test::TempDir dir;
  fs::create_directories(dir / "src");
  std::vector<std::byte> image(19384, std::byte{0x5a});
  std::fill(image.begin() + 4096, image.begin() + 16384, std::byte{0});  // a hole
  WriteSparse(dir / "src" / "a.jpg", image);
  std::ofstream(dir / "src" / "b.jpg", std::ios::binary) << std::string(5000, 'b');
  const fs::path tar = dir / "backwards.tar";
  REQUIRE(std::system(("cd " + test::Quote(dir / "src") + " && tar --sparse --format=gnu -cf " +
                       test::Quote(tar) + " a.jpg b.jpg")
                          .c_str()) == 0);
  // GNU tar's old sparse header: type 'S', four (offset, size) pairs of 12 octal digits at 386.
  std::vector<std::byte> bytes = test::ReadBytes(tar);
  REQUIRE(static_cast<char>(bytes[156]) == 'S');
  const auto field = [&](std::size_t at) {
    return std::string(reinterpret_cast<const char*>(bytes.data()) + at, 12);
  };
  REQUIRE(std::stoull(field(386), nullptr, 8) < std::stoull(field(410), nullptr, 8));
  REQUIRE(std::stoull(field(410 + 12), nullptr, 8) > 0);
  std::swap_ranges(bytes.begin() + 386, bytes.begin() + 410, bytes.begin() + 410);
  // The header checksum: the sum of its bytes, the checksum field counted as spaces.
  std::fill(bytes.begin() + 148, bytes.begin() + 156, std::byte{' '});
  unsigned sum = 0;
  for (std::size_t i = 0; i < 512; ++i) sum += static_cast<unsigned>(bytes[i]);
  char checksum[8];
  std::snprintf(checksum, sizeof checksum, "%06o", sum);
  std::memcpy(bytes.data() + 148, checksum, 7);
  test::WriteBytes(tar, bytes);
  CheckDamagedMemberEndsTar(tar, "a.jpg");
}

TEST_CASE(
    "WebDataset members of dropped fields are skipped unread, a member over 2 GiB rejects "
    "only its sample") {
  test::TempDir dir;
  fs::create_directories(dir / "src");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / "src" / name, std::ios::binary) << text;
  };
  const std::string image_a(70000, 'a'), image_c(5000, 'c');
  write("a.jpg", image_a);
  write("a.cls", "3");
  write("b.cls", "1");
  write("c.jpg", image_c);
  write("c.txt", "a caption");
  write("c.npy", std::string(3 << 20, 'n'));  // stored in full: skipped past, not read
  // 3 GiB each, all hole: the tar stays small. No record needs a.bin; b.jpg is b's image.
  constexpr std::uintmax_t kHuge = 3ull << 30;
  std::ofstream(dir / "src" / "a.bin").close();
  fs::resize_file(dir / "src" / "a.bin", kHuge);
  std::ofstream(dir / "src" / "b.jpg").close();
  fs::resize_file(dir / "src" / "b.jpg", kHuge);
  const std::string members = "a.jpg a.cls a.bin b.jpg b.cls c.jpg c.txt c.npy";
  const fs::path tar = dir / "huge.tar";
  REQUIRE(std::system(("cd " + test::Quote(dir / "src") + " && tar --sparse --format=posix -cf " +
                       test::Quote(tar) + " " + members)
                          .c_str()) == 0);
  REQUIRE(fs::file_size(tar) < (8u << 20));
  // Compressed, libarchive cannot seek: it reads through what is skipped.
  REQUIRE(std::system(("gzip -1 -k " + test::Quote(tar)).c_str()) == 0);
  // Every member is a field unless dropped: a.bin, over 2 GiB, then rejects its sample.
  {
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource(tar.string(), SourceFormat::kWebDataset, {});
    REQUIRE(source.ok());
    SourceRecord record;
    REQUIRE((*source)->Next(record).value());
    CHECK(record.status.code() == StatusCode::kInvalidInput);
    CHECK(record.status.message().find("its bin member is 3221225472 bytes, over the 2 GiB") !=
          std::string::npos);
  }
  SourceOptions dropping;
  dropping.drop_fields = {"bin", "txt", "npy"};
  for (const fs::path& file : {tar, fs::path(tar.string() + ".gz")}) {
    CAPTURE(file);
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource(file.string(), SourceFormat::kWebDataset, dropping);
    REQUIRE(source.ok());
    SourceRecord record;
    REQUIRE((*source)->Next(record).value());
    REQUIRE_MESSAGE(record.status.ok(), record.status.ToString());
    CHECK(record.key == "a.jpg");
    CHECK(record.label == 3);
    CHECK(record.bytes.size() == image_a.size());
    CHECK(std::equal(record.bytes.begin(), record.bytes.end(), image_a.begin(),
                     [](std::byte x, char y) { return x == static_cast<std::byte>(y); }));
    REQUIRE((*source)->Next(record).value());
    CHECK(record.status.code() == StatusCode::kInvalidInput);
    CHECK(record.status.message().find("its jpg member is 3221225472 bytes, over the 2 GiB") !=
          std::string::npos);
    CHECK(record.origin.find(file.string() + " sample 1 (b)") == 0);
    REQUIRE((*source)->Next(record).value());
    REQUIRE_MESSAGE(record.status.ok(), record.status.ToString());
    CHECK(record.key == "c.jpg");
    CHECK(record.bytes.size() == image_c.size());
    CHECK_FALSE((*source)->Next(record).value());
    // Skipped bytes count as read: the import's read-ahead stays ahead of the reader.
    CHECK((*source)->bytes_read() == fs::file_size(file));
  }
}

TEST_CASE("WebDataset --image-field and --label-field pick the members, any case") {
  test::TempDir dir;
  fs::create_directories(dir / "src");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / "src" / name, std::ios::binary) << text;
  };
  write("a.jpg", "jpeg bytes");
  write("a.png", "png bytes");
  write("a.cls", "1");
  write("a.label", "5");
  const fs::path tar = dir / "fields.tar";
  REQUIRE(std::system(("cd " + test::Quote(dir / "src") + " && tar -cf " + test::Quote(tar) +
                       " a.jpg a.png a.cls a.label")
                          .c_str()) == 0);
  struct Case {
    std::string image_field, label_field, key, bytes;
    std::uint32_t label;
  };
  for (const Case& want :
       {Case{"", "", "a.jpg", "jpeg bytes", 1}, Case{"PNG", "Label", "a.png", "png bytes", 5}}) {
    CAPTURE(want.image_field);
    SourceOptions options;
    options.image_field = want.image_field;
    options.label_field = want.label_field;
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource(tar.string(), SourceFormat::kWebDataset, options);
    REQUIRE(source.ok());
    SourceRecord record;
    REQUIRE((*source)->Next(record).value());
    REQUIRE_MESSAGE(record.status.ok(), record.status.ToString());
    CHECK(record.key == want.key);
    CHECK(record.label == want.label);
    CHECK(std::string(reinterpret_cast<const char*>(record.bytes.data()), record.bytes.size()) ==
          want.bytes);
    CHECK_FALSE((*source)->Next(record).value());
  }
}

TEST_CASE("a WebDataset tar cut short inside a skipped member is one named reject") {
  test::TempDir dir;
  fs::create_directories(dir / "src");
  std::ofstream(dir / "src" / "a.jpg", std::ios::binary) << std::string(5000, 'a');
  std::ofstream(dir / "src" / "a.npy", std::ios::binary) << std::string(1 << 20, 'n');
  std::ofstream(dir / "src" / "b.jpg", std::ios::binary) << std::string(5000, 'b');
  const fs::path tar = dir / "cut.tar";
  REQUIRE(std::system(("cd " + test::Quote(dir / "src") + " && tar -cf " + test::Quote(tar) +
                       " a.jpg a.npy b.jpg")
                          .c_str()) == 0);
  fs::resize_file(tar, 512 * 1024);  // half way through a.npy
  CheckDamagedMemberEndsTar(tar, "a.npy");
}

// A ustar tar of `members` (name, bytes), in that order, written by GNU tar; where each member's
// header starts, read back from the tar (a header per member: the names are short).
struct TarMember {
  std::string name;
  std::string bytes;
};
std::vector<std::uint64_t> MakeTar(const fs::path& tar, const std::vector<TarMember>& members) {
  const fs::path src = tar.string() + ".members";
  fs::create_directories(src);
  std::string names;
  for (const TarMember& member : members) {
    std::ofstream(src / member.name, std::ios::binary) << member.bytes;
    names += " " + member.name;
  }
  REQUIRE(std::system(("cd " + test::Quote(src) + " && tar --format=ustar --hard-dereference -cf " +
                       test::Quote(tar) + names)
                          .c_str()) == 0);
  fs::remove_all(src);
  std::vector<std::uint64_t> headers;
  std::uint64_t at = 0;
  for (const TarMember& member : members) {
    headers.push_back(at);
    at += 512 + (member.bytes.size() + 511) / 512 * 512;
  }
  headers.push_back(at);  // where the zero blocks that end it start
  return headers;
}

// What `source` gives, one line a record: "KEY LABEL", or "reject ORIGIN: MESSAGE".
std::vector<std::string> Listed(RecordSource& source) {
  std::vector<std::string> seen;
  SourceRecord record;
  for (;;) {
    const Result<bool> more = source.Next(record);
    REQUIRE_MESSAGE(more.ok(), more.status().ToString());
    if (!*more) return seen;
    seen.push_back(record.status.ok() ? record.key + " " + std::to_string(record.label)
                                      : "reject " + record.origin + ": " + record.status.message());
  }
}

// Listed() of the WebDataset source `spec`.
std::vector<std::string> ImportedFrom(const std::string& spec) {
  Result<std::unique_ptr<RecordSource>> source =
      OpenRecordSource(spec, SourceFormat::kWebDataset, {});
  REQUIRE_MESSAGE(source.ok(), source.status().ToString());
  return Listed(**source);
}

// A tar writer stopped between two members (a killed WebDataset ShardWriter) leaves a tar without
// its end blocks, which libarchive reads as whole: its last sample may lack its label.
TEST_CASE("a WebDataset tar that ends without its end blocks rejects its last sample") {
  test::TempDir dir;
  const fs::path tar = dir / "a.tar";
  const std::vector<std::uint64_t> headers = MakeTar(tar, {{"a.jpg", std::string(5000, 'a')},
                                                           {"a.cls", "3"},
                                                           {"b.jpg", std::string(700, 'b')},
                                                           {"b.cls", "1"}});
  const std::string whole = test::Quote(tar);
  CHECK(ImportedFrom(tar.string()) == std::vector<std::string>{"a.jpg 3", "b.jpg 1"});
  const auto cut_at = [&](std::uint64_t size) {
    const fs::path cut = dir / ("cut-" + std::to_string(size) + ".tar");
    fs::copy_file(tar, cut);
    fs::resize_file(cut, size);
    return cut.string();
  };
  const std::string no_end =
      " without the zero blocks that end a tar, as one whose writing stopped does; its last sample "
      "may be missing members; the samples before it are kept";
  // Cut before a.cls: sample a would have had label 0.
  std::string cut = cut_at(headers[1]);
  CHECK(ImportedFrom(cut) ==
        std::vector<std::string>{"reject " + cut + " sample 0 at byte 0: the tar ends at byte " +
                                 std::to_string(headers[1]) + no_end});
  // Cut before b.cls: a is whole, b is not.
  cut = cut_at(headers[3]);
  CHECK(ImportedFrom(cut) ==
        std::vector<std::string>{
            "a.jpg 3", "reject " + cut + " sample 1 at byte " + std::to_string(headers[2]) +
                           ": the tar ends at byte " + std::to_string(headers[3]) + no_end});
  // One zero block of the two (GNU tar reads it with a warning): whole.
  cut = cut_at(headers[4] + 512);
  CHECK(ImportedFrom(cut) == std::vector<std::string>{"a.jpg 3", "b.jpg 1"});
  // A header cut short, or damaged, inside sample a: a goes with the rest of the tar.
  cut = cut_at(headers[1] + 100);
  std::vector<std::string> seen = ImportedFrom(cut);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].starts_with("reject " + cut + " sample 0 at byte " + std::to_string(headers[1]) +
                            ": bad tar header"));
  std::vector<std::byte> bytes = test::ReadBytes(tar);
  bytes[headers[1] + 148] = std::byte{'9'};  // the header checksum's first digit: not octal
  test::WriteBytes(dir / "bad-header.tar", bytes);
  seen = ImportedFrom((dir / "bad-header.tar").string());
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].starts_with("reject " + (dir / "bad-header.tar").string() + " sample 0 at byte " +
                            std::to_string(headers[1]) + ": bad tar header"));
}

// WebDataset's reader keeps the last of two members with one name and yields a repeated key as
// two samples; a converter must not guess which is meant, nor keep one silently.
TEST_CASE(
    "a WebDataset sample with two members of one suffix, or a repeated key, is a reject, also "
    "across tars") {
  test::TempDir dir;
  const fs::path twice = dir / "twice.tar";
  MakeTar(twice, {{"a.jpg", "first"},
                  {"a.cls", "1"},
                  {"a.jpg", "second"},
                  {"a.cls", "2"},
                  {"b.jpg", "b"},
                  {"b.cls", "3"}});
  CHECK(ImportedFrom(twice.string()) ==
        std::vector<std::string>{"reject " + twice.string() +
                                     " sample 0 (a) at byte 0: it has two members named a.jpg "
                                     "(or with that suffix): which one is meant cannot be told",
                                 "b.jpg 3"});
  const fs::path again = dir / "again.tar";
  const std::vector<std::uint64_t> headers = MakeTar(again, {{"a.jpg", "a"},
                                                             {"a.cls", "1"},
                                                             {"b.jpg", "b"},
                                                             {"b.cls", "3"},
                                                             {"a.jpg", "a"},
                                                             {"a.cls", "1"}});
  CHECK(ImportedFrom(again.string()) ==
        std::vector<std::string>{
            "a.jpg 1", "b.jpg 3",
            "reject " + again.string() + " sample 2 (a) at byte " + std::to_string(headers[4]) +
                ": its key was the key of the sample at byte 0 of this tar already (a second "
                "sample of one key is not kept)"});
  // The same key in a later tar of the source: a reject as within one tar (the first is kept).
  fs::create_directories(dir / "two");
  MakeTar(dir / "two" / "p.tar", {{"a.jpg", "a"}, {"a.cls", "1"}, {"b.jpg", "b"}, {"b.cls", "3"}});
  MakeTar(dir / "two" / "q.tar", {{"c.jpg", "c"}, {"c.cls", "4"}, {"a.jpg", "x"}, {"a.cls", "5"}});
  const std::vector<std::string> across = ImportedFrom((dir / "two" / "*.tar").string());
  REQUIRE(across.size() == 4);
  CHECK(std::vector<std::string>(across.begin(), across.begin() + 3) ==
        std::vector<std::string>{"a.jpg 1", "b.jpg 3", "c.jpg 4"});
  CHECK(across[3].starts_with("reject " + (dir / "two" / "q.tar").string() + " sample 1 (a)"));
  CHECK(
      across[3].ends_with(": its key was the key of a sample of an earlier tar of this source "
                          "already (a second sample of one key is not kept)"));
  // GNU tar stores a file named twice as a hard link to the first: a member without bytes.
  const fs::path linked = dir / "linked.tar";
  test::WriteText(dir / "a.jpg", "a");
  test::WriteText(dir / "a.cls", "1");
  REQUIRE(std::system(("cd " + test::Quote(dir.path()) + " && tar --format=ustar -cf " +
                       test::Quote(linked) + " a.jpg a.cls a.jpg")
                          .c_str()) == 0);
  CHECK(ImportedFrom(linked.string()) ==
        std::vector<std::string>{"reject " + linked.string() +
                                 " sample 0 (a) at byte 0: its member a.jpg is a hard link to "
                                 "a.jpg in the tar, not a file: its bytes are not there to keep"});
  // Through convert: --on-error fail stops naming it (exit 3), nothing written.
  const test::CommandResult failed =
      test::RunCli("convert -q --from wds " + test::Quote(twice) + " " + test::Quote(dir / "out"));
  CHECK_MESSAGE(failed.exit_code == 3, failed.output);
  CHECK_MESSAGE(failed.output.find("two members named a.jpg") != std::string::npos, failed.output);
  CHECK_FALSE(fs::exists(dir / "out"));
}

// An empty file holds no samples (GNU tar reads one so, as packrec's TFRecord and RecordIO
// importers read their empty files); a file that is no tar is one reject, the next tar goes on.
TEST_CASE("WebDataset sources: an empty file gives no samples, one that is no tar a reject") {
  test::TempDir dir;
  fs::create_directories(dir / "src");
  MakeTar(dir / "src" / "a.tar", {{"a.jpg", std::string(900, 'a')}, {"a.cls", "2"}});
  test::WriteText(dir / "src" / "b.tar", "");
  test::WriteText(dir / "src" / "c.tar", std::string(3000, 'x'));
  MakeTar(dir / "src" / "d.tar", {{"d.jpg", std::string(900, 'd')}, {"d.cls", "5"}});
  const std::string spec = (dir / "src" / "*.tar").string();
  CHECK(ImportedFrom(spec) ==
        std::vector<std::string>{"a.jpg 2",
                                 "reject " + (dir / "src" / "c.tar").string() +
                                     " sample 0 at byte 0: not a tar archive: Unrecognized archive "
                                     "format; the file is not read",
                                 "d.jpg 5"});
}

// `reader`'s records as an MDS dataset in `dir`, laid out as MosaicML Streaming's MDSWriter
// writes it (docs/interop.md; columns filename: str, image: jpeg, label: int, sorted by name),
// `per_shard` samples a shard, from the published layout rather than packrec's code. Returns each
// shard's file and where each of its samples starts.
struct MdsShard {
  fs::path file;
  std::vector<std::uint32_t> offsets;
};
std::vector<MdsShard> WriteMds(const Reader& reader, const fs::path& dir, std::uint64_t per_shard) {
  fs::create_directories(dir);
  std::vector<MdsShard> written;
  std::string index = R"({"version": 2, "shards": [)";
  ReadScratch scratch;
  for (std::uint64_t first = 0; first < reader.size(); first += per_shard) {
    const std::uint64_t count = std::min(per_shard, reader.size() - first);
    const std::string config = R"({"format": "mds"})";
    std::vector<std::byte> samples;
    MdsShard shard;
    shard.file = dir / ("shard." + std::to_string(100000 + written.size()).substr(1) + ".mds");
    const std::uint64_t data_start = 4 + 4 * (count + 1) + config.size();
    for (std::uint64_t i = first; i < first + count; ++i) {
      Result<RecordView> record = reader.Read(i, scratch);
      REQUIRE(record.ok());
      shard.offsets.push_back(static_cast<std::uint32_t>(data_start + samples.size()));
      std::byte sizes[8];
      StoreLE<std::uint32_t>(sizes, static_cast<std::uint32_t>(record->key.size()));
      StoreLE<std::uint32_t>(sizes + 4, static_cast<std::uint32_t>(record->bytes.size()));
      samples.insert(samples.end(), sizes, sizes + 8);
      const auto* key = reinterpret_cast<const std::byte*>(record->key.data());
      samples.insert(samples.end(), key, key + record->key.size());
      samples.insert(samples.end(), record->bytes.begin(), record->bytes.end());
      std::byte label[8];
      StoreLE<std::uint64_t>(label, record->label);
      samples.insert(samples.end(), label, label + 8);
    }
    std::vector<std::byte> bytes(data_start);
    StoreLE<std::uint32_t>(bytes.data(), static_cast<std::uint32_t>(count));
    for (std::uint64_t i = 0; i <= count; ++i) {
      const std::uint64_t offset = i < count ? shard.offsets[i] : data_start + samples.size();
      StoreLE<std::uint32_t>(bytes.data() + 4 + 4 * i, static_cast<std::uint32_t>(offset));
    }
    std::memcpy(bytes.data() + 4 + 4 * (count + 1), config.data(), config.size());
    bytes.insert(bytes.end(), samples.begin(), samples.end());
    test::WriteBytes(shard.file, bytes);
    index += std::string(written.empty() ? "" : ", ") + R"({"format": "mds", "samples": )" +
             std::to_string(count) +
             R"(, "column_names": ["filename", "image", "label"], "column_encodings": ["str", )"
             R"("jpeg", "int"], "column_sizes": [null, null, 8], "compression": null, )"
             R"("raw_data": {"basename": ")" +
             shard.file.filename().string() + R"("}, "zip_data": null})";
    written.push_back(std::move(shard));
  }
  test::WriteText(dir / "index.json", index + "]}");
  return written;
}

// Fields of the wrong type or missing: nlohmann/json's value() throws on a type it was not given
// and operator[] on a const object that lacks the key is undefined, so both ended the process.
TEST_CASE("an MDS index.json or packrec-export.json of the wrong shape: named, never a crash") {
  test::TempDir dir;
  fs::create_directories(dir / "mds");
  test::WriteText(dir / "mds" / "shard.00000.mds", "");
  const std::string columns =
      R"("column_names": ["image"], "column_encodings": ["bytes"], "column_sizes": )";
  for (const std::string& shard : std::vector<std::string>{
           R"({"format": 5})", R"({"format": "mds", "samples": "1"})",
           R"({"format": "mds", "samples": 1})",
           R"({"format": "mds", "samples": 1, )" + columns + "[4294967296]}",
           R"({"format": "mds", "samples": 1, )" + columns + R"([null], "raw_data": 4})",
           R"({"format": "mds", "samples": 1, )" + columns +
               R"([null], "raw_data": {"basename": 7}, "zip_data": {"basename": null}})",
           R"({"format": "mds", "samples": 1, )" + columns +
               R"([null], "zip_data": {"basename": "shard.00000.mds.zstd"}, "compression": 3})"}) {
    CAPTURE(shard);
    test::WriteText(dir / "mds" / "index.json", R"({"shards": [)" + shard + "]}");
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource((dir / "mds").string(), SourceFormat::kMds, {});
    REQUIRE_FALSE(source.ok());
    CHECK(source.status().code() == StatusCode::kInvalidInput);
    CHECK(
        source.status().message().starts_with((dir / "mds" / "index.json").string() + ": shard 0"));
  }
  // A packrec-export.json that is not packrec's is no export manifest: the tars are found as in
  // any directory of them.
  MakeTar(dir / "wds" / "a.tar", {{"a.jpg", std::string(900, 'a')}, {"a.cls", "2"}});
  for (const std::string manifest :
       {R"({"format": 5, "files": []})", R"({"format": "wds", "files": 7})",
        R"({"format": "wds", "files": [{"files": [1]}]})", "[]", "{"}) {
    CAPTURE(manifest);
    test::WriteText(dir / "wds" / "packrec-export.json", manifest);
    const Result<SourceFormat> format = DetectSourceFormat((dir / "wds").string());
    REQUIRE_MESSAGE(format.ok(), format.status().ToString());
    CHECK(*format == SourceFormat::kWebDataset);
    CHECK(ImportedFrom((dir / "wds").string()) == std::vector<std::string>{"a.jpg 2"});
  }
}

// A synthetic tree (`classes` x `per_class` images at DIR/tree) converted into DIR/direct, which
// is returned opened, and written as MDS into DIR/mds, `per_shard` samples a shard.
std::unique_ptr<Reader> TreeAsMds(const fs::path& dir, std::uint32_t classes,
                                  std::uint32_t per_class, std::uint64_t per_shard,
                                  std::vector<MdsShard>* shards) {
  test::SynthTree(dir / "tree", classes, per_class);
  std::unique_ptr<Reader> direct = ConvertAndOpen(dir / "tree", dir / "direct");
  *shards = WriteMds(*direct, dir / "mds", per_shard);
  return direct;
}

TEST_CASE("MDS shards import record for record, read in order: the place in the files too") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 7);
  const std::vector<std::byte> big = test::MakeJpeg(2400, 1800, 11);
  REQUIRE(big.size() > SequentialFile::kWindowBytes);  // read past the window, not through it
  test::WriteBytes(fs::directory_iterator(dir / "tree")->path() / "big.jpg", big);
  const std::unique_ptr<Reader> expected = ConvertAndOpen(dir / "tree", dir / "direct");
  const std::vector<MdsShard> shards = WriteMds(*expected, dir / "mds", 8);
  REQUIRE(shards.size() == 3);
  ConvertOptions back;
  back.source = dir / "mds";
  back.output = dir / "back";
  Result<ConvertStats> imported = Convert(back);
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  Result<std::unique_ptr<Reader>> reader = OpenDataset(back.output);
  REQUIRE(reader.ok());
  CHECK((*reader)->info().source_kind == "mds");
  test::CheckSameRecords(**reader, *expected);
  Result<std::unique_ptr<RecordSource>> source =
      OpenRecordSource((dir / "mds").string(), SourceFormat::kMds, {});
  REQUIRE(source.ok());
  CHECK(CheckPlaceInFiles(**source, true) == expected->size());
}

// A data file gone since the source was listed (a dangling link here; no permission reads the
// same), or one that is no regular file (a FIFO, which must not be waited on), is left out as one
// reject naming it, as such a loose image is, and the files after it import: under --on-error
// skip a conversion goes on, under fail it stops naming it.
TEST_CASE("a container's data file that cannot be opened is one named reject; the rest imports") {
  test::TempDir dir;
  std::vector<MdsShard> shards;
  const std::unique_ptr<Reader> expected = TreeAsMds(dir.path(), 3, 6, 6, &shards);
  REQUIRE(shards.size() == 3);
  for (const std::string format : {"wds", "tfrecord", "recordio", "mds"}) {
    CAPTURE(format);
    const fs::path source_dir = dir / format;
    if (format != "mds") {
      ConvertOptions out;
      out.source = dir / "tree";
      out.output = source_dir;
      out.writer.format = format;
      out.writer.shard_size_bytes = 15000;  // several files
      REQUIRE(Convert(out).ok());
    }
    const Result<SourceFormat> kind = ParseSourceFormat(format);
    REQUIRE(kind.ok());
    Result<std::unique_ptr<RecordSource>> whole = OpenRecordSource(source_dir.string(), *kind, {});
    REQUIRE(whole.ok());
    const std::vector<fs::path> files = (*whole)->files();
    REQUIRE(files.size() >= 3);
    const fs::path gone = files[1];
    // What reading gives once `gone` cannot be opened: its records become one reject, here.
    std::vector<std::string> kept;
    std::size_t reject_at = 0;
    std::uint64_t gone_records = 0;
    SourceRecord record;
    while ((*whole)->Next(record).value()) {
      REQUIRE(record.status.ok());
      if (!record.origin.starts_with(gone.string() + " ")) {
        kept.push_back(record.key + " " + std::to_string(record.label));
      } else if (gone_records++ == 0) {
        reject_at = kept.size();
      }
    }
    REQUIRE(gone_records > 0);
    std::uint64_t bytes_left = 0;
    for (const fs::path& file : files) bytes_left += file == gone ? 0 : fs::file_size(file);
    for (const std::string way : {"dangling link", "fifo"}) {
      CAPTURE(way);
      fs::remove(gone);
      std::string why;
      if (way == "fifo") {
        REQUIRE(::mkfifo(gone.c_str(), 0644) == 0);
        why = "read " + gone.string() + ": not a regular file";
      } else {
        fs::create_symlink(dir / "nowhere", gone);
        why = "open " + gone.string() + ": No such file or directory";
      }
      std::vector<std::string> want = kept;
      want.insert(want.begin() + static_cast<std::ptrdiff_t>(reject_at),
                  "reject " + gone.string() + ": " + why +
                      (format == "mds" ? "" : "; the file is not read"));
      Result<std::unique_ptr<RecordSource>> source =
          OpenRecordSource(source_dir.string(), *kind, {});
      REQUIRE_MESSAGE(source.ok(), source.status().ToString());
      CHECK(Listed(**source) == want);
      CHECK((*source)->bytes_read() == bytes_left);

      ConvertOptions skip;
      skip.source = source_dir;
      skip.output = dir / (format + "-skip-" + way);
      skip.on_error = OnBadRecord::kSkip;
      const Result<ConvertStats> skipped = Convert(skip);
      REQUIRE_MESSAGE(skipped.ok(), skipped.status().ToString());
      CHECK(skipped->records_written == expected->size() - gone_records);
      REQUIRE(skipped->rejects.size() == 1);
      CHECK(skipped->rejects[0].path == gone.string());
      ConvertOptions fail = skip;
      fail.output = dir / (format + "-fail-" + way);
      fail.on_error = OnBadRecord::kFail;
      const Result<ConvertStats> failed = Convert(fail);
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.status().message().find(gone.string() + ": " + why) != std::string::npos);
      CHECK_FALSE(fs::exists(fail.output));
    }
  }
}

// A file that shrinks while it is read cannot be read on from the same place: RecordIO, like
// TFRecord, ends the file with one error naming it, rather than failing at the same byte for ever.
TEST_CASE("a RecordIO or TFRecord cut short while it is read ends with one named error") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 15);
  for (const std::string format : {"recordio", "tfrecord"}) {
    CAPTURE(format);
    const test::OneFileExport exported = test::ExportOneFile(dir / "tree", dir / format, format);
    REQUIRE(exported.offsets.size() == 30);
    // Past the first window, so the cut is met by a read of the file, not of the window.
    REQUIRE(exported.offsets.back() > SequentialFile::kWindowBytes);
    const SourceFormat kind =
        format == "recordio" ? SourceFormat::kRecordIo : SourceFormat::kTfRecord;
    Result<std::unique_ptr<RecordSource>> source =
        OpenRecordSource(exported.file.string(), kind, {});
    REQUIRE(source.ok());
    SourceRecord record;
    REQUIRE((*source)->Next(record).value());
    REQUIRE(record.status.ok());
    test::TruncateFile(exported.file, exported.offsets.back());
    const AfterCut after = ReadOnAfterCut(**source, exported.file);
    CHECK(after.calls < 100);
    CHECK(after.failed == 1);
    CHECK(after.good > 0);
    CHECK(after.good < 29);
  }
}

// MDS shards used to be mapped, so a shard cut short under the import raised SIGBUS. Read through
// a window, the cut is one error naming the shard, and the shard ends there.
TEST_CASE("an MDS shard cut short while it is read ends with one named error, not SIGBUS") {
  test::TempDir dir;
  std::vector<MdsShard> shards;
  const std::unique_ptr<Reader> expected = TreeAsMds(dir.path(), 2, 15, 100, &shards);
  REQUIRE(shards.size() == 1);
  const MdsShard& shard = shards[0];
  REQUIRE(shard.offsets.size() == 30);
  REQUIRE(shard.offsets[20] > SequentialFile::kWindowBytes);
  Result<std::unique_ptr<RecordSource>> source =
      OpenRecordSource((dir / "mds").string(), SourceFormat::kMds, {});
  REQUIRE(source.ok());
  SourceRecord record;
  REQUIRE((*source)->Next(record).value());
  REQUIRE(record.status.ok());
  // Whole pages of the samples after the cut lie past the new end: touched through a mapping,
  // they fault.
  test::TruncateFile(shard.file, shard.offsets[20]);
  const AfterCut after = ReadOnAfterCut(**source, shard.file);
  CHECK(after.calls < 100);
  CHECK(after.failed == 1);
  CHECK(after.good > 0);
  CHECK(after.good < 20);  // records 1 to 19 lie before the cut
}

}  // namespace
}  // namespace packrec
