#include "lmdb/lmdb_status.h"

#include <lmdb.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "core/file_io.h"
#include "lmdb/lmdb_pages.h"

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

Status CheckDataFileWhole(const std::filesystem::path& data_file) {
  PACKREC_ASSIGN_OR_RETURN(const std::unique_ptr<RandomAccessFile> file,
                           RandomAccessFile::Open(data_file));
  PACKREC_ASSIGN_OR_RETURN(const std::uint64_t size, file->RegularFileSize());
  std::array<std::byte, kLmdbMetaBytes> page{};
  if (size < page.size()) {
    // Not even a meta page: LMDB itself says only "Bad file descriptor" of an empty file.
    return Status::Truncated("lmdb " + data_file.string() + " is " + std::to_string(size) +
                             " bytes, too short for LMDB's first meta page: the file was cut "
                             "short or never written");
  }
  PACKREC_RETURN_IF_ERROR(file->ReadExact(0, page));
  const LmdbMeta first = ParseLmdbMeta(page);
  if (!first.is_meta || !IsLmdbPageSize(first.page_size)) return Status::OK();
  LmdbMeta newest = first;
  if (size >= std::uint64_t{first.page_size} + page.size()) {
    PACKREC_RETURN_IF_ERROR(file->ReadExact(first.page_size, page));
    const LmdbMeta second = ParseLmdbMeta(page);
    // liblmdb takes the newer meta's page size for the whole map, without checking it: a wrong
    // one puts page 1 (and every page after it) past the end of the file, where the first read
    // transaction raised SIGBUS.
    if (second.is_meta && second.txn_id > first.txn_id && second.page_size != first.page_size) {
      return Status::Corruption("lmdb " + data_file.string() + ": its newer meta page (page 1) " +
                                "gives a page size of " + std::to_string(second.page_size) +
                                " bytes, where page 0 gives " + std::to_string(first.page_size))
          .WithPath(data_file.string())
          .WithByteOffset(first.page_size);
    }
    if (second.is_meta && IsLmdbPageSize(second.page_size) && second.txn_id > first.txn_id) {
      newest = second;
    }
  }
  // Pages 0 and 1 (the metas) are always there, whatever last_pg says.
  const std::uint64_t pages = std::max<std::uint64_t>(newest.last_page + 1, 2);
  if (newest.last_page >= (std::uint64_t{1} << 48) || size / newest.page_size < pages) {
    return Status::Truncated(
        "lmdb " + data_file.string() + " is " + std::to_string(size) +
        " bytes, but LMDB's own metadata says its pages reach " +
        std::to_string(pages * newest.page_size) + " bytes (transaction " +
        std::to_string(newest.txn_id) +
        "): the file was cut short (a partial copy, a full disk or a power loss)");
  }
  return Status::OK();
}

}  // namespace packrec::lmdb
