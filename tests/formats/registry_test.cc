// The registry of formats: every format folder's descriptor, and what the layers above read from
// it instead of comparing names (part names, rejects paths, --resume and --part refusals).
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>

#include "packrec/convert.h"
#include "packrec/format.h"
#include "packrec/writer.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

TEST_CASE("registry: every format describes itself, packrec's own first") {
  const std::vector<FormatInfo>& formats = ListFormats();
  REQUIRE(formats.size() == 6);
  std::set<std::string> names;
  bool exports_started = false;
  for (const FormatInfo& format : formats) {
    CAPTURE(format.name);
    CHECK(names.insert(format.name).second);
    CHECK_FALSE(format.summary.empty());
    if (!format.readable) exports_started = true;
    CHECK(format.readable != exports_started);  // readable formats come first
    // What merge reads back has a part suffix; only readable formats resume.
    CHECK(format.readable == !format.suffixes.empty());
    if (format.resumable) CHECK(format.readable);
  }
  CHECK(formats.front().name == "shard");
  CHECK(WritableFormats().size() == formats.size());
  CHECK(JoinFormatNames(&FormatInfo::resumable) == "shard, lmdb and hdf5");
  CHECK(JoinFormatNames(&FormatInfo::single_file) == "hdf5");
}

TEST_CASE("registry: lookups, part names and rejects paths come from the descriptors") {
  REQUIRE(FindFormat("lmdb").ok());
  CHECK(FindFormat("lmdb")->suffixes.front() == ".lmdb");
  const Result<FormatInfo> unknown = FindFormat("parquet");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == StatusCode::kInvalidArgument);
  CHECK(unknown.status().message().find("shard, lmdb, hdf5, wds, tfrecord, recordio") !=
        std::string::npos);
  CHECK(PartName(3, 16, "shard") == "part-00003-of-00016.pkr");
  CHECK(PartName(0, 2, "lmdb") == "part-00000-of-00002.lmdb");
  CHECK(PartName(1, 2, "hdf5") == "part-00001-of-00002.h5");
  CHECK(RejectsFilePath("out/data.h5", "hdf5") == fs::path("out/data.h5.rejects.tsv"));
  CHECK(RejectsFilePath("out/data", "shard") == fs::path("out/data/rejects.tsv"));
}

TEST_CASE("registry: an empty format is the default, and an export takes no --part or --resume") {
  const fs::path dir = fs::temp_directory_path() / "packrec-registry-test";
  fs::remove_all(dir);
  fs::create_directories(dir / "tree");
  ConvertOptions options;
  options.source = dir / "tree";
  options.output = dir / "out";
  options.writer.format = "wds";
  options.part_index = 0;
  options.part_count = 2;
  Result<ConvertStats> part = Convert(options);
  REQUIRE_FALSE(part.ok());
  CHECK(part.status().code() == StatusCode::kInvalidArgument);
  CHECK(part.status().message().find("--part") != std::string::npos);
  options.part_count = 0;
  options.resume = true;
  Result<ConvertStats> resume = Convert(options);
  REQUIRE_FALSE(resume.ok());
  CHECK(resume.status().message().find("shard, lmdb and hdf5") != std::string::npos);
  options.writer.format = "no-such-format";
  options.resume = false;
  CHECK(Convert(options).status().code() == StatusCode::kInvalidArgument);
  // WriterOptions' default: the registry's first format.
  CHECK(WriterOptions{}.format.empty());
  auto writer = CreateDatasetWriter(dir / "default", WriterOptions{});
  REQUIRE(writer.ok());
  const std::byte payload[4] = {};
  REQUIRE((*writer)->Add({"k", 1, payload, {}}).ok());
  REQUIRE((*writer)->Finish({}).ok());
  CHECK(fs::exists(dir / "default" / "manifest.json"));
  fs::remove_all(dir);
}

TEST_CASE("registry: the output's name says the format, and one that contradicts it is refused") {
  // Asked for nothing: the suffix of packrec's own formats, any case, else the default.
  for (const auto& [output, format] :
       std::vector<std::pair<std::string, std::string>>{{"data.h5", "hdf5"},
                                                        {"dir/DATA.HDF5", "hdf5"},
                                                        {"data.lmdb", "lmdb"},
                                                        {"data.lmdb/", "lmdb"},
                                                        {"data.pkr", "shard"},
                                                        {"plain", "shard"},
                                                        {"v1.2", "shard"},
                                                        {".h5", "shard"}}) {
    CAPTURE(output);
    const Result<std::string> chosen = ChooseOutputFormat(output, "");
    REQUIRE_MESSAGE(chosen.ok(), chosen.status().ToString());
    CHECK(*chosen == format);
  }
  // Asked for one: kept when the name agrees or says nothing.
  CHECK(ChooseOutputFormat("data.lmdb", "lmdb").value() == "lmdb");
  CHECK(ChooseOutputFormat("out", "hdf5").value() == "hdf5");
  CHECK(ChooseOutputFormat("out.tar", "wds").value() == "wds");
  CHECK(ChooseOutputFormat("export.tfrecord", "tfrecord").value() == "tfrecord");
  // Refused: another format's suffix, or one file of an export, naming both sides.
  for (const auto& [output, format] :
       std::vector<std::pair<std::string, std::string>>{{"data.h5", "lmdb"},
                                                        {"data.pkr", "hdf5"},
                                                        {"data.lmdb", "wds"},
                                                        {"out.tar", ""},
                                                        {"out.tar.gz", "shard"},
                                                        {"train.tfrecord", ""},
                                                        {"train.rec", "lmdb"}}) {
    CAPTURE(output);
    CAPTURE(format);
    const Result<std::string> chosen = ChooseOutputFormat(output, format);
    REQUIRE_FALSE(chosen.ok());
    CHECK(chosen.status().code() == StatusCode::kInvalidArgument);
    CHECK(chosen.status().message().find(output) != std::string::npos);
  }
  CHECK_FALSE(ChooseOutputFormat("out", "no-such-format").ok());
  // The writer API infers the same: an HDF5 file where the name says so.
  const fs::path dir = fs::temp_directory_path() / "packrec-registry-suffix-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto writer = CreateDatasetWriter(dir / "inferred.h5", WriterOptions{});
  REQUIRE(writer.ok());
  const std::byte payload[4] = {};
  REQUIRE((*writer)->Add({"k", 1, payload, {}}).ok());
  REQUIRE((*writer)->Finish({}).ok());
  CHECK(fs::is_regular_file(dir / "inferred.h5"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace packrec
