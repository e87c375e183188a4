// Hand-written, because liblmdb offers no checked walk: mdb_env_open reads the meta pages and
// mdb_get / mdb_cursor_get trust every page they step onto (a cursor moving to the next leaf
// asserts that it is one). The layout read here is LMDB's on-disk format for 64-bit builds,
// unchanged since 0.9 (mdb.c: MDB_page, MDB_node, MDB_meta, MDB_db), which Debian 12's liblmdb0
// writes and reads; docs/formats/lmdb.md names its fields.
#include "lmdb/lmdb_pages.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/endian.h"
#include "core/file_io.h"

namespace packrec {
namespace {

constexpr std::uint32_t kMetaMagic = 0xBEEFC0DEu;
constexpr std::uint32_t kDataVersion = 1;
constexpr std::size_t kPageHeaderBytes = 16;  // pgno 8, pad 2, flags 2, lower 2, upper 2
constexpr std::size_t kNodeHeaderBytes = 8;   // lo 2, hi 2, flags 2, ksize 2
constexpr std::uint16_t kBranchPage = 0x01;
constexpr std::uint16_t kLeafPage = 0x02;
constexpr std::uint16_t kOverflowPage = 0x04;
constexpr std::uint16_t kBigDataNode = 0x01;  // the value is on overflow pages
constexpr std::uint16_t kDupDataNode = 0x04;  // a sorted-duplicates sub-page or sub-database
constexpr std::uint64_t kNoRoot = ~std::uint64_t{0};
// MDB_meta within its page: magic 4, version 4, address 8, mapsize 8, then two MDB_db of 48
// bytes (the free list's, the main database's), last page 8, transaction id 8.
constexpr std::size_t kMetaDbs = kPageHeaderBytes + 24;
constexpr std::size_t kDbBytes = 48;
constexpr std::size_t kMetaLastPage = kMetaDbs + 2 * kDbBytes;
constexpr std::size_t kMetaTxnId = kMetaLastPage + 8;
static_assert(kMetaTxnId + 8 == kLmdbMetaBytes);

class PageWalk {
 public:
  PageWalk(std::filesystem::path path, std::unique_ptr<RandomAccessFile> file)
      : path_(std::move(path)), file_(std::move(file)) {}

  Status Run() {
    PACKREC_ASSIGN_OR_RETURN(const std::uint64_t file_size, file_->RegularFileSize());
    PACKREC_ASSIGN_OR_RETURN(const LmdbMeta meta, ReadMeta(file_size));
    if (meta.main_root == kNoRoot) {
      if (meta.main_entries != 0) {
        return Bad(0, "its meta page counts entries but names no root page");
      }
      return Status::OK();
    }
    PACKREC_RETURN_IF_ERROR(Visit(meta.main_root, 1, meta.main_depth));
    if (leaf_entries_ != meta.main_entries) {
      return Bad(0, "its leaf pages hold " + std::to_string(leaf_entries_) +
                        " entries, its meta page counts " + std::to_string(meta.main_entries));
    }
    return Status::OK();
  }

 private:
  Status Bad(std::uint64_t page, const std::string& why) const {
    return Status::Corruption(path_.string() + ": LMDB page " + std::to_string(page) +
                              " (byte offset " + std::to_string(page * page_size_) + "): " + why)
        .WithPath(path_.string())
        .WithByteOffset(page * page_size_);
  }

  // Both meta pages as liblmdb's mdb_env_read_header wants them; the newer one.
  Result<LmdbMeta> ReadMeta(std::uint64_t file_size) {
    std::vector<std::byte> first(kLmdbMetaBytes);
    if (file_size < first.size()) return Bad(0, "the file is too short for a meta page");
    PACKREC_RETURN_IF_ERROR(file_->ReadExact(0, first));
    const LmdbMeta meta0 = ParseLmdbMeta(first);
    if (!IsLmdbPageSize(meta0.page_size)) return Bad(0, "its meta page gives no valid page size");
    page_size_ = meta0.page_size;
    pages_in_file_ = file_size / page_size_;
    if (pages_in_file_ < 2) return Bad(1, "the file ends before its second meta page");
    std::vector<std::byte> second(first.size());
    PACKREC_RETURN_IF_ERROR(file_->ReadExact(page_size_, second));
    const LmdbMeta meta1 = ParseLmdbMeta(second);
    for (std::uint64_t page = 0; page < 2; ++page) {
      const LmdbMeta& meta = page == 0 ? meta0 : meta1;
      if (!meta.is_meta || meta.version != kDataVersion) {
        return Bad(page, "not an LMDB meta page of data version 1 (magic or version)");
      }
      // liblmdb maps the file with the newer meta's page size, unchecked: both must agree.
      if (meta.page_size != page_size_) {
        return Bad(page, "its page size differs from the other meta page's");
      }
    }
    const bool newer_second = meta1.txn_id > meta0.txn_id;
    const LmdbMeta& meta = newer_second ? meta1 : meta0;
    const std::uint64_t meta_page = newer_second ? 1 : 0;
    last_page_ = meta.last_page;
    if (last_page_ >= pages_in_file_) {
      return Bad(meta_page, "its last page " + std::to_string(last_page_) +
                                " lies past the end of the file (" +
                                std::to_string(pages_in_file_) + " pages)");
    }
    // liblmdb's cursors hold at most 32 levels (CURSOR_STACK); a deeper tree is refused there
    // too, and the walk below recurses once per level.
    if (meta.main_root != kNoRoot && (meta.main_root < 2 || meta.main_root > last_page_ ||
                                      meta.main_depth == 0 || meta.main_depth > 32)) {
      return Bad(meta_page, "its main database names root page " + std::to_string(meta.main_root) +
                                " at depth " + std::to_string(meta.main_depth) +
                                ", outside the file");
    }
    return meta;
  }

  // Page `page` at `level` (1: the root) of a tree whose leaves are at `depth`.
  Status Visit(std::uint64_t page, std::uint16_t level, std::uint16_t depth) {
    if (page < 2 || page > last_page_) {
      return Bad(page, "a branch names it, but it lies outside the database's pages");
    }
    if (!visited_.insert(page).second) return Bad(page, "two branches name it");
    std::vector<std::byte> bytes(page_size_);
    PACKREC_RETURN_IF_ERROR(file_->ReadExact(page * page_size_, bytes));
    if (LoadLE<std::uint64_t>(bytes.data()) != page) {
      return Bad(page, "its header names page " + std::to_string(LoadLE<std::uint64_t>(&bytes[0])));
    }
    const std::uint16_t flags = LoadLE<std::uint16_t>(&bytes[10]);
    const std::uint16_t want = level == depth ? kLeafPage : kBranchPage;
    if ((flags & (kBranchPage | kLeafPage | kOverflowPage | 0x08 | 0x20 | 0x40)) != want) {
      return Bad(page, std::string("its flags are not those of a ") +
                           (want == kLeafPage ? "leaf" : "branch") + " page at level " +
                           std::to_string(level) + " of " + std::to_string(depth));
    }
    const std::size_t lower = LoadLE<std::uint16_t>(&bytes[12]);
    const std::size_t upper = LoadLE<std::uint16_t>(&bytes[14]);
    if (lower < kPageHeaderBytes + 2 || lower % 2 != 0 || upper < lower || upper > page_size_) {
      return Bad(page, "its node table (lower " + std::to_string(lower) + ", upper " +
                           std::to_string(upper) + ") is impossible");
    }
    const std::size_t keys = (lower - kPageHeaderBytes) / 2;
    if (want == kLeafPage) leaf_entries_ += keys;
    for (std::size_t i = 0; i < keys; ++i) {
      const std::size_t at = LoadLE<std::uint16_t>(&bytes[kPageHeaderBytes + 2 * i]);
      PACKREC_RETURN_IF_ERROR(CheckNode(page, bytes, i, at, upper, want == kLeafPage));
      if (want == kBranchPage) {
        const std::uint64_t child = LoadLE<std::uint16_t>(&bytes[at]) |
                                    std::uint64_t{LoadLE<std::uint16_t>(&bytes[at + 2])} << 16 |
                                    std::uint64_t{LoadLE<std::uint16_t>(&bytes[at + 4])} << 32;
        PACKREC_RETURN_IF_ERROR(Visit(child, static_cast<std::uint16_t>(level + 1), depth));
      }
    }
    return Status::OK();
  }

  // Node `i` of `page`, at offset `at`: inside the page with its key and, on a leaf, its value
  // (or the overflow run that holds it).
  Status CheckNode(std::uint64_t page, const std::vector<std::byte>& bytes, std::size_t i,
                   std::size_t at, std::size_t upper, bool leaf) {
    const std::string node = "node " + std::to_string(i);
    if (at < upper || at + kNodeHeaderBytes > page_size_) {
      return Bad(page, node + " starts at " + std::to_string(at) + ", outside its page");
    }
    const std::uint64_t data_size = LoadLE<std::uint16_t>(&bytes[at]) |
                                    std::uint64_t{LoadLE<std::uint16_t>(&bytes[at + 2])} << 16;
    const std::uint16_t flags = LoadLE<std::uint16_t>(&bytes[at + 4]);
    const std::size_t key_size = LoadLE<std::uint16_t>(&bytes[at + 6]);
    const std::size_t key_end = at + kNodeHeaderBytes + key_size;
    if (key_end > page_size_) return Bad(page, node + "'s key runs past its page");
    if (!leaf) return Status::OK();
    if ((flags & kDupDataNode) != 0) {
      return Bad(page, node + " holds sorted duplicates, which no packrec or Caffe LMDB has");
    }
    if ((flags & kBigDataNode) == 0) {
      if (key_end + data_size > page_size_) return Bad(page, node + "'s value runs past its page");
      return Status::OK();
    }
    if (key_end + 8 > page_size_) return Bad(page, node + "'s overflow page number runs past it");
    return CheckOverflow(page, node, LoadLE<std::uint64_t>(&bytes[key_end]), data_size);
  }

  Status CheckOverflow(std::uint64_t page, const std::string& node, std::uint64_t first,
                       std::uint64_t data_size) {
    if (first < 2 || first > last_page_) {
      return Bad(page, node + " names overflow page " + std::to_string(first) +
                           ", outside the database's pages");
    }
    std::byte header[kPageHeaderBytes];
    PACKREC_RETURN_IF_ERROR(file_->ReadExact(first * page_size_, header));
    const std::uint64_t count = LoadLE<std::uint32_t>(&header[12]);
    if (LoadLE<std::uint64_t>(&header[0]) != first ||
        (LoadLE<std::uint16_t>(&header[10]) & kOverflowPage) == 0) {
      return Bad(first, "the overflow page of " + node + " of page " + std::to_string(page) +
                            " is not one");
    }
    if (count == 0 || first + count - 1 > last_page_ ||
        data_size + kPageHeaderBytes > count * std::uint64_t{page_size_}) {
      return Bad(first, "its overflow run of " + std::to_string(count) + " pages cannot hold the " +
                            std::to_string(data_size) + "-byte value of " + node + " of page " +
                            std::to_string(page) + " inside the file");
    }
    return Status::OK();
  }

  std::filesystem::path path_;
  std::unique_ptr<RandomAccessFile> file_;
  std::uint32_t page_size_ = 0;
  std::uint64_t pages_in_file_ = 0;
  std::uint64_t last_page_ = 0;
  std::uint64_t leaf_entries_ = 0;
  std::unordered_set<std::uint64_t> visited_;
};

}  // namespace

LmdbMeta ParseLmdbMeta(std::span<const std::byte> page) {
  LmdbMeta meta;
  if (page.size() < kLmdbMetaBytes) return meta;
  meta.is_meta = LoadLE<std::uint32_t>(&page[kPageHeaderBytes]) == kMetaMagic;
  meta.version = LoadLE<std::uint32_t>(&page[kPageHeaderBytes + 4]);
  meta.page_size = LoadLE<std::uint32_t>(&page[kMetaDbs]);  // the free list's md_pad
  meta.last_page = LoadLE<std::uint64_t>(&page[kMetaLastPage]);
  meta.txn_id = LoadLE<std::uint64_t>(&page[kMetaTxnId]);
  const std::byte* main = &page[kMetaDbs + kDbBytes];
  meta.main_depth = LoadLE<std::uint16_t>(main + 6);
  meta.main_entries = LoadLE<std::uint64_t>(main + 32);
  meta.main_root = LoadLE<std::uint64_t>(main + 40);
  return meta;
}

bool IsLmdbPageSize(std::uint32_t size) {
  return size >= 4096 && size <= 65536 && (size & (size - 1)) == 0;
}

Status CheckLmdbPages(const std::filesystem::path& data_file) {
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                           RandomAccessFile::Open(data_file));
  return PageWalk(data_file, std::move(file)).Run();
}

}  // namespace packrec
