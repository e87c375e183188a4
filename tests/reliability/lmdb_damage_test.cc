// An LMDB data file with pages zeroed, one 4 KiB page at a time and at random: liblmdb trusts its
// pages and a cursor stepping onto a damaged one fails an assert() (mdb.c, "IS_LEAF(mp)") that
// aborts the process. packrec checks the pages it will walk first (formats/lmdb/lmdb_pages.h), so
// verify and extract end with an error naming the damage, never by a signal.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../formats/shard_test_util.h"
#include "core/random.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kPage = 4096;

void WriteAt(const fs::path& file, std::uint64_t offset, const std::vector<char>& bytes) {
  std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(static_cast<std::streamoff>(offset));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> ReadAt(const fs::path& file, std::uint64_t offset, std::size_t size) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<char> bytes(size);
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  return bytes;
}

// verify and extract of `dataset`: each ends by itself (an exit code, not a signal); returns how
// many of the two found nothing wrong.
int RunBoth(const fs::path& dataset, const fs::path& out, const std::string& what) {
  int clean = 0;
  const int verified = test::WaitForCli(test::SpawnCli({"verify", dataset.string()}));
  CHECK_MESSAGE(verified < 128, what << ": verify ended by signal " << verified - 128);
  clean += verified == 0;
  std::error_code ignored;
  fs::remove_all(out, ignored);
  const int extracted =
      test::WaitForCli(test::SpawnCli({"extract", dataset.string(), out.string()}));
  CHECK_MESSAGE(extracted < 128, what << ": extract ended by signal " << extracted - 128);
  clean += extracted == 0;
  return clean;
}

TEST_CASE("an LMDB with any 4 KiB page zeroed, or random ones: verify and extract never abort") {
  test::TempDir dir;
  // Small images, so that the tree has branch pages, leaves of inline values and overflow runs.
  test::SynthTree(dir / "tree", 3, 70, /*seed=*/11, /*size=*/48);
  const fs::path dataset = dir / "data-lmdb";
  const test::CommandResult converted = test::RunCli(
      "convert -q --format lmdb " + test::Quote(dir / "tree") + " " + test::Quote(dataset));
  REQUIRE_MESSAGE(converted.exit_code == 0, converted.output);
  const fs::path data = dataset / "data.mdb";
  const std::uint64_t pages = fs::file_size(data) / kPage;
  REQUIRE(pages >= 8);
  REQUIRE(RunBoth(dataset, dir / "out", "intact") == 2);
  int noticed = 0;
  const std::vector<char> zeros(kPage, 0);
  for (std::uint64_t page = 0; page < pages; ++page) {
    const std::vector<char> saved = ReadAt(data, page * kPage, kPage);
    WriteAt(data, page * kPage, zeros);
    noticed += RunBoth(dataset, dir / "out", "page " + std::to_string(page) + " zeroed") < 2;
    WriteAt(data, page * kPage, saved);
  }
  // Random 4 KiB runs at any offset (not page-aligned), a few per run.
  SplitMix64 random(55);
  const std::uint64_t size = fs::file_size(data);
  for (int run = 0; run < 40; ++run) {
    const std::uint64_t offset = random.Next() % (size - kPage);
    const std::vector<char> saved = ReadAt(data, offset, kPage);
    WriteAt(data, offset, zeros);
    RunBoth(dataset, dir / "out", "4 KiB zeroed at byte " + std::to_string(offset));
    WriteAt(data, offset, saved);
  }
  // The newer meta page (page 1, transaction 1 or later) giving another page size: liblmdb maps
  // the file with it unchecked, and the first read transaction raised SIGBUS (fuzz_lmdb_pages).
  {
    const std::vector<char> saved = ReadAt(data, kPage, kPage);
    std::vector<char> meta = saved;
    const std::uint32_t huge = 1u << 30;
    std::memcpy(meta.data() + 16 + 24, &huge, sizeof huge);  // MDB_meta's free db md_pad
    std::uint64_t txn = 0;
    std::memcpy(&txn, saved.data() + 16 + 128, sizeof txn);
    if (txn == 0) {
      txn = ~std::uint64_t{0} >> 1;  // newer than page 0's, whatever it holds
      std::memcpy(meta.data() + 16 + 128, &txn, sizeof txn);
    }
    WriteAt(data, kPage, meta);
    const test::CommandResult verified = test::RunCli("verify " + test::Quote(dataset));
    CHECK_MESSAGE((verified.exit_code == 5 || verified.exit_code == 6), verified.output);
    CHECK_MESSAGE(verified.output.find("page size") != std::string::npos, verified.output);
    CHECK(RunBoth(dataset, dir / "out", "meta page 1 with another page size") < 2);
    WriteAt(data, kPage, saved);
  }
  MESSAGE(pages << " pages zeroed one at a time: " << noticed << " noticed");
  // Every page but free ones holds something a zeroing changes: most are noticed.
  CHECK(noticed >= static_cast<int>(pages / 2));
  CHECK(RunBoth(dataset, dir / "out", "restored") == 2);
}

}  // namespace
}  // namespace packrec
