// The pages of an LMDB data file checked with packrec's own reads before liblmdb walks them.
// liblmdb trusts its pages: a cursor that steps onto a zeroed or foreign page fails an assert()
// inside mdb_cursor_next (mdb.c, "IS_LEAF(mp)") and aborts the process, where packrec owes its
// caller a Corruption naming the page. So every walk over a whole environment (verify, extract,
// ForEach, the Caffe LMDB import, a writer's resume) first visits the main database's tree the
// way the cursor will (docs/formats/lmdb.md, "What a reader checks").
#ifndef PACKREC_FORMATS_LMDB_LMDB_PAGES_H_
#define PACKREC_FORMATS_LMDB_LMDB_PAGES_H_

#include <filesystem>

#include "packrec/status.h"

namespace packrec {

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
