#include "core/file_io.h"

#include "core/checksum.h"
#include "core/threads.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace packrec {
namespace {

constexpr std::size_t kWriteBufferBytes = 1u << 20;

std::int64_t MtimeNs(const struct stat& st) {
  return std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

int WriteAll(int fd, const std::byte* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

Status ErrnoStatus(std::string_view operation, const std::filesystem::path& path, int error) {
  std::string message(operation);
  message += " ";
  message += path.string();
  message += ": ";
  message += std::strerror(error);
  if (error == ENOENT) return Status::NotFound(std::move(message));
  return Status::IOError(std::move(message));
}

Result<bool> IsRegularFile(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return S_ISREG(info.st_mode);
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return ErrnoStatus("stat", path, errno);
}

Result<std::vector<std::byte>> ReadWholeFile(const std::filesystem::path& path) {
  return ReadWholeFile(path, nullptr);
}

Result<std::vector<std::byte>> ReadWholeFile(const std::filesystem::path& path, FileStamp* stamp) {
  PACKREC_ASSIGN_OR_RETURN(const auto file, RandomAccessFile::Open(path));
  PACKREC_ASSIGN_OR_RETURN(const std::uint64_t size, file->RegularFileSize());
  std::vector<std::byte> bytes(size);
  PACKREC_RETURN_IF_ERROR(file->ReadExact(0, bytes));
  // A file being written while it is read would be stored half old, half new.
  PACKREC_RETURN_IF_ERROR(file->CheckUnchanged());
  if (stamp != nullptr) *stamp = file->Stamp();
  return bytes;
}

Result<FileStamp> StampOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
  return FileStamp{static_cast<std::uint64_t>(st.st_size), MtimeNs(st)};
}

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

Result<std::unique_ptr<WritableFile>> WritableFile::Create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create", path, errno);
  return std::unique_ptr<WritableFile>(new WritableFile(path, fd));
}

Result<std::unique_ptr<WritableFile>> WritableFile::OpenAt(const std::filesystem::path& path,
                                                           std::uint64_t offset) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  if (::lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoStatus("seek", path, error);
  }
  return std::unique_ptr<WritableFile>(new WritableFile(path, fd));
}

// The write-behind thread and what it shares with the owner. One buffer at a time is in flight:
// the owner fills `buffer_` while the thread writes `in_flight`, then they swap.
struct WritableFile::WriteBehind {
  std::mutex mutex;
  std::condition_variable work_ready;
  std::condition_variable work_done;
  std::vector<std::byte> in_flight = std::vector<std::byte>(kWriteBufferBytes);
  std::size_t in_flight_size = 0;
  bool busy = false;  // in_flight holds bytes not yet written
  bool stop = false;
  Status error;  // the first failed write; every later call returns it
  std::thread thread;
};

WritableFile::WritableFile(std::filesystem::path path, int fd)
    : path_(std::move(path)), fd_(fd), buffer_(kWriteBufferBytes) {}

WritableFile::~WritableFile() {
  StopWriteBehind();
  if (fd_ >= 0) ::close(fd_);
}

void WritableFile::EnableWriteBehind() {
  assert(size_ == 0 && behind_ == nullptr);
  behind_ = std::make_unique<WriteBehind>();
  Result<std::thread> thread = StartThread("packrec-wbehind", [this, &behind = *behind_] {
    std::unique_lock lock(behind.mutex);
    while (true) {
      behind.work_ready.wait(lock, [&] { return behind.busy || behind.stop; });
      if (!behind.busy) return;
      lock.unlock();
      Status status = WriteOnly({behind.in_flight.data(), behind.in_flight_size});
      lock.lock();
      if (!status.ok() && behind.error.ok()) behind.error = std::move(status);
      behind.busy = false;
      behind.work_done.notify_one();
    }
  });
  if (thread.ok()) {
    behind_->thread = std::move(*thread);
  } else {
    behind_.reset();  // the system refused a thread: writes stay on the caller's thread
  }
}

void WritableFile::StopWriteBehind() {
  if (behind_ == nullptr || !behind_->thread.joinable()) return;
  {
    std::lock_guard lock(behind_->mutex);
    behind_->stop = true;
  }
  behind_->work_ready.notify_one();
  behind_->thread.join();
}

Status WritableFile::WriteOnly(std::span<const std::byte> bytes) {
  const int error = WriteAll(fd_, bytes.data(), bytes.size());
  if (error != 0) return ErrnoStatus("write", path_, error);
  return Status::OK();
}

Status WritableFile::Drain() {
  if (behind_ == nullptr) return Status::OK();
  std::unique_lock lock(behind_->mutex);
  behind_->work_done.wait(lock, [&] { return !behind_->busy; });
  return behind_->error;
}

Status WritableFile::FlushBuffer() {
  if (buffered_ == 0) return Status::OK();
  const std::span<const std::byte> bytes(buffer_.data(), std::exchange(buffered_, 0));
  // Hashed on this thread, where the bytes were just copied and are still in cache; hashing on
  // the write-behind thread made that the import's busiest (docs/benchmarks.md).
  if (checksum_ != nullptr) checksum_->Update(bytes);
  if (behind_ == nullptr) return WriteOnly(bytes);
  // Only this thread hands out work, so once drained the thread stays idle until the swap.
  PACKREC_RETURN_IF_ERROR(Drain());
  std::lock_guard lock(behind_->mutex);
  std::swap(buffer_, behind_->in_flight);
  behind_->in_flight_size = bytes.size();
  behind_->busy = true;
  behind_->work_ready.notify_one();
  return Status::OK();
}

void WritableFile::EnableChecksum() { checksum_ = std::make_unique<Xxh64Stream>(); }

std::uint64_t WritableFile::checksum() const {
  assert(checksum_ != nullptr && buffered_ == 0 && (behind_ == nullptr || !behind_->busy));
  return checksum_->Digest();
}

Status WritableFile::Append(std::span<const std::byte> bytes) {
  if (fd_ < 0) return Status::Internal("append to closed file " + path_.string());
  size_ += bytes.size();
  if (buffered_ + bytes.size() > buffer_.size()) {
    PACKREC_RETURN_IF_ERROR(FlushBuffer());
    if (bytes.size() >= buffer_.size()) {
      // Too big to buffer: written from the caller's memory, once the thread has caught up.
      PACKREC_RETURN_IF_ERROR(Drain());
      if (checksum_ != nullptr) checksum_->Update(bytes);
      return WriteOnly(bytes);
    }
  }
  std::memcpy(buffer_.data() + buffered_, bytes.data(), bytes.size());
  buffered_ += bytes.size();
  return Status::OK();
}

Status WritableFile::AppendZeros(std::size_t count) {
  static constexpr std::byte kZeros[4096] = {};
  while (count > 0) {
    const std::size_t chunk = std::min(count, sizeof kZeros);
    PACKREC_RETURN_IF_ERROR(Append({kZeros, chunk}));
    count -= chunk;
  }
  return Status::OK();
}

Status WritableFile::Sync() {
  PACKREC_RETURN_IF_ERROR(FlushBuffer());
  PACKREC_RETURN_IF_ERROR(Drain());
  if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
  return Status::OK();
}

Status WritableFile::Close() {
  if (fd_ < 0) return Status::OK();
  Status status = FlushBuffer();
  if (status.ok()) status = Drain();
  StopWriteBehind();
  if (::close(fd_) != 0 && status.ok()) status = ErrnoStatus("close", path_, errno);
  fd_ = -1;
  return status;
}

Result<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(
    const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO (a named pipe in an image tree) must not wait for a writer; it
  // has no effect on regular files, and RegularFileSize refuses anything else.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  return std::unique_ptr<RandomAccessFile>(new RandomAccessFile(path, fd));
}

RandomAccessFile::~RandomAccessFile() { ::close(fd_); }

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Result<std::uint64_t> RandomAccessFile::RegularFileSize() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("stat", path_, errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidInput("read " + path_.string() + ": not a regular file");
  }
  seen_size_ = st.st_size;
  seen_mtime_ns_ = MtimeNs(st);
  return static_cast<std::uint64_t>(st.st_size);
}

Status RandomAccessFile::CheckUnchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("stat", path_, errno);
  const std::int64_t mtime_ns = MtimeNs(st);
  if (seen_size_ >= 0 && (st.st_size != seen_size_ || mtime_ns != seen_mtime_ns_)) {
    return Status::InvalidInput(
        "read " + path_.string() + ": the file changed while it was read (" +
        std::to_string(seen_size_) + " bytes, now " + std::to_string(st.st_size) + ")");
  }
  return Status::OK();
}

Status RandomAccessFile::ReadExact(std::uint64_t offset, std::span<std::byte> out) const {
  std::size_t done = 0;
  while (done < out.size()) {
    PACKREC_ASSIGN_OR_RETURN(const std::size_t n, ReadSome(offset + done, out.subspan(done)));
    if (n == 0) {
      return Status::Truncated(path_.string() + ": truncated (wanted bytes up to " +
                               std::to_string(offset + out.size()) + ", file ends at " +
                               std::to_string(offset + done) + ")");
    }
    done += n;
  }
  return Status::OK();
}

Result<std::size_t> RandomAccessFile::ReadSome(std::uint64_t offset,
                                               std::span<std::byte> out) const {
  for (;;) {
    const ssize_t n = ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return ErrnoStatus("read", path_, errno);
  }
}

void RandomAccessFile::AdviseSequential(std::uint64_t offset, std::uint64_t length) const {
  // A hint only: a failure changes speed, never results.
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                  POSIX_FADV_SEQUENTIAL);
}

void RandomAccessFile::AdviseWillNeed(std::uint64_t offset, std::uint64_t length) const {
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                  POSIX_FADV_WILLNEED);  // a hint, as above
}

void MappedFile::AdviseWillNeed() const {
  if (data_ != nullptr) ::madvise(const_cast<std::byte*>(data_), size_, MADV_WILLNEED);
}

Result<MappedFile> MappedFile::Open(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO in a file's place is refused below, not waited on for ever (the flag
  // changes nothing for a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoStatus("stat", path, error);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidInput("read " + path.string() + ": not a regular file");
  }
  MappedFile file;
  file.size_ = static_cast<std::size_t>(st.st_size);
  if (file.size_ > 0) {
    void* data = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return ErrnoStatus("mmap", path, error);
    }
    file.data_ = static_cast<const std::byte*>(data);
  }
  ::close(fd);  // the mapping keeps the file open
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status RenamePath(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus("rename to " + to.string() + " from", from, errno);
  }
  return Status::OK();
}

namespace {

Status SyncPath(const std::filesystem::path& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return ErrnoStatus(std::string("open ") + what, path, errno);
  Status status;
  if (::fsync(fd) != 0) status = ErrnoStatus(std::string("fsync ") + what, path, errno);
  ::close(fd);
  return status;
}

}  // namespace

Status SyncDirectory(const std::filesystem::path& dir) {
  return SyncPath(dir, O_DIRECTORY, "directory");
}

Status SyncFile(const std::filesystem::path& file) { return SyncPath(file, 0, "file"); }

Status WriteFileAtomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);  // a leftover of an interrupted run
  PACKREC_ASSIGN_OR_RETURN(auto file, WritableFile::Create(tmp));
  Status status = file->Append(bytes);
  if (status.ok()) status = file->Sync();
  if (status.ok()) status = file->Close();
  if (status.ok()) status = RenamePath(tmp, path);
  if (!status.ok()) {
    std::filesystem::remove(tmp, ignored);
    return status;
  }
  return SyncDirectory(path.parent_path().empty() ? "." : path.parent_path());
}

Status WriteWholeFile(const std::filesystem::path& path, std::span<const std::byte> bytes,
                      bool overwrite) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status::AlreadyExists(path.string() + " exists")
          .WithRemedy(Remedy::kOverwriteToReplace);
    }
    return ErrnoStatus("create", path, errno);
  }
  const int error = WriteAll(fd, bytes.data(), bytes.size());
  const int close_error = ::close(fd) != 0 ? errno : 0;
  if (error != 0 || close_error != 0) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);  // never leave a partial file behind
    return ErrnoStatus("write", path, error != 0 ? error : close_error);
  }
  return Status::OK();
}

}  // namespace packrec
