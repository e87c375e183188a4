// LMDB return codes as packrec Status values, with the operation and path in the message.
#ifndef PACKREC_FORMATS_LMDB_LMDB_STATUS_H_
#define PACKREC_FORMATS_LMDB_LMDB_STATUS_H_

#include <filesystem>
#include <string>

#include "packrec/status.h"

namespace packrec::lmdb {

Status LmdbError(int rc, const std::string& operation, const std::filesystem::path& path);

}  // namespace packrec::lmdb

#endif  // PACKREC_FORMATS_LMDB_LMDB_STATUS_H_
