#include <doctest/doctest.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "formats/shard_test_util.h"
#include "packrec/convert.h"
#include "packrec/dataset_ops.h"
#include "packrec/decode.h"
#include "packrec/image.h"
#include "packrec/synth.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::SynthTree;

ConvertOptions Options(const fs::path& source, const fs::path& output) {
  ConvertOptions options;
  options.source = source;
  options.output = output;
  options.threads = 2;
  return options;
}

TEST_CASE("a progress callback that returns an error stops the conversion and leaves nothing") {
  test::TempDir dir;
  SynthTree(dir / "tree", 2, 20, 3);
  int calls = 0;
  auto stats = Convert(Options(dir / "tree", dir / "ds"), [&](const ConvertProgress& p) {
    ++calls;
    CHECK(p.records_done == 1);  // the first call comes after the first record
    return Status::Internal("interrupted by the caller");
  });
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().message() == "interrupted by the caller");
  CHECK(calls == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "ds"));
}

TEST_CASE("2,000-image synth tree: convert, verify deep, extract byte-identical") {
  test::TempDir dir;
  SynthTree(dir / "tree", 10, 200, 7);
  ConvertOptions options = Options(dir / "tree", dir / "ds");
  options.writer.shard_size_bytes = 16 << 20;  // several shards
  std::uint64_t last_progress = 0;
  auto stats = Convert(options, [&](const ConvertProgress& p) {
    CHECK(p.records_done >= last_progress);
    last_progress = p.records_done;
    return Status::OK();
  });
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  CHECK(stats->records_written == 2000);
  CHECK(stats->rejects.empty());
  CHECK(last_progress == 2000);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  CHECK((*reader)->info().files.size() > 1);
  CHECK((*reader)->info().classes.size() == 10);
  test::CollectingReporter reporter;
  const VerifyStats verified = VerifyDataset(**reader, {/*deep=*/true}, reporter);
  CHECK(verified.problems == 0);
  auto extracted = ExtractDataset(**reader, dir / "restored");
  REQUIRE(extracted.ok());
  CHECK(extracted->files_written == 2000);
  const auto original = test::SnapshotTree(dir / "tree");
  const auto restored = test::SnapshotTree(dir / "restored");
  CHECK(original.size() == 2000);
  CHECK(original == restored);
}

TEST_CASE("convert output does not depend on the thread count and a seed shuffles reproducibly") {
  test::TempDir dir;
  SynthTree(dir / "tree", 3, 30, 2, 96);
  auto one = Options(dir / "tree", dir / "one");
  one.threads = 1;
  auto four = Options(dir / "tree", dir / "four");
  four.threads = 4;
  REQUIRE(Convert(one).ok());
  REQUIRE(Convert(four).ok());
  CHECK(test::SnapshotTree(dir / "one") == test::SnapshotTree(dir / "four"));

  auto shuffled_a = Options(dir / "tree", dir / "sa");
  shuffled_a.shuffle_seed = 9;
  auto shuffled_b = Options(dir / "tree", dir / "sb");
  shuffled_b.shuffle_seed = 9;
  shuffled_b.threads = 3;
  REQUIRE(Convert(shuffled_a).ok());
  REQUIRE(Convert(shuffled_b).ok());
  CHECK(test::SnapshotTree(dir / "sa") == test::SnapshotTree(dir / "sb"));
  auto sorted = OpenDataset(dir / "one");
  auto shuffled = OpenDataset(dir / "sa");
  REQUIRE(sorted.ok());
  REQUIRE(shuffled.ok());
  std::vector<std::string> sorted_keys, shuffled_keys;
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < 90; ++i) {
    sorted_keys.emplace_back((*sorted)->Read(i, scratch)->key);
    shuffled_keys.emplace_back((*shuffled)->Read(i, scratch)->key);
  }
  CHECK(sorted_keys != shuffled_keys);
  CHECK(std::is_sorted(sorted_keys.begin(), sorted_keys.end()));
  std::sort(shuffled_keys.begin(), shuffled_keys.end());
  CHECK(sorted_keys == shuffled_keys);
  // The listing hash identifies the input, not the order it was stored in.
  CHECK((*sorted)->info().listing_hash == (*shuffled)->info().listing_hash);
}

TEST_CASE("bad inputs: fail names the file and leaves nothing while skip writes rejects.tsv") {
  test::TempDir dir;
  SynthTree(dir / "tree", 2, 5, 3, 64);
  test::WriteText(dir / "tree" / "n01440764" / "notes.jpg", "this is text, not a JPEG");
  auto truncated = test::MakeJpeg(200, 200, 1);
  truncated.resize(truncated.size() / 3);
  test::WriteBytes(dir / "tree" / "n01441881" / "cut.jpeg", truncated);

  auto failing = Convert(Options(dir / "tree", dir / "fail"));
  REQUIRE_FALSE(failing.ok());
  CHECK(failing.status().code() == StatusCode::kInvalidInput);
  CHECK(failing.status().message().find("notes.jpg") != std::string::npos);
  CHECK(failing.status().message().find("not a JPEG, PNG or WebP") != std::string::npos);
  CHECK(failing.status().remedy() == Remedy::kSkipBadInput);
  CHECK_FALSE(fs::exists(dir / "fail"));

  auto options = Options(dir / "tree", dir / "skip");
  options.on_error = OnBadRecord::kSkip;
  auto skipping = Convert(options);
  REQUIRE_MESSAGE(skipping.ok(), skipping.status().ToString());
  CHECK(skipping->records_written == 10);
  REQUIRE(skipping->rejects.size() == 2);
  const auto report = test::ReadBytes(dir / "skip" / "rejects.tsv");
  const std::string text(reinterpret_cast<const char*>(report.data()), report.size());
  CHECK(text.find("notes.jpg\tnot a JPEG, PNG or WebP") != std::string::npos);
  CHECK(text.find("cut.jpeg\ttruncated JPEG") != std::string::npos);
  auto reader = OpenDataset(dir / "skip");
  REQUIRE(reader.ok());
  CHECK((*reader)->size() == 10);
  CHECK((*reader)->info().rejected_count == 2);
}

TEST_CASE("convert errors: missing input, no images, output exists, bad options") {
  test::TempDir dir;
  auto missing = Convert(Options(dir / "nowhere", dir / "out"));
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("nowhere") != std::string::npos);

  fs::create_directories(dir / "empty" / "class");
  auto empty = Convert(Options(dir / "empty", dir / "out"));
  CHECK(empty.status().code() == StatusCode::kNotFound);
  CHECK(empty.status().message().find("no images found") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));

  SynthTree(dir / "tree", 1, 3, 4, 64);
  REQUIRE(Convert(Options(dir / "tree", dir / "out")).ok());
  auto exists = Convert(Options(dir / "tree", dir / "out"));
  CHECK(exists.status().code() == StatusCode::kAlreadyExists);
  CHECK(exists.status().remedy() == Remedy::kOverwriteToReplace);
  const auto before = test::SnapshotTree(dir / "out");
  // A replacement that fails leaves the old dataset as it was.
  test::WriteText(dir / "tree" / "n01440764" / "zz-broken.jpg", "not an image");
  auto overwrite = Options(dir / "tree", dir / "out");
  overwrite.writer.overwrite = true;
  overwrite.shuffle_seed = 1;
  CHECK(Convert(overwrite).status().code() == StatusCode::kInvalidInput);
  CHECK(test::SnapshotTree(dir / "out") == before);
  fs::remove(dir / "tree" / "n01440764" / "zz-broken.jpg");
  CHECK(Convert(overwrite).ok());
  CHECK(test::SnapshotTree(dir / "out") != before);
  CHECK(OpenDataset(dir / "out").ok());

  auto bad = Options(dir / "tree", dir / "bad");
  bad.quality = 101;
  CHECK(Convert(bad).status().message().find("--quality") != std::string::npos);
  bad = Options(dir / "tree", dir / "bad");
  bad.writer.shard.align_bytes = 3;
  CHECK(Convert(bad).status().message().find("--align") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("list-file input and transcoding at convert time") {
  test::TempDir dir;
  SynthTree(dir / "images", 2, 4, 5, 300);
  test::WriteText(dir / "train.txt",
                  "n01440764/n01440764_0.JPEG 3\nn01441881/n01441881_1.JPEG 1\n");
  auto options = Options(dir / "train.txt", dir / "ds");
  options.list_root = dir / "images";
  options.resize_short = 100;
  options.quality = 80;
  auto stats = Convert(options);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  CHECK((*reader)->info().source_kind == "caffe-list");
  CHECK((*reader)->info().label_count == 4);
  ReadScratch scratch;
  auto first = (*reader)->Read(0, scratch);
  REQUIRE(first.ok());
  CHECK(first->label == 3);
  CHECK(std::min(first->width, first->height) == 100);
  auto probed = ProbeImage(first->bytes);
  REQUIRE(probed.ok());
  CHECK(probed->width == first->width);
  test::CollectingReporter reporter;
  CHECK(VerifyDataset(**reader, {true}, reporter).problems == 0);
}

TEST_CASE("inputs that hold nothing to convert say why and what to do instead") {
  test::TempDir dir;
  SynthTree(dir / "images", 2, 3, 6, 64);
  test::WriteText(dir / "train.txt",
                  "n01440764/n01440764_0.JPEG 0\nn01441881/n01441881_1.JPEG 1\n");
  // A list without --root: its paths are looked for beside the list, where none is. The message
  // names the root that was used and the flag, not --on-error skip (which would reject them all).
  const auto no_root = Convert(Options(dir / "train.txt", dir / "out"));
  CHECK(no_root.status().code() == StatusCode::kInvalidArgument);
  const std::string message = no_root.status().message();
  CHECK(message.find("none of its first 2 paths exists under") != std::string::npos);
  CHECK(message.find("--root") != std::string::npos);
  CHECK(message.find("n01440764/n01440764_0.JPEG") != std::string::npos);
  CHECK(no_root.status().remedy() == Remedy::kNone);
  CHECK_FALSE(fs::exists(dir / "out"));

  // A flat folder: the images are there, the class folders are not.
  fs::create_directories(dir / "flat");
  for (const auto& entry : fs::recursive_directory_iterator(dir / "images")) {
    if (entry.is_regular_file())
      fs::copy_file(entry.path(), dir / "flat" / entry.path().filename());
  }
  const auto flat = Convert(Options(dir / "flat", dir / "out"));
  CHECK(flat.status().code() == StatusCode::kNotFound);
  CHECK(flat.status().message().find("holds 6 images directly and no sub-folders") !=
        std::string::npos);
  CHECK(flat.status().message().find("/<class>/<image>") != std::string::npos);

  // Class folders with no file named as an image list the names that count.
  fs::create_directories(dir / "texts" / "a");
  test::WriteText(dir / "texts" / "a" / "notes.txt", "no image");
  const auto texts = Convert(Options(dir / "texts", dir / "out"));
  CHECK(texts.status().message().find(".jpg .jpeg .png") != std::string::npos);

  // COCO annotations that refuse every image: the first refusal, not "no images found".
  test::WriteText(dir / "bad.json",
                  R"({"images": [{"id": 1, "file_name": "n01440764/n01440764_0.JPEG"}],
                      "annotations": [{"id": 9, "image_id": 1, "category_id": 1}]})");
  auto coco = Options(dir / "images", dir / "out");
  coco.annotations = dir / "bad.json";
  const auto refused = Convert(coco);
  CHECK(refused.status().code() == StatusCode::kInvalidInput);
  CHECK(refused.status().message().find("no image of") != std::string::npos);
  CHECK(refused.status().message().find("n01440764_0.JPEG") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("extract creates nothing outside OUT through a planted link, deep keys included") {
  test::TempDir dir;
  fs::create_directories(dir / "elsewhere");
  for (const std::string key : {"sub/x.jpg", "sub/a/b/x.jpg"}) {
    CAPTURE(key);
    const fs::path dataset = dir / ("ds" + std::to_string(key.size()));
    const fs::path out = dir / ("out" + std::to_string(key.size()));
    test::WriteDataset(dataset, {{key, 0, test::MakeJpeg(8, 8, 3)}});
    fs::create_directories(out);
    fs::create_directory_symlink(dir / "elsewhere", out / "sub");
    auto reader = OpenDataset(dataset);
    REQUIRE(reader.ok());
    auto extracted = ExtractDataset(**reader, out);
    CHECK(extracted.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(extracted.status().message().find("symbolic link") != std::string::npos,
                  extracted.status().ToString());
    // Not even the directories a/b were made through the link.
    CHECK(fs::is_empty(dir / "elsewhere"));
  }
  // A file that is a symbolic link is replaced with --overwrite, its target untouched.
  test::WriteText(dir / "victim", "untouched");
  test::WriteDataset(dir / "flat", {{"x.jpg", 0, test::MakeJpeg(8, 8, 4)}});
  fs::create_directories(dir / "out2");
  fs::create_symlink(dir / "victim", dir / "out2" / "x.jpg");
  auto flat = OpenDataset(dir / "flat");
  REQUIRE(flat.ok());
  CHECK(ExtractDataset(**flat, dir / "out2").status().code() == StatusCode::kAlreadyExists);
  REQUIRE(ExtractDataset(**flat, dir / "out2", /*overwrite=*/true).ok());
  CHECK_FALSE(fs::is_symlink(dir / "out2" / "x.jpg"));
  CHECK(test::ReadBytes(dir / "out2" / "x.jpg") == test::MakeJpeg(8, 8, 4));
  CHECK(test::ReadBytes(dir / "victim").size() == std::string("untouched").size());
}

TEST_CASE("extract --overwrite replaces a hard-linked file, never writing through the link") {
  test::TempDir dir;
  test::WriteDataset(dir / "ds", {{"a/x.jpg", 0, test::MakeJpeg(8, 8, 5)}});
  test::WriteText(dir / "victim", "untouched");
  fs::create_directories(dir / "out" / "a");
  fs::create_hard_link(dir / "victim", dir / "out" / "a" / "x.jpg");
  const test::CommandResult cli = test::RunCli("extract --overwrite " + test::Quote(dir / "ds") +
                                               " " + test::Quote(dir / "out"));
  REQUIRE_MESSAGE(cli.exit_code == 0, cli.output);
  CHECK(test::ReadBytes(dir / "out" / "a" / "x.jpg") == test::MakeJpeg(8, 8, 5));
  CHECK(test::ReadBytes(dir / "victim").size() == std::string("untouched").size());
  CHECK(fs::hard_link_count(dir / "victim") == 1);
}

// A directory of OUT swapped for a symbolic link to elsewhere while extract writes (what another
// process with write access to OUT can do): every file lands inside OUT or the run stops, refusing.
TEST_CASE("extract writes nothing outside OUT while a directory is swapped for a link") {
  test::TempDir dir;
  std::vector<test::TestRecord> records;
  for (std::uint32_t i = 0; i < 400; ++i) {
    records.push_back({"d" + std::to_string(i % 2) + "/f" + std::to_string(i) + ".jpg", 0,
                       test::MakeJpeg(8, 8, i)});
  }
  test::WriteDataset(dir / "ds", records);
  auto reader = OpenDataset(dir / "ds");
  REQUIRE(reader.ok());
  fs::create_directories(dir / "elsewhere");
  int refused = 0;
  for (int round = 0; round < 20; ++round) {
    const fs::path out = dir / ("out" + std::to_string(round));
    fs::create_directories(out / "d1");
    std::atomic<bool> done{false};
    std::thread swapper([&] {
      std::error_code ignored;
      while (!done.load()) {
        fs::rename(out / "d1", out / "d1.real", ignored);
        fs::create_directory_symlink(dir / "elsewhere", out / "d1", ignored);
        std::this_thread::yield();
        fs::remove(out / "d1", ignored);
        fs::rename(out / "d1.real", out / "d1", ignored);
      }
    });
    const Result<ExtractStats> extracted = ExtractDataset(**reader, out);
    done = true;
    swapper.join();
    if (!extracted.ok()) {
      ++refused;
      CHECK_MESSAGE(extracted.status().code() != StatusCode::kOk, "");
    }
    CHECK(fs::is_empty(dir / "elsewhere"));
  }
  MESSAGE("swap rounds refused: " << refused << " of 20; files written outside OUT: 0");
}

TEST_CASE("extract refuses escaping keys, control characters and collisions; reports case ones") {
  test::TempDir dir;
  test::WriteText(dir / "canary", "untouched");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"../escape.jpg", "escape"},
      {"/etc/evil.jpg", "escape"},
      {"a/../../b.jpg", "escape"},
      {"a//b.jpg", "escape"},
      {"new\nline.jpg", "control character"},
      {"tab\there.jpg", "control character"},
      {std::string("nul\0byte.jpg", 12), "escape"},
      {"../canary", "escape"},
      {"fine/ok.jpg", "collision"},  // the same key as record 0
  };
  for (const auto& [key, why] : refused) {
    CAPTURE(key);
    const fs::path ds = dir / ("ds" + std::to_string(std::hash<std::string>{}(key)));
    test::WriteDataset(
        ds, {{"fine/ok.jpg", 0, test::MakeJpeg(8, 8, 1)}, {key, 0, test::MakeJpeg(8, 8, 2)}});
    auto reader = OpenDataset(ds);
    REQUIRE(reader.ok());
    auto extracted = ExtractDataset(**reader, ds.string() + "-out");
    REQUIRE_FALSE(extracted.ok());
    CHECK(extracted.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(extracted.status().message().find(why) != std::string::npos,
                  extracted.status().ToString());
    CHECK(extracted.status().message().find("record 1") != std::string::npos);
    // The message cannot be forged into two lines by the key.
    CHECK(extracted.status().message().find('\n') == std::string::npos);
    CHECK_FALSE(fs::exists(ds.string() + "-out"));  // the folder it made is gone again
  }
  CHECK(test::ReadBytes(dir / "canary").size() == std::string("untouched").size());
  CHECK_FALSE(fs::exists(dir / "escape.jpg"));
  // Keys that differ only in case are two files here, and reported.
  test::WriteDataset(dir / "cased", {{"a/Cat.jpg", 0, test::MakeJpeg(8, 8, 4)},
                                     {"a/cat.jpg", 1, test::MakeJpeg(8, 8, 5)}});
  auto reader = OpenDataset(dir / "cased");
  REQUIRE(reader.ok());
  auto extracted = ExtractDataset(**reader, dir / "cased-out");
  REQUIRE(extracted.ok());
  CHECK(extracted->files_written == 2);
  REQUIRE(extracted->case_collisions.size() == 1);
  CHECK(extracted->case_collisions[0].find("records 0 and 1") != std::string::npos);
  const test::CommandResult cli =
      test::RunCli("extract " + test::Quote(dir / "cased") + " " + test::Quote(dir / "cased-cli"));
  CHECK(cli.exit_code == 0);
  CHECK_MESSAGE(cli.output.find("differ only in case") != std::string::npos, cli.output);
}

// A PNG declaring 16384 x 16384 (783 KB when real) passed the old limit (2^28, the ceiling) and
// took 8-19 s and 0.8-1.6 GB to decode. The default limit is PIL's bomb threshold; it is refused
// from its header by the probe, every decoder and the loader's path, and the limit is settable.
TEST_CASE("an image over the pixel limit is refused from its header; the limit is settable") {
  std::vector<std::byte> png = test::MakePng(16, 16, 3);
  // IHDR's width and height (bytes 16-23), then its CRC over type and data (bytes 12-28).
  const auto store_be = [&](std::size_t at, std::uint32_t value) {
    for (int k = 0; k < 4; ++k) png[at + k] = static_cast<std::byte>(value >> (24 - 8 * k));
  };
  store_be(16, 16384);
  store_be(20, 16384);
  store_be(29, static_cast<std::uint32_t>(
                   crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17)));
  REQUIRE(MaxImagePixels() == kDefaultMaxImagePixels);
  const auto start = std::chrono::steady_clock::now();
  const Result<ImageInfo> probed = ProbeImage(png);
  REQUIRE_FALSE(probed.ok());
  CHECK(probed.status().message().find("16384x16384") != std::string::npos);
  CHECK(probed.status().message().find("over the limit of 178956970") != std::string::npos);
  CHECK_FALSE(CheckDecodes(png).ok());
  DecodeRequest request;
  request.out_width = request.out_height = 32;
  std::vector<std::uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  CHECK_FALSE(DecodeInto(png, request, out, scratch).ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  // Raised to the ceiling, the header passes (the bytes then fail to decode: there are none).
  REQUIRE(SetMaxImagePixels(kMaxImagePixels).ok());
  CHECK(ProbeImage(png).ok());
  CHECK(SetMaxImagePixels(0).code() == StatusCode::kInvalidArgument);
  CHECK(SetMaxImagePixels(kMaxImagePixels + 1).code() == StatusCode::kInvalidArgument);
  REQUIRE(SetMaxImagePixels(kDefaultMaxImagePixels).ok());
  // The CLI's --max-pixels: every 64 x 56 image of a tree is over 1000 pixels.
  test::TempDir dir;
  SynthTree(dir / "tree", 1, 2, 1, 64);
  const test::CommandResult small = test::RunCli(
      "convert -q --max-pixels 1000 " + test::Quote(dir / "tree") + " " + test::Quote(dir / "out"));
  CHECK(small.exit_code == 3);
  CHECK_MESSAGE(small.output.find("over the limit of 1000") != std::string::npos, small.output);
  CHECK_FALSE(fs::exists(dir / "out"));
  CHECK(test::RunCli("convert -q --max-pixels 0 " + test::Quote(dir / "tree") + " " +
                     test::Quote(dir / "out"))
            .exit_code == 2);
}

TEST_CASE("a decompression bomb in the input tree is rejected at convert time, named") {
  test::TempDir dir;
  SynthTree(dir / "tree", 1, 3, 1, 64);
  // A small JPEG whose frame header declares 65,500 x 65,500.
  std::vector<std::byte> bomb = test::MakeJpeg(40, 30, 2);
  for (std::size_t i = 2; i + 9 < bomb.size(); ++i) {
    if (bomb[i] == std::byte{0xFF} && bomb[i + 1] == std::byte{0xC0}) {
      for (int k = 5; k <= 8; ++k) bomb[i + k] = std::byte(k % 2 == 1 ? 0xFF : 0xDC);
      break;
    }
  }
  const fs::path class_dir = *fs::directory_iterator(dir / "tree");
  {
    std::ofstream out(class_dir / "bomb.jpg", std::ios::binary);
    out.write(reinterpret_cast<const char*>(bomb.data()),
              static_cast<std::streamsize>(bomb.size()));
  }
  auto failed = Convert(Options(dir / "tree", dir / "strict"));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("bomb.jpg") != std::string::npos);
  CHECK(failed.status().message().find("65500x65500") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "strict"));
  ConvertOptions skip = Options(dir / "tree", dir / "skip");
  skip.on_error = OnBadRecord::kSkip;
  auto stats = Convert(skip);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  CHECK(stats->records_written == 3);
  REQUIRE(stats->rejects.size() == 1);
  CHECK(stats->rejects[0].reason.find("decompression bomb") != std::string::npos);
}

}  // namespace
}  // namespace packrec
