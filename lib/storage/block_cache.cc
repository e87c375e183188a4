// Hand-written: no Debian library keeps a size-bounded, multi-process, crash-safe disk cache of
// byte ranges; what it needs is POSIX (OFD record locks, rename, unlink-while-open).
#include "storage/block_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "core/checksum.h"
#include "core/endian.h"
#include "core/file_io.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kBlockHeaderSize = 32;
constexpr char kBlockMagic[8] = {'P', 'K', 'R', 'B', 'L', 'O', 'C', 'K'};
constexpr char kBlockSuffix[] = ".blk";
constexpr char kTempMarker[] = ".tmp.";

// An exclusive OFD lock on one byte of `path`, on a descriptor of its own: OFD locks belong to
// the open file description, so threads of one process exclude each other too, and the kernel
// drops the lock when its holder dies.
class ByteLock {
 public:
  ByteLock(const fs::path& path, off_t byte) : fd_(::open(path.c_str(), O_RDWR | O_CLOEXEC)) {
    if (fd_ < 0) return;
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = byte;
    lock.l_len = 1;
    while (::fcntl(fd_, F_OFD_SETLKW, &lock) != 0 && errno == EINTR) {
    }
  }
  ~ByteLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the description releases its locks
  }
  ByteLock(const ByteLock&) = delete;
  ByteLock& operator=(const ByteLock&) = delete;

 private:
  int fd_;
};

// A temporary whose writer is gone (killed mid-fill): "<name>.tmp.<pid>" with no such process.
bool AbandonedTemp(const std::string& name) {
  const auto at = name.rfind(kTempMarker);
  if (at == std::string::npos) return false;
  const long pid = std::strtol(name.c_str() + at + std::strlen(kTempMarker), nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

Result<std::unique_ptr<BlockCache>> BlockCache::Open(std::shared_ptr<ObjectStore> store,
                                                     std::vector<Object> objects) {
  const RemoteOptions& options = store->options();
  const fs::path dir = options.cache_dir;
  if (options.cache_size_bytes == 0) {
    return Status::InvalidArgument("the cache at " + dir.string() + " needs a size limit");
  }
  if (options.cache_block_bytes < 4096) {
    return Status::InvalidArgument("the cache's block size must be at least 4096 bytes");
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return Status::IOError("cannot create the cache directory " + dir.string() + ": " +
                           error.message());
  }
  const fs::path lock_path = dir / "lock";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return Status::IOError("cannot open " + lock_path.string() + ": " + std::strerror(errno));
  }
  return std::unique_ptr<BlockCache>(
      new BlockCache(std::move(store), std::move(objects), dir, lock_fd));
}

BlockCache::BlockCache(std::shared_ptr<ObjectStore> store, std::vector<Object> objects,
                       fs::path dir, int lock_fd)
    : store_(std::move(store)),
      objects_(std::move(objects)),
      dir_(std::move(dir)),
      lock_fd_(lock_fd),
      block_bytes_(store_->options().cache_block_bytes),
      limit_bytes_(store_->options().cache_size_bytes) {
  for (const Object& object : objects_) {
    // The dataset's URL, the object and its content identity: a rewritten dataset at the same
    // URL gets blocks of its own, and the old ones age out.
    const std::string identity = store_->NameUrl(object.name) + "\n" + std::to_string(object.size) +
                                 "\n" + Hex64(object.identity);
    prefixes_.push_back(Hex64(Xxh64(identity)) + "-" + std::to_string(block_bytes_));
  }
}

BlockCache::~BlockCache() { ::close(lock_fd_); }

std::size_t BlockCache::ObjectIndex(const std::string& name) const {
  for (std::size_t i = 0; i < objects_.size(); ++i) {
    if (objects_[i].name == name) return i;
  }
  return objects_.size();
}

std::uint64_t BlockCache::BlockLength(const BlockId& id) const {
  const std::uint64_t begin = id.block * block_bytes_;
  return std::min(block_bytes_, objects_[id.object].size - begin);
}

fs::path BlockCache::BlockPath(const BlockId& id) const {
  return dir_ / (prefixes_[id.object] + "-" + std::to_string(id.block) + kBlockSuffix);
}

bool BlockCache::ReadCached(const BlockId& id, std::uint64_t offset,
                            std::span<std::byte> out) const {
  const fs::path path = BlockPath(id);
  Result<std::unique_ptr<RandomAccessFile>> file = RandomAccessFile::Open(path);
  if (!file.ok()) return false;
  const std::uint64_t length = BlockLength(id);
  bool verified = false;
  {
    std::lock_guard lock(mutex_);
    verified = verified_.contains(path.filename().string());
  }
  bool good = true;
  if (!verified) {
    std::vector<std::byte> whole(kBlockHeaderSize + length);
    good = (*file)->ReadExact(0, whole).ok() &&
           std::memcmp(whole.data(), kBlockMagic, sizeof(kBlockMagic)) == 0 &&
           LoadLE<std::uint64_t>(&whole[8]) == length &&
           LoadLE<std::uint64_t>(&whole[16]) ==
               Xxh64(std::span<const std::byte>(whole).subspan(kBlockHeaderSize)) &&
           LoadLE<std::uint64_t>(&whole[24]) == Xxh64(path.filename().string());
    if (good) {
      std::copy_n(whole.begin() + static_cast<std::ptrdiff_t>(kBlockHeaderSize + offset),
                  out.size(), out.begin());
      std::lock_guard lock(mutex_);
      verified_.insert(path.filename().string());
    }
  } else {
    good = (*file)->ReadExact(kBlockHeaderSize + offset, out).ok();
  }
  if (good) {
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // last use, for eviction
  } else {
    ::unlink(path.c_str());  // damaged or cut short: fetched again
  }
  if (good) {
    std::lock_guard lock(mutex_);
    ++counters_.hits;
  }
  return good;
}

void BlockCache::MakeRoom(std::uint64_t incoming) const {
  struct Entry {
    fs::path path;
    std::uint64_t size = 0;
    std::int64_t used_ns = 0;
  };
  std::vector<Entry> blocks;
  std::uint64_t total = 0;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    struct stat info {};
    if (::stat(entry.path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (name.find(kTempMarker) != std::string::npos) {
      if (AbandonedTemp(name)) {
        ::unlink(entry.path().c_str());
        continue;
      }
      total += static_cast<std::uint64_t>(info.st_size);  // a fill in progress
      continue;
    }
    if (!name.ends_with(kBlockSuffix)) continue;
    const std::int64_t used = info.st_mtim.tv_sec * 1000000000LL + info.st_mtim.tv_nsec;
    blocks.push_back({entry.path(), static_cast<std::uint64_t>(info.st_size), used});
    total += static_cast<std::uint64_t>(info.st_size);
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const Entry& a, const Entry& b) { return a.used_ns < b.used_ns; });
  for (const Entry& block : blocks) {
    if (total + incoming <= limit_bytes_) break;
    if (::unlink(block.path.c_str()) == 0) {
      total -= block.size;
      std::lock_guard lock(mutex_);
      ++counters_.evictions;
    }
  }
}

Status BlockCache::Keep(const BlockId& id, std::span<const std::byte> bytes) const {
  const std::uint64_t file_size = kBlockHeaderSize + bytes.size();
  if (file_size > limit_bytes_) return Status::OK();  // served from memory, never cached
  std::array<std::byte, kBlockHeaderSize> header{};
  std::memcpy(header.data(), kBlockMagic, sizeof(kBlockMagic));
  StoreLE<std::uint64_t>(&header[8], bytes.size());
  StoreLE<std::uint64_t>(&header[16], Xxh64(bytes));
  const fs::path path = BlockPath(id);
  // Which block this is (its file name: the object's identity and the block's index): a block
  // file copied or renamed over another's is a miss, fetched again, not that block's bytes.
  StoreLE<std::uint64_t>(&header[24], Xxh64(path.filename().string()));
  const fs::path temp = path.string() + kTempMarker + std::to_string(::getpid());
  // Room is made and the block written under the cache-wide lock (byte 0), so concurrent fills
  // of several processes cannot together pass the limit.
  ByteLock evicting(dir_ / "lock", 0);
  MakeRoom(file_size);
  Status written = [&]() -> Status {
    PACKREC_ASSIGN_OR_RETURN(const std::unique_ptr<WritableFile> file, WritableFile::Create(temp));
    PACKREC_RETURN_IF_ERROR(file->Append(header));
    PACKREC_RETURN_IF_ERROR(file->Append(bytes));
    PACKREC_RETURN_IF_ERROR(file->Close());
    return RenamePath(temp, path);
  }();
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return written;
  }
  std::lock_guard lock(mutex_);
  verified_.insert(path.filename().string());
  ++counters_.fills;
  return Status::OK();
}

Status BlockCache::FillBlocks(const std::vector<BlockId>& ids,
                              std::vector<std::vector<std::byte>>& bytes,
                              const std::atomic<bool>* cancel) const {
  // One lock per distinct lock byte, taken in order (two processes filling overlapping sets
  // cannot deadlock); a block hashed onto a byte another block of this call holds shares it.
  std::map<off_t, std::unique_ptr<ByteLock>> locks;
  for (const BlockId& id : ids) {
    const off_t byte =
        1 + static_cast<off_t>(Xxh64(BlockPath(id).filename().string()) % (1u << 30));
    locks.emplace(byte, nullptr);
  }
  for (auto& [byte, lock] : locks) lock = std::make_unique<ByteLock>(dir_ / "lock", byte);
  // Another process may have filled some while this one waited for their locks.
  std::vector<ObjectStore::Range> fetches;
  std::vector<std::size_t> fetched;
  bytes.resize(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    bytes[i].resize(BlockLength(ids[i]));
    if (ReadCached(ids[i], 0, bytes[i])) continue;
    fetches.push_back({objects_[ids[i].object].name, ids[i].block * block_bytes_, bytes[i]});
    fetched.push_back(i);
  }
  PACKREC_RETURN_IF_ERROR(store_->Fetch(fetches, cancel));
  for (const std::size_t i : fetched) {
    // A block that cannot be kept (disk full) is still served from memory.
    (void)Keep(ids[i], bytes[i]);
  }
  return Status::OK();
}

Status BlockCache::Fetch(std::span<const ObjectStore::Range> ranges,
                         const std::atomic<bool>* cancel) const {
  struct Piece {
    std::span<std::byte> out;
    std::uint64_t offset_in_block = 0;
  };
  std::map<std::pair<std::size_t, std::uint64_t>, std::vector<Piece>> missing;
  for (const ObjectStore::Range& range : ranges) {
    const std::size_t object = ObjectIndex(range.name);
    if (object == objects_.size()) {
      PACKREC_RETURN_IF_ERROR(store_->Fetch({&range, 1}, cancel));  // not a cached object
      continue;
    }
    for (std::uint64_t at = 0; at < range.out.size();) {
      const std::uint64_t offset = range.offset + at;
      const BlockId id{object, offset / block_bytes_};
      const std::uint64_t in_block = offset - id.block * block_bytes_;
      const std::uint64_t take =
          std::min<std::uint64_t>(range.out.size() - at, BlockLength(id) - in_block);
      const std::span<std::byte> out = range.out.subspan(at, take);
      if (!ReadCached(id, in_block, out)) missing[{id.object, id.block}].push_back({out, in_block});
      at += take;
    }
  }
  if (missing.empty()) return Status::OK();
  std::vector<BlockId> ids;
  for (const auto& [key, pieces] : missing) ids.push_back({key.first, key.second});
  std::vector<std::vector<std::byte>> bytes;
  PACKREC_RETURN_IF_ERROR(FillBlocks(ids, bytes, cancel));
  std::size_t i = 0;
  for (const auto& [key, pieces] : missing) {
    for (const Piece& piece : pieces) {
      std::copy_n(bytes[i].begin() + static_cast<std::ptrdiff_t>(piece.offset_in_block),
                  piece.out.size(), piece.out.begin());
    }
    ++i;
  }
  return Status::OK();
}

BlockCache::Counters BlockCache::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace packrec
