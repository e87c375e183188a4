// Cold cache, checked rather than assumed: POSIX_FADV_DONTNEED drops only clean pages, so a file
// written moments ago (a conversion just finished) keeps its dirty pages until they are written
// back. Eviction therefore counts what mincore still sees, and when pages stay it writes them back
// with fdatasync (the data is already the file's; this changes no byte) and evicts again.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "core/file_io.h"
#include "packrec/bench.h"

namespace packrec {
namespace {

std::uint64_t PageSize() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }

// Resident pages of an open file, through a mapping that is never touched.
Result<std::pair<std::uint64_t, std::uint64_t>> CountResident(int fd,
                                                              const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat", path, errno);
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t page = PageSize();
  const std::uint64_t pages = (size + page - 1) / page;
  if (pages == 0) return std::pair<std::uint64_t, std::uint64_t>{0, 0};
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return ErrnoStatus("mmap", path, errno);
  std::vector<unsigned char> residency(pages);
  const int rc = ::mincore(map, size, residency.data());
  const int error = errno;
  ::munmap(map, size);
  if (rc != 0) return ErrnoStatus("mincore", path, error);
  std::uint64_t resident = 0;
  for (const unsigned char flags : residency) resident += flags & 1u;
  return std::pair<std::uint64_t, std::uint64_t>{resident, pages};
}

}  // namespace

Result<std::pair<std::uint64_t, std::uint64_t>> ResidentPages(const std::filesystem::path& file) {
  const ScopedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("open", file, errno);
  return CountResident(fd.get(), file);
}

Result<CacheEviction> EvictFromPageCache(const std::vector<std::filesystem::path>& files) {
  CacheEviction eviction;
  for (const std::filesystem::path& file : files) {
    const ScopedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoStatus("open", file, errno);
    PACKREC_ASSIGN_OR_RETURN(const auto before, CountResident(fd.get(), file));
    ++eviction.files;
    eviction.pages += before.second;
    eviction.resident_before += before.first;
    if (before.first == 0) continue;
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    PACKREC_ASSIGN_OR_RETURN(auto after, CountResident(fd.get(), file));
    if (after.first > 0) {
      // Dirty pages: write them back, then drop them.
      if (::fdatasync(fd.get()) == 0) eviction.synced = true;
      ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
      PACKREC_ASSIGN_OR_RETURN(after, CountResident(fd.get(), file));
    }
    eviction.resident_after += after.first;
  }
  return eviction;
}

}  // namespace packrec
