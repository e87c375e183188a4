// The packrec binary as users run it: output, exit codes (docs/cli.md) and error messages.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "../formats/shard_test_util.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;
using test::Quote;
using test::RunCli;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("cli: synth, convert, info, verify, extract end to end") {
  test::TempDir dir;
  auto synth = RunCli("synth " + Quote(dir / "tree") + " --classes 3 --per-class 10 --seed 4");
  REQUIRE_MESSAGE(synth.exit_code == 0, synth.output);
  CHECK(Contains(synth.output, "wrote 30 JPEGs"));

  auto convert = RunCli("convert " + Quote(dir / "tree") + " " + Quote(dir / "ds") +
                        " --shard-size 64KiB --threads 2 --compress zstd:3");
  REQUIRE_MESSAGE(convert.exit_code == 0, convert.output);
  CHECK(Contains(convert.output, "converted 30 images"));

  auto info = RunCli("info " + Quote(dir / "ds"));
  REQUIRE(info.exit_code == 0);
  CHECK(Contains(info.output, "records   30"));
  CHECK(Contains(info.output, "n01440764"));
  auto info_json = RunCli("info --json " + Quote(dir / "ds"));
  REQUIRE(info_json.exit_code == 0);
  CHECK(Contains(info_json.output, "\"records\": 30"));
  CHECK(Contains(info_json.output, "\"shard_size_bytes\": 65536"));

  auto verify = RunCli("verify --deep " + Quote(dir / "ds"));
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  CHECK(Contains(verify.output, "OK: checked 30 of 30 records"));

  auto extract = RunCli("extract " + Quote(dir / "ds") + " " + Quote(dir / "restored"));
  REQUIRE_MESSAGE(extract.exit_code == 0, extract.output);
  CHECK(test::SnapshotTree(dir / "tree") == test::SnapshotTree(dir / "restored"));
  auto again = RunCli("extract " + Quote(dir / "ds") + " " + Quote(dir / "restored"));
  CHECK(again.exit_code == 4);
  CHECK(Contains(again.output, "--overwrite"));
}

TEST_CASE("cli: the same commands work on an LMDB dataset") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 8").exit_code == 0);
  auto convert = RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "db") +
                        " --format lmdb --map-size 1MiB --commit-records 3");
  REQUIRE_MESSAGE(convert.exit_code == 0, convert.output);
  auto info = RunCli("info " + Quote(dir / "db"));
  CHECK(info.exit_code == 0);
  CHECK(Contains(info.output, "format    lmdb (version 2)"));
  CHECK(Contains(info.output, "records   16"));
  auto verify = RunCli("verify --deep " + Quote(dir / "db"));
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  REQUIRE(RunCli("extract " + Quote(dir / "db") + " " + Quote(dir / "out")).exit_code == 0);
  CHECK(test::SnapshotTree(dir / "tree") == test::SnapshotTree(dir / "out"));
  auto again =
      RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "db") + " --format lmdb");
  CHECK(again.exit_code == 4);
  CHECK(Contains(again.output, "--overwrite"));
}

TEST_CASE("cli: the same commands work on an HDF5 file, with rejects beside it") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 8").exit_code == 0);
  test::WriteText(dir / "tree" / "n01440764" / "broken.jpg", "not an image");
  auto convert = RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "data.h5") +
                        " --format hdf5 --on-error skip");
  REQUIRE_MESSAGE(convert.exit_code == 0, convert.output);
  CHECK(fs::exists(dir / "data.h5.rejects.tsv"));
  CHECK_FALSE(fs::exists(dir / "data.h5.tmp"));
  CHECK_FALSE(fs::exists(dir / "data.h5.payloads.tmp"));
  auto info = RunCli("info " + Quote(dir / "data.h5"));
  CHECK(info.exit_code == 0);
  CHECK(Contains(info.output, "format    hdf5 (version 2)"));
  CHECK(Contains(info.output, "records   16 (1 inputs rejected"));
  auto verify = RunCli("verify --deep " + Quote(dir / "data.h5"));
  CHECK_MESSAGE(verify.exit_code == 0, verify.output);
  REQUIRE(RunCli("extract " + Quote(dir / "data.h5") + " " + Quote(dir / "out")).exit_code == 0);
  fs::remove(dir / "tree" / "n01440764" / "broken.jpg");
  CHECK(test::SnapshotTree(dir / "tree") == test::SnapshotTree(dir / "out"));
  auto again =
      RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "data.h5") + " --format hdf5");
  CHECK(again.exit_code == 4);
  test::WriteText(dir / "notes.txt", "mine");
  auto not_ours = RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "notes.txt") +
                         " --format hdf5 --overwrite");
  CHECK(not_ours.exit_code == 4);
  CHECK(Contains(not_ours.output, "not an HDF5 file"));
}

// A key of raw bytes or with a newline (a dataset written through the API, or an older packrec)
// is printed escaped: it cannot forge a line or garble the terminal, and --json does not fail on
// bytes that are not UTF-8.
TEST_CASE("cli: verify prints a damaged record's binary key escaped, and --json still works") {
  test::TempDir dir;
  std::vector<test::TestRecord> records = test::MakeRecords(3);
  records[0].key = std::string("bad\nkey\xff\x01.jpg");
  test::WriteDataset(dir / "ds", records);
  test::FlipByte(dir / "ds" / "shard-000000.pkr", 64 + 300);  // inside record 0's payload
  auto verify = RunCli("verify " + Quote(dir / "ds"));
  CHECK(verify.exit_code == 5);
  CHECK_MESSAGE(Contains(verify.output, "(key 'bad\\x0akey\\xff\\x01.jpg')"), verify.output);
  CHECK_FALSE(Contains(verify.output, "bad\nkey"));
  auto json = RunCli("verify --json " + Quote(dir / "ds"));
  CHECK_MESSAGE(json.exit_code == 5, json.output);
  CHECK(Contains(json.output, "\"record_index\": 0"));
}

TEST_CASE("cli: verify exits 5 and names shard, record and key of a damaged record") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 3").exit_code == 0);
  REQUIRE(RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "ds")).exit_code == 0);
  test::FlipByte(dir / "ds" / "shard-000000.pkr", 64 + 500);  // inside record 0's payload
  auto verify = RunCli("verify " + Quote(dir / "ds"));
  CHECK(verify.exit_code == 5);
  CHECK(Contains(verify.output, "shard-000000.pkr: record 0 (key 'n01440764/n01440764_0.JPEG')"));
  CHECK(Contains(verify.output, "FAILED"));
  auto json = RunCli("verify --json " + Quote(dir / "ds"));
  CHECK(json.exit_code == 5);
  CHECK(Contains(json.output, "\"record_index\": 0"));
  CHECK(Contains(json.output, "\"byte_offset\": 64"));

  test::TruncateFile(dir / "ds" / "shard-000000.pkr", 1000);
  auto truncated = RunCli("info " + Quote(dir / "ds"));
  CHECK(truncated.exit_code == 5);
  CHECK(Contains(truncated.output, "truncated (expected"));
}

TEST_CASE("cli: documented exit codes for each kind of mistake, each naming what is wrong") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 1 --per-class 2").exit_code == 0);
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  test::WriteText(dir / "file.bin", std::string("\0\1\2", 3));
  fs::create_directories(dir / "no-images" / "cls");
  fs::create_directories(dir / "taken");
  test::WriteText(dir / "taken" / "thesis.tex", "mine");
  const std::vector<Case> cases = {
      {"convert " + Quote(dir / "missing") + " " + Quote(dir / "o1"), 3, "does not exist"},
      {"convert " + Quote(dir / "file.bin") + " " + Quote(dir / "o2"), 3, "not a directory"},
      {"convert " + Quote(dir / "no-images") + " " + Quote(dir / "o3"), 3, "no images found"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "taken"), 4, "not a packrec dataset"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o4") + " --align 48", 2, "--align"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o5") + " --shard-size 12", 2,
       "--shard-size"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o6") + " --compress lz4", 2,
       "--compress"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o7") + " --threads -1", 2,
       "--threads"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o8") + " --format parquet", 2,
       "--format"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o9") + " --on-error ignore", 2,
       "--on-error"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "o10") + " --bogus", 2, "--bogus"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "tree" / "o11"), 2, "lies inside SRC"},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "file.bin" / "o12"), 6,
       "Not a directory"},
      {"info " + Quote(dir / "missing"), 3, "no such dataset"},
      {"info " + Quote(dir / "tree"), 3, "not a packrec dataset"},
      {"frobnicate", 2, "frobnicate"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const auto result = RunCli(c.args);
    CHECK_MESSAGE(result.exit_code == c.exit_code, result.output);
    CHECK_MESSAGE(Contains(result.output, c.message), result.output);
  }
  CHECK(fs::exists(dir / "taken" / "thesis.tex"));
  for (int i = 1; i <= 10; ++i) CHECK_FALSE(fs::exists(dir / ("o" + std::to_string(i))));
  CHECK_FALSE(fs::exists(dir / "tree" / "o11"));
}

TEST_CASE("cli: every valued flag refuses bad values by name, exit 2, and creates nothing") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") +
                 " --classes 1 --per-class 2 --width 32 --height "
                 "32")
              .exit_code == 0);
  REQUIRE(RunCli("convert " + Quote(dir / "tree") + " " + Quote(dir / "ds") + " -q").exit_code ==
          0);
  struct Command {
    std::string prefix;  // the command up to its flags; its output path is dir / "out"
    std::vector<std::string> flags;
    std::vector<std::string> float_flags;  // 2^64 is a valid (huge) float
  };
  const std::vector<Command> commands = {
      {"synth " + Quote(dir / "out"),
       {"--classes", "--per-class", "--seed", "--width", "--height"},
       {}},
      {"convert " + Quote(dir / "tree") + " " + Quote(dir / "out"),
       {"--format", "--shard-size", "--align", "--compress", "--map-size", "--lmdb-values",
        "--hdf5-layout", "--size", "--commit-records", "--threads", "--seed", "--on-error",
        "--list-format", "--resize-short", "--quality", "--part", "--from", "--caffe-raw",
        "--checkpoint-every"},
       {}},
      {"bench " + Quote(dir / "ds") + " --scratch " + Quote(dir / "out"),
       {"--readers", "--queue-depth", "--threads", "--batch", "--prefetch", "--size",
        "--max-records", "--probe-size", "--device"},
       {"--consumer-rate", "--seconds"}},
  };
  const std::vector<std::string> bad = {"-1", "''", "abc", "18446744073709551616", "1.5x"};
  int tried = 0;
  for (const Command& command : commands) {
    std::vector<std::pair<std::string, bool>> all;
    for (const std::string& flag : command.flags) all.emplace_back(flag, false);
    for (const std::string& flag : command.float_flags) all.emplace_back(flag, true);
    for (const auto& [flag, is_float] : all) {
      for (const std::string& value : bad) {
        if (is_float && value == "18446744073709551616") continue;
        const std::string args = command.prefix + " " + flag + " " + value;
        CAPTURE(args);
        const auto result = RunCli(args);
        CHECK_MESSAGE(result.exit_code == 2, result.output);
        CHECK_MESSAGE(Contains(result.output, flag), result.output);
        CHECK_FALSE(fs::exists(dir / "out"));
        ++tried;
      }
    }
  }
  CHECK(tried > 100);
}

TEST_CASE("cli: --help explains every subcommand and the exit codes") {
  const auto help = RunCli("--help");
  CHECK(help.exit_code == 0);
  for (const char* word : {"synth", "convert", "info", "verify", "extract", "Exit codes"}) {
    CHECK(Contains(help.output, word));
  }
  const auto convert_help = RunCli("convert --help");
  CHECK(convert_help.exit_code == 0);
  for (const char* flag :
       {"--shard-size", "--align", "--compress", "--threads", "--seed", "--on-error",
        "--resize-short", "--quality", "--overwrite", "--resume", "--checkpoint-every"}) {
    CHECK(Contains(convert_help.output, flag));
  }
}

TEST_CASE("cli: convert takes the format from OUT's name, refuses a name that says another, -q") {
  test::TempDir dir;
  REQUIRE(
      RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 3 --seed 7").exit_code ==
      0);
  const std::string tree = Quote(dir / "tree") + " ";
  // -q: nothing on stdout when all went well.
  const auto h5 = RunCli("convert -q " + tree + Quote(dir / "data.h5"));
  REQUIRE_MESSAGE(h5.exit_code == 0, h5.output);
  CHECK_MESSAGE(h5.output.empty(), h5.output);
  CHECK(fs::is_regular_file(dir / "data.h5"));  // one HDF5 file, not a shard directory
  CHECK(Contains(RunCli("info " + Quote(dir / "data.h5")).output, "format    hdf5"));
  REQUIRE(RunCli("convert -q " + tree + Quote(dir / "data.LMDB")).exit_code == 0);
  CHECK(Contains(RunCli("info " + Quote(dir / "data.LMDB")).output, "format    lmdb"));
  // A name that says another format, or one file of an export: exit 2, nothing written.
  for (const std::string& args :
       {Quote(dir / "x.h5") + " --format lmdb", Quote(dir / "y.pkr") + " --format hdf5",
        Quote(dir / "z.tar"), Quote(dir / "w.tfrecord") + " --format shard"}) {
    CAPTURE(args);
    const auto refused = RunCli("convert " + tree + args);
    CHECK(refused.exit_code == 2);
    CHECK(Contains(refused.output, "is named like"));
  }
  for (const char* name : {"x.h5", "y.pkr", "z.tar", "w.tfrecord"})
    CHECK_FALSE(fs::exists(dir / name));
  // --json is JSON also when there is nothing to do.
  const std::string shard = tree + Quote(dir / "s.pkr");
  REQUIRE(RunCli("convert -q --resume " + shard).exit_code == 0);
  const auto again = RunCli("convert --json --resume " + shard);
  REQUIRE(again.exit_code == 0);
  const nlohmann::json summary = nlohmann::json::parse(again.output);
  CHECK(summary["already_complete"] == true);
  CHECK(summary["format"] == "shard");
  CHECK(summary["records"] == 6);
}

TEST_CASE("cli: a misspelt command or flag gets a suggestion; convert X X says they are the same") {
  test::TempDir dir;
  const auto command = RunCli("convrt a b");
  CHECK(command.exit_code == 2);
  CHECK(Contains(command.output, "did you mean 'convert'?"));
  CHECK(Contains(command.output, "merge"));  // every command is listed
  const auto unknown = RunCli("frobnicate");
  CHECK(unknown.exit_code == 2);
  CHECK_FALSE(Contains(unknown.output, "did you mean"));  // nothing close: no guess
  const auto flag = RunCli("convert --formt lmdb a b");
  CHECK(flag.exit_code == 2);
  CHECK(Contains(flag.output, "did you mean --format?"));
  CHECK(Contains(RunCli("info --jsn x").output, "did you mean --json?"));
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 1 --per-class 2").exit_code == 0);
  const auto same = RunCli("convert " + Quote(dir / "tree") + " " + Quote(dir / "tree"));
  CHECK(same.exit_code == 2);
  CHECK_MESSAGE(Contains(same.output, "OUT and SRC are the same directory"), same.output);
}

TEST_CASE("cli: --json prints JSON on stdout in every outcome, errors included") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 4").exit_code == 0);
  const std::string tree = Quote(dir / "tree");
  struct Case {
    std::string args;
    int exit_code;
    std::string code;  // the error's code; empty: a success
  };
  const std::vector<Case> cases = {
      {"convert " + tree + " " + Quote(dir / "ds") + " --json", 0, ""},
      {"convert " + tree + " " + Quote(dir / "ds") + " --json", 4, "AlreadyExists"},
      {"convert " + tree + " " + Quote(dir / "ds2") + " --shard-size 12 --json", 2,
       "InvalidArgument"},
      {"convert " + Quote(dir / "missing") + " " + Quote(dir / "ds3") + " --json", 3, "NotFound"},
      {"info " + Quote(dir / "ds") + " --json", 0, ""},
      {"info " + Quote(dir / "nowhere") + " --json", 3, "NotFound"},
      {"verify " + Quote(dir / "nowhere") + " --json", 3, "NotFound"},
      {"extract " + Quote(dir / "ds") + " " + Quote(dir / "out") + " --json", 0, ""},
      {"extract " + Quote(dir / "ds") + " " + Quote(dir / "out") + " --json", 4, "AlreadyExists"},
      {"merge " + Quote(dir / "merged") + " " + Quote(dir / "nowhere") + " --json", 3, "NotFound"},
      {"convret " + tree + " --json", 2, "InvalidArgument"},
      {"info --bogus " + Quote(dir / "ds") + " --json", 2, "InvalidArgument"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const auto run = test::RunCliStdout(c.args);
    CHECK(run.exit_code == c.exit_code);
    const nlohmann::json out = nlohmann::json::parse(run.output, nullptr, false);
    REQUIRE_MESSAGE(!out.is_discarded(), run.output);
    if (c.code.empty()) {
      CHECK_FALSE(out.contains("error"));
      continue;
    }
    REQUIRE(out.contains("error"));
    CHECK(out["error"]["code"] == c.code);
    CHECK(out["error"]["exit_code"] == c.exit_code);
    CHECK_FALSE(out["error"]["message"].get<std::string>().empty());
  }
  // merge --json on a success, over the parts of a partitioned conversion.
  for (const char* part : {"0/2", "1/2"}) {
    REQUIRE(
        RunCli("convert -q " + tree + " " + Quote(dir / "parts") + " --part " + part).exit_code ==
        0);
  }
  const auto merged = test::RunCliStdout("merge " + Quote(dir / "merged.pkr") + " " +
                                         Quote(dir / "parts") + " --json");
  CHECK(merged.exit_code == 0);
  const nlohmann::json merge = nlohmann::json::parse(merged.output, nullptr, false);
  REQUIRE_MESSAGE(!merge.is_discarded(), merged.output);
  CHECK(merge["parts"] == 2);
  CHECK(merge["records"] == 8);
}

TEST_CASE("cli: extract --on-error skip salvages every good record and lists the bad ones") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 3").exit_code == 0);
  REQUIRE(RunCli("convert -q " + Quote(dir / "tree") + " " + Quote(dir / "ds")).exit_code == 0);
  test::FlipByte(dir / "ds" / "shard-000000.pkr", 64 + 500);  // inside record 0's payload
  // The default stops before writing anything, leaves no folder, and says how to salvage.
  const auto failed = RunCli("extract " + Quote(dir / "ds") + " " + Quote(dir / "out"));
  CHECK(failed.exit_code == 5);
  CHECK(Contains(failed.output, "record 0"));
  CHECK(Contains(failed.output, "--on-error skip"));
  CHECK_FALSE(fs::exists(dir / "out"));

  const auto salvaged =
      RunCli("extract " + Quote(dir / "ds") + " " + Quote(dir / "out") + " --on-error skip");
  CHECK(salvaged.exit_code == 5);  // not a success: a record is missing
  CHECK(Contains(salvaged.output, "extracted 5 files"));
  CHECK(Contains(salvaged.output, "skipped 1 damaged or refused records"));
  CHECK(Contains(salvaged.output, "record 0"));
  CHECK_FALSE(fs::exists(dir / "out" / "n01440764" / "n01440764_0.JPEG"));
  CHECK(test::ReadBytes(dir / "out" / "n01441881" / "n01441881_2.JPEG") ==
        test::ReadBytes(dir / "tree" / "n01441881" / "n01441881_2.JPEG"));

  const auto json = test::RunCliStdout("extract " + Quote(dir / "ds") + " " + Quote(dir / "out2") +
                                       " --on-error skip --json");
  const nlohmann::json out = nlohmann::json::parse(json.output, nullptr, false);
  REQUIRE_MESSAGE(!out.is_discarded(), json.output);
  CHECK(out["files"] == 5);
  REQUIRE(out["skipped"].size() == 1);
  CHECK(out["skipped"][0]["record_index"] == 0);
  CHECK(out["skipped"][0]["code"] == "Corruption");
}

TEST_CASE("cli: convert prints progress lines when stderr is not a terminal") {
  test::TempDir dir;
  REQUIRE(RunCli("synth " + Quote(dir / "tree") + " --classes 2 --per-class 20").exit_code == 0);
  // RunCli's stderr is a pipe, as under Slurm, CI or nohup: whole lines, no carriage returns.
  const auto lines =
      RunCli("convert " + Quote(dir / "tree") + " " + Quote(dir / "ds") + " --progress-interval 0");
  REQUIRE(lines.exit_code == 0);
  CHECK(Contains(lines.output, "packrec convert: [100%] 40/40 records"));
  CHECK(Contains(lines.output, "MB/s"));
  CHECK(Contains(lines.output, "elapsed"));
  CHECK_FALSE(Contains(lines.output, "\r"));
  // The default interval (10 s) prints none for a run this short: the summary says it all.
  const auto quiet = RunCli("convert " + Quote(dir / "tree") + " " + Quote(dir / "ds2"));
  REQUIRE(quiet.exit_code == 0);
  CHECK_FALSE(Contains(quiet.output, "packrec convert: ["));
  CHECK(Contains(quiet.output, "converted 40 images"));
}

}  // namespace
}  // namespace packrec
