// The pages of an LMDB data file checked with packrec's own reads before liblmdb walks them.
// liblmdb trusts its pages: a cursor that steps onto a zeroed or foreign page fails an assert()
// inside mdb_cursor_next (mdb.c, "IS_LEAF(mp)") and aborts the process, where packrec owes its
// caller a Corruption naming the page. So every walk over a whole environment (verify, extract,
// ForEach, the Caffe LMDB import, a writer's resume) first visits the main database's tree the
// way the cursor will (docs/formats/lmdb.md, "What a reader checks").
#ifndef PACKREC_FORMATS_LMDB_LMDB_PAGES_H_
#define PACKREC_FORMATS_LMDB_LMDB_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "packrec/status.h"

namespace packrec {

// LMDB's meta page (mdb.c, data version 1, unchanged since 0.9; native byte order, 64-bit: what
// liblmdb writes here): a 16-byte page header, then MDB_meta { u32 magic; u32 version; void*
// address; size_t mapsize; MDB_db dbs[2]; pgno_t last_pg; txnid_t txnid; }, with 48-byte MDB_db
// records (the free list's, the main database's) whose md_pad holds the page size in the first.
// Read by every check of the file made before liblmdb maps it.
struct LmdbMeta {
  bool is_meta = false;  // the magic number 0xBEEFC0DE is where it belongs
  std::uint32_t version = 0;
  std::uint32_t page_size = 0;
  std::uint64_t last_page = 0;
  std::uint64_t txn_id = 0;
  std::uint16_t main_depth = 0;
  std::uint64_t main_entries = 0;
  std::uint64_t main_root = 0;  // ~0: the main database is empty
};
// Bytes of a meta page that ParseLmdbMeta reads: the header and MDB_meta up to its txnid.
inline constexpr std::size_t kLmdbMetaBytes = 16 + 136;
// `page` holds at least kLmdbMetaBytes (all fields 0 and is_meta false when it does not).
LmdbMeta ParseLmdbMeta(std::span<const std::byte> page);
// The page sizes LMDB uses: a power of two from 4 KiB (its minimum) to 64 KiB.
bool IsLmdbPageSize(std::uint32_t size);

// Checks the meta pages (magic, version, page size) and every branch and leaf page of the main
// database reachable from the newest meta page: its page number and type flags, that its node
// table and every node (key, inline value) lie inside it, that a branch names pages inside the
// file and a tree no deeper than the meta page says, that each value stored on overflow pages
// names an overflow page whose run ends inside the file, and that the leaves hold as many
// entries as the meta page counts. The meta page's own numbers are checked against the file's
// size. Corruption naming `data_file`, the page number and its byte offset otherwise.
// Reads O(branch and leaf pages) with pread; overflow pages only for their 16-byte header.
Status CheckLmdbPages(const std::filesystem::path& data_file);

}  // namespace packrec

#endif  // PACKREC_FORMATS_LMDB_LMDB_PAGES_H_
