#include "lmdb/lmdb_status.h"

#include <lmdb.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "core/endian.h"
#include "core/file_io.h"

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

namespace {

// LMDB's meta page (mdb.c, file format version 1, unchanged since 0.9): a 16-byte page header,
// then MDB_meta { u32 magic; u32 version; void* address; size_t mapsize; MDB_db dbs[2];
// pgno_t last_pg; txnid_t txnid; } with 48-byte MDB_db records whose first field (md_pad) holds
// the page size in the free-page database. Native byte order, 64-bit: what liblmdb writes here.
constexpr std::size_t kMetaOffset = 16;
constexpr std::uint32_t kMetaMagic = 0xBEEFC0DE;
constexpr std::size_t kPageSizeOffset = kMetaOffset + 24;
constexpr std::size_t kLastPageOffset = kMetaOffset + 120;
constexpr std::size_t kTxnIdOffset = kMetaOffset + 128;
constexpr std::size_t kMetaBytes = kTxnIdOffset + 8;

struct Meta {
  bool valid = false;
  std::uint32_t page_size = 0;
  std::uint64_t last_page = 0;
  std::uint64_t txn_id = 0;
};

Meta ParseMeta(std::span<const std::byte> page) {
  Meta meta;
  if (page.size() < kMetaBytes || LoadLE<std::uint32_t>(page.data() + kMetaOffset) != kMetaMagic) {
    return meta;
  }
  meta.page_size = LoadLE<std::uint32_t>(page.data() + kPageSizeOffset);
  meta.last_page = LoadLE<std::uint64_t>(page.data() + kLastPageOffset);
  meta.txn_id = LoadLE<std::uint64_t>(page.data() + kTxnIdOffset);
  // Page sizes LMDB uses: a power of two from 4 KiB (its minimum) to 64 KiB.
  meta.valid = meta.page_size >= 4096 && meta.page_size <= 65536 &&
               (meta.page_size & (meta.page_size - 1)) == 0;
  return meta;
}

}  // namespace

Status CheckDataFileWhole(const std::filesystem::path& data_file) {
  PACKREC_ASSIGN_OR_RETURN(const std::unique_ptr<RandomAccessFile> file,
                           RandomAccessFile::Open(data_file));
  PACKREC_ASSIGN_OR_RETURN(const std::uint64_t size, file->RegularFileSize());
  std::array<std::byte, kMetaBytes> page{};
  if (size < page.size()) {
    // Not even a meta page: LMDB itself says only "Bad file descriptor" of an empty file.
    return Status::Truncated("lmdb " + data_file.string() + " is " + std::to_string(size) +
                             " bytes, too short for LMDB's first meta page: the file was cut "
                             "short or never written");
  }
  PACKREC_RETURN_IF_ERROR(file->ReadExact(0, page));
  const Meta first = ParseMeta(page);
  if (!first.valid) return Status::OK();
  Meta newest = first;
  if (size >= std::uint64_t{first.page_size} + page.size()) {
    PACKREC_RETURN_IF_ERROR(file->ReadExact(first.page_size, page));
    const Meta second = ParseMeta(page);
    const bool second_is_meta = LoadLE<std::uint32_t>(page.data() + kMetaOffset) == kMetaMagic;
    // liblmdb takes the newer meta's page size for the whole map, without checking it: a wrong
    // one puts page 1 (and every page after it) past the end of the file, where the first read
    // transaction raised SIGBUS.
    if (second_is_meta && second.txn_id > first.txn_id && second.page_size != first.page_size) {
      return Status::Corruption("lmdb " + data_file.string() + ": its newer meta page (page 1) " +
                                "gives a page size of " + std::to_string(second.page_size) +
                                " bytes, where page 0 gives " + std::to_string(first.page_size))
          .WithPath(data_file.string())
          .WithByteOffset(first.page_size);
    }
    if (second.valid && second.txn_id > first.txn_id) newest = second;
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
