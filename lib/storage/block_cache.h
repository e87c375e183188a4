// A bounded cache of remote objects' bytes on local disk (RemoteOptions::cache_dir), shared by
// every process on the node that reads through it (DataLoader workers, ranks): the unit is an
// aligned block of RemoteOptions::cache_block_bytes of one object (the last block of an object
// is shorter). Layout, locking and what survives a kill are in docs/remote.md ("The cache").
//
// - Nothing is downloaded twice: a missing block is filled under an exclusive lock on its own
//   byte of a lock file (OFD record locks: released by the kernel when the holder dies, so a
//   kill -9 leaves no stale lock), and a second process wanting it waits, then reads it.
// - A fill is written to a temporary file and renamed into place: a half-written block is never
//   under a block's name, and a killed fill's temporary is removed by the next eviction scan.
// - Every block carries its length and xxHash64 in a 32-byte header, checked the first time a
//   process reads the block (and after that, every record read is checked by its own checksum).
//   A block that fails is removed and fetched again.
// - The cache never holds more than its limit: before a block goes in, the oldest blocks (by
//   last use) are removed under a cache-wide lock until it fits. A reader that has a removed
//   block open keeps reading it (POSIX keeps an unlinked file's bytes while it is open). A block
//   larger than the whole limit is served from memory, not cached.
#ifndef PACKREC_LIB_STORAGE_BLOCK_CACHE_H_
#define PACKREC_LIB_STORAGE_BLOCK_CACHE_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "storage/object_store.h"

namespace packrec {

class BlockCache {
 public:
  // `objects`: the names the store's ranges use, with each one's size and a content identity
  // (the manifest's xxHash64 of the shard): a rewritten dataset gets fresh blocks.
  struct Object {
    std::string name;
    std::uint64_t size = 0;
    std::uint64_t identity = 0;
  };
  static Result<std::unique_ptr<BlockCache>> Open(std::shared_ptr<ObjectStore> store,
                                                  std::vector<Object> objects);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // As ObjectStore::Fetch, through the cache: blocks on disk are read from it, missing ones
  // fetched (all of a call's missing blocks in parallel), kept and read.
  Status Fetch(std::span<const ObjectStore::Range> ranges,
               const std::atomic<bool>* cancel = nullptr) const;

  struct Counters {
    std::uint64_t hits = 0;   // blocks read from the cache
    std::uint64_t fills = 0;  // blocks this process fetched and kept
    std::uint64_t evictions = 0;
  };
  Counters counters() const;

 private:
  BlockCache(std::shared_ptr<ObjectStore> store, std::vector<Object> objects,
             std::filesystem::path dir, int lock_fd);
  struct BlockId {
    std::size_t object = 0;
    std::uint64_t block = 0;
  };
  std::uint64_t BlockLength(const BlockId& id) const;
  std::filesystem::path BlockPath(const BlockId& id) const;
  // Reads [offset, offset + out.size()) of block `id` from its file; false when absent or bad.
  bool ReadCached(const BlockId& id, std::uint64_t offset, std::span<std::byte> out) const;
  // Fills the given missing blocks: fetched, then each kept under the lock of its byte (unless
  // another process kept it first) and copied where the ranges want it.
  Status FillBlocks(const std::vector<BlockId>& ids, std::vector<std::vector<std::byte>>& bytes,
                    const std::atomic<bool>* cancel) const;
  Status Keep(const BlockId& id, std::span<const std::byte> bytes) const;
  void MakeRoom(std::uint64_t incoming) const;
  std::size_t ObjectIndex(const std::string& name) const;

  std::shared_ptr<ObjectStore> store_;
  std::vector<Object> objects_;
  std::filesystem::path dir_;
  int lock_fd_;  // DIR/lock: byte 0 for eviction, the rest one per block being filled
  std::uint64_t block_bytes_;
  std::uint64_t limit_bytes_;
  std::vector<std::string> prefixes_;  // per object: its blocks' file name prefix

  mutable std::mutex mutex_;
  mutable std::unordered_set<std::string> verified_;  // block files this process has checked
  mutable Counters counters_;
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_BLOCK_CACHE_H_
