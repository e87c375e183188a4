// LMDB return codes as packrec Status values, with the operation and path in the message.
#ifndef PACKREC_FORMATS_LMDB_LMDB_STATUS_H_
#define PACKREC_FORMATS_LMDB_LMDB_STATUS_H_

#include <filesystem>
#include <string>

#include "packrec/status.h"

namespace packrec::lmdb {

Status LmdbError(int rc, const std::string& operation, const std::filesystem::path& path);

// Whether `data_file` (an LMDB data.mdb) reaches as far as its own metadata says it does. LMDB
// maps the file and follows page numbers into the map without comparing them with the file's
// size, so a file cut short (a torn copy, a power loss, a full disk) ends the process with SIGBUS
// on the first page past its end. Its meta pages name the last page in use (mm_last_pg of the
// newer of the two), which is checked here before LMDB maps anything: Truncated, naming both
// sizes, when the file is shorter; InvalidInput when it is no regular file (a FIFO waits for
// ever). A file whose meta pages are not LMDB's is left to mdb_env_open to refuse.
Status CheckDataFileWhole(const std::filesystem::path& data_file);

}  // namespace packrec::lmdb

#endif  // PACKREC_FORMATS_LMDB_LMDB_STATUS_H_
