// Fuzz target: an LMDB data file's pages, as damage or a hostile file leaves them. The input is
// a data.mdb (the seeds are small packrec LMDB datasets'); packrec checks its pages with its own
// reads (CheckLmdbPages), and when they pass, liblmdb walks every entry with a cursor, as verify
// and extract do. liblmdb trusts its pages and asserts on a bad one (abort: a crash here), so a
// file that passes the check and then trips liblmdb is the bug this target looks for. The same
// file is then read through packrec's reader every way a loader would.
#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/file_io.h"
#include "fuzz_util.h"
#include "lmdb/lmdb_pages.h"

namespace {

// Every entry of the main database, in key order, and each key looked up again; errors are fine.
void WalkWithLiblmdb(const std::filesystem::path& dir) {
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) != MDB_SUCCESS) return;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  MDB_cursor* cursor = nullptr;
  if (mdb_env_open(env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0644) == MDB_SUCCESS &&
      mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == MDB_SUCCESS &&
      mdb_dbi_open(txn, nullptr, 0, &dbi) == MDB_SUCCESS &&
      mdb_cursor_open(txn, dbi, &cursor) == MDB_SUCCESS) {
    MDB_val key, value;
    for (int rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
      MDB_val found;
      (void)mdb_get(txn, dbi, &key, &found);
    }
    for (int rc = mdb_cursor_get(cursor, &key, &value, MDB_LAST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(cursor, &key, &value, MDB_PREV)) {
    }
  }
  if (cursor != nullptr) mdb_cursor_close(cursor);
  if (txn != nullptr) mdb_txn_abort(txn);
  mdb_env_close(env);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const fs::path dir = packrec::fuzz::FreshDir("lmdb-pages");
  if (!packrec::WriteWholeFile(dir / "data.mdb", bytes, true).ok()) return 0;
  if (!packrec::CheckLmdbPages(dir / "data.mdb").ok()) return 0;
  WalkWithLiblmdb(dir);
  packrec::fuzz::ReadEverything(dir);
  return 0;
}
