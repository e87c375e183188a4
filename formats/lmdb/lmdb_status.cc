#include "lmdb/lmdb_status.h"

#include <lmdb.h>

#include <cerrno>

namespace packrec::lmdb {

Status LmdbError(int rc, const std::string& operation, const std::filesystem::path& path) {
  std::string message = "lmdb " + operation + " " + path.string() + ": " + mdb_strerror(rc);
  switch (rc) {
    case ENOENT:
      return Status::NotFound(std::move(message));
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
      return Status::Corruption(std::move(message));
    case MDB_VERSION_MISMATCH:
      return Status::NotSupported(std::move(message));
    case MDB_READERS_FULL:
      return Status::IOError(message +
                             " (every reader slot is taken: close idle readers, or open fewer "
                             "processes/threads at once)");
    default:
      return Status::IOError(std::move(message));
  }
}

}  // namespace packrec::lmdb
