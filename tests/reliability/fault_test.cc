// Injected write and fsync failures during `packrec convert` (an LD_PRELOAD shim,
// reliability/fault_inject.cc, fails the Nth call on the output's files): exit code 6 with a
// message naming the file and the error, no temporary file left, a file whose fsync failed never
// used again, and --resume without the fault completes to the uninterrupted result.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../formats/shard_test_util.h"
#include "packrec/reader.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

struct LoggedCall {
  std::string kind;  // write, fsync, open, read
  std::string path;
  std::string result;  // "ok" or the error's text
};

std::vector<LoggedCall> ReadLog(const fs::path& log) {
  std::vector<LoggedCall> calls;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    LoggedCall call;
    long n = 0;
    fields >> call.kind >> n >> call.path;
    std::getline(fields, call.result);
    if (!call.result.empty() && call.result[0] == ' ') call.result.erase(0, 1);
    calls.push_back(call);
  }
  return calls;
}

// Runs the CLI under the shim; `fault` empty: count only.
test::CommandResult RunWithFault(const std::string& args, const fs::path& dir,
                                 const std::string& fault, const fs::path& log) {
  std::string env = "env LD_PRELOAD=" + test::Quote(PACKREC_FAULT_SHIM) +
                    " PACKREC_FAULT_DIR=" + test::Quote(dir) +
                    " PACKREC_FAULT_LOG=" + test::Quote(log) +
                    " PACKREC_FAULT=" + (fault.empty() ? "none:0:EIO" : fault);
  // Sanitizer builds: the shim is loaded before the sanitizer runtime, which is fine here.
  const char* asan = std::getenv("ASAN_OPTIONS");
  env += " ASAN_OPTIONS=" +
         test::Quote(std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0");
  const std::string command = env + " " + PACKREC_CLI_PATH + " " + args + " 2>&1";
  test::CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The path of the last call that the shim failed ("" when none did).
std::string FailedPath(const fs::path& log) {
  std::string path;
  for (const LoggedCall& call : ReadLog(log)) {
    if (call.result != "ok") path = call.path;
  }
  return path;
}

std::vector<std::string> Temporaries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().filename().string().ends_with(".tmp")) names.push_back(entry.path().string());
  }
  return names;
}

TEST_CASE("injected ENOSPC on write and EIO on fsync: named, nothing half-written kept, resumed") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 60, /*seed=*/3, /*size=*/240);
  int injected = 0;
  int resumed_with_records = 0;
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    const std::string name = format == "hdf5" ? "out.h5" : "out";
    const auto convert = [&](const fs::path& output) {
      return "convert -q --format " + format +
             " --shard-size 128KiB --checkpoint-every 128KiB --threads 2 " +
             test::Quote(dir / "tree") + " " + test::Quote(output);
    };
    const fs::path reference_dir = dir / ("reference-" + format);
    const fs::path counted_log = dir / ("count-" + format + ".log");
    // The uninterrupted run, under the shim: how many calls there are to fail.
    const test::CommandResult reference_run =
        RunWithFault(convert(reference_dir / name), reference_dir, "", counted_log);
    REQUIRE_MESSAGE(reference_run.exit_code == 0, reference_run.output);
    auto reference = OpenDataset(reference_dir / name);
    REQUIRE(reference.ok());
    long writes = 0, fsyncs = 0;
    for (const LoggedCall& call : ReadLog(counted_log)) {
      writes += call.kind == "write";
      fsyncs += call.kind == "fsync";
    }
    REQUIRE(writes > 10);
    REQUIRE(fsyncs > 3);
    for (const auto& [kind, total, error, text] :
         {std::tuple{std::string("write"), writes, std::string("ENOSPC"),
                     std::string("No space left on device")},
          std::tuple{std::string("fsync"), fsyncs, std::string("EIO"),
                     std::string("Input/output error")}}) {
      const int points = 8;
      for (int point = 0; point < points; ++point) {
        const long n = 1 + (total - 1) * point / (points - 1);
        const std::string fault = kind + ":" + std::to_string(n) + ":" + error;
        CAPTURE(fault);
        const fs::path run_dir = dir / ("run-" + format);
        fs::remove_all(run_dir);
        fs::create_directories(run_dir);
        const fs::path log = run_dir.string() + ".log";
        fs::remove(log);
        const test::CommandResult failed =
            RunWithFault(convert(run_dir / name), run_dir, fault, log);
        ++injected;
        CHECK_MESSAGE(failed.exit_code == 6, failed.output);
        CHECK_MESSAGE(failed.output.find(text) != std::string::npos, failed.output);
        CHECK_MESSAGE(failed.output.find(run_dir.string()) != std::string::npos, failed.output);
        CHECK(Temporaries(run_dir).empty());
        for (const LoggedCall& call : ReadLog(log)) {
          // A file whose fsync failed is gone: never fsynced again, never trusted.
          if (call.kind == "fsync" && call.result != "ok" && !fs::is_directory(call.path)) {
            CHECK_MESSAGE(!fs::exists(call.path), call.path);
          }
        }
        const bool kept = failed.output.find("records are kept") != std::string::npos;
        resumed_with_records += kept ? 1 : 0;
        const test::CommandResult resumed_run = test::RunCli(convert(run_dir / name) + " --resume");
        REQUIRE_MESSAGE(resumed_run.exit_code == 0, resumed_run.output);
        // Kept records are resumed from, unless the dataset was already whole: the failure came
        // after its last file was in place (the final directory fsync), and it is left there.
        const bool resumed = resumed_run.output.find("resumed:") != std::string::npos;
        const bool whole = resumed_run.output.find("already complete") != std::string::npos;
        CHECK_MESSAGE((kept ? resumed || whole : !resumed), resumed_run.output);
        auto result = OpenDataset(run_dir / name);
        REQUIRE_MESSAGE(result.ok(), result.status().ToString());
        test::CheckSameRecords(**reference, **result);
        CHECK(Temporaries(run_dir).empty());
      }
    }
  }
  MESSAGE("faults injected: " << injected << "; resumed from kept records: " << resumed_with_records
                              << "; records lost: 0");
}

// Root reads a mode-000 file anyway (CI runs as root), so an unreadable file is made by the shim:
// its open fails with EACCES, or a read of it with EIO, as a bad sector does.
struct ReadFault {
  const char* kind;
  const char* error;
  const char* text;  // strerror's
};
constexpr ReadFault kReadFaults[] = {{"open", "EACCES", "Permission denied"},
                                     {"read", "EIO", "Input/output error"}};

TEST_CASE("an input that cannot be opened or read: a named reject under skip, a named error") {
  test::TempDir dir;
  const fs::path tree = dir / "tree";
  test::SynthTree(tree, 2, 12, /*seed=*/9, /*size=*/96);
  const std::string convert_args =
      "convert -q --format shard --threads 2 " + test::Quote(tree) + " ";
  const fs::path counted_log = dir / "count.log";
  const test::CommandResult reference_run =
      RunWithFault(convert_args + test::Quote(dir / "reference"), tree, "", counted_log);
  REQUIRE_MESSAGE(reference_run.exit_code == 0, reference_run.output);
  auto reference = OpenDataset(dir / "reference");
  REQUIRE(reference.ok());
  REQUIRE((*reference)->size() == 24);
  long opens = 0, reads = 0;
  for (const LoggedCall& call : ReadLog(counted_log)) {
    opens += call.kind == "open";
    reads += call.kind == "read";
  }
  REQUIRE(opens >= 24);
  REQUIRE(reads >= 24);
  int injected = 0;
  for (const ReadFault& read_fault : kReadFaults) {
    const std::string kind = read_fault.kind;
    const std::string text = read_fault.text;
    const long total = kind == "open" ? opens : reads;
    for (const long n : {1L, total / 2, total}) {
      const std::string fault = kind + ":" + std::to_string(n) + ":" + read_fault.error;
      CAPTURE(fault);
      const fs::path output = dir / ("out-" + kind + "-" + std::to_string(n));
      const fs::path log = output.string() + ".log";
      const test::CommandResult skipped =
          RunWithFault(convert_args + "--on-error skip " + test::Quote(output), tree, fault, log);
      ++injected;
      REQUIRE_MESSAGE(skipped.exit_code == 0, skipped.output);
      const std::string failed_path = FailedPath(log);
      REQUIRE(!failed_path.empty());
      const std::vector<std::byte> rejects_bytes = test::ReadBytes(output / "rejects.tsv");
      const std::string rejects(reinterpret_cast<const char*>(rejects_bytes.data()),
                                rejects_bytes.size());
      CAPTURE(rejects);
      const std::string key = fs::relative(failed_path, tree).string();
      CHECK(rejects.find(key) != std::string::npos);
      CHECK(rejects.find(text) != std::string::npos);
      // Every other image is there, byte for byte; the unreadable one only in the rejects.
      auto result = OpenDataset(output);
      REQUIRE_MESSAGE(result.ok(), result.status().ToString());
      CHECK((*result)->size() == 23);
      ReadScratch expected_scratch, actual_scratch;
      std::uint64_t j = 0;
      for (std::uint64_t i = 0; i < (*reference)->size(); ++i) {
        auto expected = (*reference)->Read(i, expected_scratch);
        REQUIRE(expected.ok());
        if (expected->key == key) continue;
        REQUIRE(j < (*result)->size());
        auto actual = (*result)->Read(j++, actual_scratch);
        REQUIRE(actual.ok());
        CHECK(actual->key == expected->key);
        CHECK(actual->label == expected->label);
        CHECK(std::equal(actual->bytes.begin(), actual->bytes.end(), expected->bytes.begin(),
                         expected->bytes.end()));
      }
      CHECK(j == 23);

      // --on-error fail (the default): an error naming the file and the cause; nothing written.
      // With two threads reading, the Nth open or read may be of another file than above.
      const fs::path failed_output = output.string() + "-fail";
      const fs::path failed_log = failed_output.string() + ".log";
      const test::CommandResult failed =
          RunWithFault(convert_args + test::Quote(failed_output), tree, fault, failed_log);
      ++injected;
      CHECK_MESSAGE(failed.exit_code == 3, failed.output);
      const std::string failed_key = fs::relative(FailedPath(failed_log), tree).string();
      CHECK_MESSAGE(failed.output.find(failed_key) != std::string::npos, failed.output);
      CHECK_MESSAGE(failed.output.find(text) != std::string::npos, failed.output);
      CHECK_FALSE(fs::exists(failed_output / "manifest.json"));
      CHECK((!fs::exists(failed_output) || Temporaries(failed_output).empty()));
    }
  }
  MESSAGE("input faults injected: " << injected);
}

// Every open and every read of another tool's container files failed in turn, one per run
// (libstdc++ throws from a failed read inside json::parse of a stream: the export manifest ended
// the process): never a crash. The export manifest and RecordIO's .lst are read whole or the
// import stops naming them; a data file that cannot be opened, or a read failing inside one, is
// one reject naming it under --on-error skip, the records before and after kept (which call fails
// depends on how the reading and prefetching threads interleave; import_export_test.cc leaves out
// a data file for certain).
TEST_CASE("a container source whose files fail to open or read: a named error or reject") {
  test::TempDir dir;
  // About 2.6 MB in two files: several reads a file (libarchive reads 1 MiB at a time, the
  // TFRecord and RecordIO importers 256 KiB), so a read fails with records before and after it.
  test::SynthTree(dir / "tree", 2, 40, /*seed=*/4);
  int injected = 0;
  for (const std::string format : {"wds", "tfrecord", "recordio"}) {
    CAPTURE(format);
    const fs::path source = dir / ("src-" + format);
    const test::CommandResult exported =
        test::RunCli("convert -q --shard-size 1536KiB --format " + format + " " +
                     test::Quote(dir / "tree") + " " + test::Quote(source));
    REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
    const std::string convert = "convert -q --on-error skip " + test::Quote(source) + " ";
    const fs::path counted_log = dir / ("count-" + format + ".log");
    const fs::path reference_dir = dir / ("reference-" + format);
    const test::CommandResult clean =
        RunWithFault(convert + test::Quote(reference_dir), source, "", counted_log);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.output);
    const std::shared_ptr<const Reader> reference = test::OpenShared(reference_dir);
    REQUIRE(reference->size() == 80);
    for (const ReadFault& read_fault : kReadFaults) {
      const std::string kind = read_fault.kind;
      long total = 0;
      for (const LoggedCall& call : ReadLog(counted_log)) total += call.kind == kind;
      REQUIRE(total >= 3);
      for (long n = 1; n <= total; ++n) {
        const std::string fault = kind + ":" + std::to_string(n) + ":" + read_fault.error;
        CAPTURE(fault);
        const fs::path output = dir / ("out-" + format + "-" + kind + "-" + std::to_string(n));
        const fs::path log = output.string() + ".log";
        const test::CommandResult run =
            RunWithFault(convert + test::Quote(output), source, fault, log);
        ++injected;
        const std::string failed = FailedPath(log);
        CAPTURE(run.output);
        if (failed.empty()) {  // the run took another path than the counting one: not injected
          CHECK(run.exit_code == 0);
          continue;
        }
        const fs::path failed_file = fs::path(failed).filename();
        const bool side_file =
            failed_file == "packrec-export.json" || failed_file.extension() == ".lst";
        if (run.exit_code == 6) {
          // Stopped, naming what could not be read and why; no dataset left.
          CHECK(side_file);
          CHECK(run.output.find(failed) != std::string::npos);
          CHECK(run.output.find(read_fault.text) != std::string::npos);
          CHECK_FALSE(fs::exists(output / "manifest.json"));
          continue;
        }
        REQUIRE(run.exit_code == 0);
        CHECK_FALSE(side_file);
        const std::shared_ptr<const Reader> imported = test::OpenShared(output);
        // Every record imported is the reference's, in order; what is missing is one reject
        // naming the file (or none, where the failed open was the read-ahead's, a hint).
        ReadScratch expected_scratch, actual_scratch;
        std::uint64_t next = 0;
        for (std::uint64_t i = 0; i < imported->size(); ++i) {
          const Result<RecordView> actual = imported->Read(i, actual_scratch);
          REQUIRE(actual.ok());
          Result<RecordView> expected = reference->Read(next++, expected_scratch);
          while (expected.ok() && expected->key != actual->key && next < reference->size()) {
            expected = reference->Read(next++, expected_scratch);
          }
          REQUIRE(expected.ok());
          REQUIRE(expected->key == actual->key);
          CHECK(expected->label == actual->label);
          CHECK(std::equal(actual->bytes.begin(), actual->bytes.end(), expected->bytes.begin(),
                           expected->bytes.end()));
        }
        if (imported->size() < reference->size()) {
          const std::vector<std::byte> bytes = test::ReadBytes(output / "rejects.tsv");
          const std::string rejects(reinterpret_cast<const char*>(bytes.data()), bytes.size());
          CHECK(std::count(rejects.begin(), rejects.end(), '\n') == 2);  // header and one
          CHECK(rejects.find(failed_file.string()) != std::string::npos);
          CHECK(rejects.find(read_fault.text) != std::string::npos);
        }
      }
    }
  }
  MESSAGE("faults injected into imports: " << injected);
}

// Reading a dataset whose files fail to open or read (the readers' pread paths: manifests, shard
// files in verify and ForEach, LMDB's meta pages, HDF5's metadata): an error naming the file and
// the system's reason, exit 5 (verify found a problem) or 6 (the dataset could not be opened),
// never taken for "not a dataset" or "corrupt", never a crash; the dataset is left as it was.
TEST_CASE("a dataset whose files cannot be opened or read: verify names the file and the error") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 12, /*seed=*/5, /*size=*/96);
  int injected = 0;
  for (const std::string format : {"shard", "lmdb", "hdf5"}) {
    CAPTURE(format);
    const fs::path dataset = dir / (format == "hdf5" ? "data.h5" : "data-" + format);
    const test::CommandResult converted =
        test::RunCli("convert -q --shard-size 128KiB --format " + format + " " +
                     test::Quote(dir / "tree") + " " + test::Quote(dataset));
    REQUIRE_MESSAGE(converted.exit_code == 0, converted.output);
    const std::string verify = "verify " + test::Quote(dataset);
    const fs::path counted_log = dir / ("count-" + format + ".log");
    const test::CommandResult clean = RunWithFault(verify, dataset, "", counted_log);
    REQUIRE_MESSAGE(clean.exit_code == 0, clean.output);
    for (const ReadFault& read_fault : kReadFaults) {
      const std::string kind = read_fault.kind;
      long total = 0;
      for (const LoggedCall& call : ReadLog(counted_log)) total += call.kind == kind;
      REQUIRE(total >= 1);
      std::set<long> points{1, (total + 1) / 2, total};
      for (const long n : points) {
        const std::string fault = kind + ":" + std::to_string(n) + ":" + read_fault.error;
        CAPTURE(fault);
        const test::CommandResult failed =
            RunWithFault(verify, dataset, fault, dir / ("fault-" + format + ".log"));
        ++injected;
        CHECK_MESSAGE((failed.exit_code == 5 || failed.exit_code == 6), failed.output);
        CHECK_MESSAGE(failed.output.find(read_fault.text) != std::string::npos, failed.output);
        CHECK_MESSAGE(failed.output.find(dataset.string()) != std::string::npos, failed.output);
        CHECK_MESSAGE(failed.output.find("not a packrec dataset") == std::string::npos,
                      failed.output);
        CHECK_MESSAGE(failed.output.find("Corruption") == std::string::npos, failed.output);
      }
    }
    const test::CommandResult after = test::RunCli(verify);
    CHECK_MESSAGE(after.exit_code == 0, after.output);
  }
  MESSAGE("read faults injected into verify: " << injected);
}

// The system refusing a thread (a user's process limit, `--threads 1024` under a low ulimit -u)
// ended the process with std::system_error and SIGABRT. It is an error that says so, and the
// output is left as it was.
TEST_CASE("a thread the system refuses is a named error, not an abort, and nothing is left") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 30, /*seed=*/3, /*size=*/120);
  // A run either stops naming the refusal and leaves nothing, or (the refused thread was only an
  // aid, the write-behind or the read-ahead advice) finishes a dataset that verifies.
  const auto check = [&](const std::string& args, const fs::path& output, long refused_from) {
    CAPTURE(refused_from);
    const test::CommandResult run = RunWithFault(
        args, dir.path(), "thread:" + std::to_string(refused_from) + ":EAGAIN", dir / "t.log");
    std::error_code error;
    if (refused_from == 1 || run.exit_code != 0) {
      CHECK_MESSAGE(run.exit_code == 6, run.output);
      CHECK_MESSAGE(run.output.find("cannot start a thread") != std::string::npos, run.output);
      CHECK_FALSE(fs::exists(output, error));
      return;
    }
    // An export is read back through its import.
    const bool exported = fs::exists(output / "packrec-export.json", error);
    const test::CommandResult verified = test::RunCli(
        exported ? "convert -q " + test::Quote(output) + " " + test::Quote(dir / "back.pkr")
                 : "verify " + test::Quote(output));
    CHECK_MESSAGE(verified.exit_code == 0, verified.output);
    fs::remove_all(dir / "back.pkr", error);
    fs::remove_all(output, error);
  };
  for (const std::string format : {"shard", "lmdb", "hdf5", "wds"}) {
    CAPTURE(format);
    const fs::path output = dir / (format == "hdf5" ? "out.h5" : "out");
    for (long refused_from = 1; refused_from <= 6; ++refused_from) {
      check("convert -q --threads 4 --format " + format + " " + test::Quote(dir / "tree") + " " +
                test::Quote(output),
            output, refused_from);
    }
  }
  // An import of a container: its own reading and preparing threads.
  const test::CommandResult exported = test::RunCli(
      "convert -q --format wds " + test::Quote(dir / "tree") + " " + test::Quote(dir / "tars"));
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  for (long refused_from = 1; refused_from <= 6; ++refused_from) {
    check("convert -q --threads 4 " + test::Quote(dir / "tars") + " " + test::Quote(dir / "in.pkr"),
          dir / "in.pkr", refused_from);
  }
}

// LMDB maps data.mdb and follows page numbers into the map: a file cut short (a partial copy, a
// full disk, a power loss) raised SIGBUS in info, verify, extract and --resume. Every cut at a page
// boundary is now named (exit 5: truncated), or, for --resume, continued or refused by name.
TEST_CASE("an LMDB data.mdb cut at any page: named by every command, never SIGBUS") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 40, /*seed=*/3, /*size=*/200);
  const fs::path dataset = dir / "whole";
  const test::CommandResult converted = test::RunCli(
      "convert -q --format lmdb " + test::Quote(dir / "tree") + " " + test::Quote(dataset));
  REQUIRE_MESSAGE(converted.exit_code == 0, converted.output);
  const std::uint64_t size = fs::file_size(dataset / "data.mdb");
  constexpr std::uint64_t kPage = 4096;
  int cuts = 0;
  const fs::path cut = dir / "cut";
  for (std::uint64_t length = 0; length < size; length += kPage) {
    CAPTURE(length);
    fs::remove_all(cut);
    fs::copy(dataset, cut);
    test::TruncateFile(cut / "data.mdb", length);
    ++cuts;
    // Every cut in this process (a SIGBUS here would end the test binary); every eighth, and
    // the first ones, through the CLI's three commands as well (each run costs a process start,
    // 0.3-0.5 s under ASan).
    const auto opened = OpenDataset(cut);
    REQUIRE_FALSE(opened.ok());
    CHECK_MESSAGE(opened.status().code() == StatusCode::kTruncated, opened.status().ToString());
    if (length / kPage % 8 != 0 && length > 2 * kPage) continue;
    for (const std::string command : {"info", "verify", "extract"}) {
      CAPTURE(command);
      const std::string args = command == "extract" ? command + " " + test::Quote(cut) + " " +
                                                          test::Quote(dir / "extracted")
                                                    : command + " " + test::Quote(cut);
      const test::CommandResult run = test::RunCli(args);
      fs::remove_all(dir / "extracted");
      CHECK_MESSAGE(run.exit_code == 5, run.output);
      CHECK_MESSAGE(run.output.find("data.mdb") != std::string::npos, run.output);
    }
  }
  CHECK(cuts >= 8);

  // An interrupted conversion (a write refused half way: its resume point is kept), then its
  // data.mdb cut at each page boundary before --resume.
  const fs::path run_dir = dir / "run";
  const std::string convert = "convert -q --format lmdb --checkpoint-every 64KiB --threads 2 " +
                              test::Quote(dir / "tree") + " " + test::Quote(run_dir / "out");
  fs::create_directories(run_dir);
  const test::CommandResult counted = RunWithFault(convert, run_dir, "", dir / "count.log");
  REQUIRE_MESSAGE(counted.exit_code == 0, counted.output);
  long writes = 0;
  for (const LoggedCall& call : ReadLog(dir / "count.log")) writes += call.kind == "write";
  fs::remove_all(run_dir);
  fs::create_directories(run_dir);
  const test::CommandResult failed = RunWithFault(
      convert, run_dir, "write:" + std::to_string(writes * 2 / 3) + ":ENOSPC", dir / "f.log");
  REQUIRE_MESSAGE(failed.exit_code == 6, failed.output);
  REQUIRE_MESSAGE(failed.output.find("records are kept") != std::string::npos, failed.output);
  const fs::path interrupted = dir / "interrupted";
  fs::copy(run_dir, interrupted, fs::copy_options::recursive);
  const std::uint64_t interrupted_size = fs::file_size(interrupted / "out" / "data.mdb");
  int resumed = 0;
  // Every fourth page boundary: each is a conversion run.
  for (std::uint64_t length = 0; length < interrupted_size; length += 4 * kPage) {
    CAPTURE(length);
    fs::remove_all(run_dir);
    fs::copy(interrupted, run_dir, fs::copy_options::recursive);
    test::TruncateFile(run_dir / "out" / "data.mdb", length);
    const test::CommandResult run = test::RunCli(convert + " --resume");
    CHECK_MESSAGE(run.exit_code < 128, run.output);
    if (run.exit_code == 0) {
      ++resumed;
      const test::CommandResult verified = test::RunCli("verify " + test::Quote(run_dir / "out"));
      CHECK_MESSAGE(verified.exit_code == 0, verified.output);
    } else {
      CHECK_MESSAGE(run.output.find("data.mdb") != std::string::npos, run.output);
    }
  }
  MESSAGE("cuts of a finished data.mdb: " << cuts << " (CLI on every eighth); of an interrupted "
                                          << "one, resumed at every fourth page: " << resumed
                                          << " resumed, the rest refused by name");
}

// What --resume keeps is read back first: a sealed shard or an LMDB record damaged since the
// interrupted run wrote it (a bad sector, a torn copy) is refused by name, with what to run
// instead, never carried into a dataset that then reports success. An interrupted LMDB output is
// named as such by info, not called corrupt.
TEST_CASE("--resume refuses what was damaged since the interrupted run, saying what to run") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 40, /*seed=*/3, /*size=*/200);
  for (const std::string format : {"shard", "lmdb"}) {
    CAPTURE(format);
    const fs::path run_dir = dir / ("run-" + format);
    const fs::path output = run_dir / "out";
    const std::string convert = "convert -q --format " + format +
                                " --shard-size 64KiB --checkpoint-every 64KiB --threads 2 " +
                                test::Quote(dir / "tree") + " " + test::Quote(output);
    fs::create_directories(run_dir);
    const fs::path count_log = dir / ("count-" + format + ".log");
    REQUIRE(RunWithFault(convert, run_dir, "", count_log).exit_code == 0);
    long writes = 0;
    for (const LoggedCall& call : ReadLog(count_log)) writes += call.kind == "write";
    fs::remove_all(run_dir);
    fs::create_directories(run_dir);
    const test::CommandResult failed = RunWithFault(
        convert, run_dir, "write:" + std::to_string(writes * 3 / 4) + ":ENOSPC", dir / "f.log");
    REQUIRE_MESSAGE(failed.output.find("records are kept") != std::string::npos, failed.output);
    if (format == "lmdb") {
      const test::CommandResult info = test::RunCli("info " + test::Quote(output));
      CHECK_MESSAGE(info.exit_code == 3, info.output);
      CHECK_MESSAGE(info.output.find("interrupted conversion") != std::string::npos, info.output);
    }
    // Damage one byte that the resume point keeps: in the first sealed shard, or in record 1's
    // payload in data.mdb (found by its bytes).
    const fs::path damaged = format == "shard" ? output / "shard-000000.pkr" : output / "data.mdb";
    REQUIRE(fs::exists(damaged));
    std::vector<std::byte> bytes = test::ReadBytes(damaged);
    std::uint64_t at = bytes.size() / 8;
    if (format == "lmdb") {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(dir / "tree")) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      const std::vector<std::byte> record = test::ReadBytes(files[1]);
      const auto found = std::search(bytes.begin(), bytes.end(), record.begin(), record.end());
      REQUIRE(found != bytes.end());
      at = static_cast<std::uint64_t>(found - bytes.begin()) + record.size() / 2;
    }
    bytes[at] ^= std::byte{0x10};
    test::WriteBytes(damaged, bytes);
    const test::CommandResult resumed = test::RunCli(convert + " --resume");
    CHECK_MESSAGE(resumed.exit_code == 5, resumed.output);
    CHECK_MESSAGE(resumed.output.find("cannot resume") != std::string::npos, resumed.output);
    CHECK_MESSAGE(resumed.output.find("--overwrite") != std::string::npos, resumed.output);
    CHECK_MESSAGE(resumed.output.find(damaged.filename().string()) != std::string::npos,
                  resumed.output);
    // Advice followed: a whole dataset.
    const test::CommandResult again = test::RunCli(convert + " --overwrite");
    REQUIRE_MESSAGE(again.exit_code == 0, again.output);
    const test::CommandResult verified = test::RunCli("verify " + test::Quote(output));
    CHECK_MESSAGE(verified.exit_code == 0, verified.output);
  }
}

// An input replaced or edited between an interrupted run and its --resume, before the resume
// point: its kept record would be the old bytes. The resume notices (size or modification time)
// and refuses, saying to start again; an input after the resume point is simply read anew.
TEST_CASE("--resume refuses when an input before the resume point changed since") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 2, 40, /*seed=*/3, /*size=*/200);
  const fs::path run_dir = dir / "run";
  const std::string convert =
      "convert -q --checkpoint-every 64KiB --shard-size 64KiB "
      "--threads 2 " +
      test::Quote(dir / "tree") + " " + test::Quote(run_dir / "out");
  fs::create_directories(run_dir);
  REQUIRE(RunWithFault(convert, run_dir, "", dir / "count.log").exit_code == 0);
  long writes = 0;
  for (const LoggedCall& call : ReadLog(dir / "count.log")) writes += call.kind == "write";
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "tree")) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  const auto interrupt = [&] {
    fs::remove_all(run_dir);
    fs::create_directories(run_dir);
    const test::CommandResult failed = RunWithFault(
        convert, run_dir, "write:" + std::to_string(writes * 3 / 4) + ":ENOSPC", dir / "f.log");
    REQUIRE_MESSAGE(failed.output.find("records are kept") != std::string::npos, failed.output);
  };
  // The first input replaced by another image (another size).
  interrupt();
  const std::vector<std::byte> original = test::ReadBytes(files[0]);
  test::WriteBytes(files[0], test::MakeJpeg(50, 40, 99));
  test::CommandResult resumed = test::RunCli(convert + " --resume");
  CHECK_MESSAGE(resumed.exit_code == 4, resumed.output);
  CHECK_MESSAGE(resumed.output.find("changed since") != std::string::npos, resumed.output);
  CHECK_MESSAGE(resumed.output.find("--overwrite") != std::string::npos, resumed.output);
  // Only its modification time moved (the same bytes written again): refused too.
  test::WriteBytes(files[0], original);
  interrupt();
  fs::last_write_time(files[0], fs::last_write_time(files[0]) + std::chrono::seconds(5));
  resumed = test::RunCli(convert + " --resume");
  CHECK_MESSAGE(resumed.exit_code == 4, resumed.output);
  // Gone: the listing itself differs.
  interrupt();
  fs::rename(files[1], dir / "aside.jpg");
  resumed = test::RunCli(convert + " --resume");
  CHECK_MESSAGE(resumed.exit_code == 4, resumed.output);
  CHECK_MESSAGE(resumed.output.find("changed since") != std::string::npos, resumed.output);
  fs::rename(dir / "aside.jpg", files[1]);
  // Unchanged: resumed to a dataset that verifies.
  interrupt();
  resumed = test::RunCli(convert + " --resume");
  CHECK_MESSAGE(resumed.exit_code == 0, resumed.output);
  CHECK(test::RunCli("verify " + test::Quote(run_dir / "out")).exit_code == 0);
}

}  // namespace
}  // namespace packrec
