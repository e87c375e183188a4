#include "core/output_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/file_io.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

// Marks a staging directory as ours, so a leftover of a killed run may be removed.
constexpr char kStagingMarker[] = ".packrec-staging";
// Marks an existing directory an export is written into in place (it may be a mount point, which
// cannot be staged beside): its contents are the run's, so a leftover of a killed run may be
// emptied. Not kStagingMarker, which Commit's rename can leave in a finished output.
constexpr char kInPlaceMarker[] = ".packrec-writing";

// "out/" names the directory "out": its staging directory is a sibling, not inside it.
fs::path WithoutTrailingSlash(const fs::path& dir) {
  return dir.has_filename() || !dir.has_parent_path() ? dir : dir.parent_path();
}

fs::path StagingPath(const fs::path& dir) {
  fs::path staging = WithoutTrailingSlash(dir);
  staging += ".packrec-staging";
  return staging;
}

// Opens a run's marker (`create`: a new one) and takes its flock for as long as the descriptor
// is open; -1 (errno set) when it cannot be opened. A file system without flock (some network
// ones) only loses the check for a live run.
int LockMarker(const fs::path& marker, bool create) {
  const int flags = O_RDONLY | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  const int fd = ::open(marker.c_str(), flags, 0644);
  if (fd >= 0) ::flock(fd, LOCK_EX | LOCK_NB);
  return fd;
}

// Whether another live run holds a marker's lock (LockMarker).
bool HeldByLiveRun(const fs::path& marker) {
  const ScopedFd fd(::open(marker.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.get() >= 0 && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
}

}  // namespace

fs::path OutputLock::LockFilePath(const fs::path& output) {
  std::error_code error;
  // Canonical, so two spellings of one output (a relative path, a symlinked parent, a trailing
  // slash) meet at one lock file.
  fs::path target = fs::absolute(WithoutTrailingSlash(output), error).lexically_normal();
  target = WithoutTrailingSlash(target);
  const fs::path canonical = fs::weakly_canonical(target, error);
  if (!error) target = WithoutTrailingSlash(canonical);
  return target.parent_path() / ("." + target.filename().string() + ".packrec-lock");
}

namespace {

// The refusal a second run gets: the holder's pid when its lock file names it.
Status HeldElsewhere(const fs::path& output, const fs::path& lock_file) {
  std::string holder = "another packrec run";
  if (!lock_file.empty()) {
    const ScopedFd fd(::open(lock_file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    char text[32] = {};
    if (fd.get() >= 0) {
      const ssize_t got = ::pread(fd.get(), text, sizeof text - 1, 0);
      unsigned long pid = 0;
      if (got > 0 && std::sscanf(text, "pid %lu", &pid) == 1 && pid > 0) {
        holder += " (pid " + std::to_string(pid) + ")";
      }
    }
  }
  return Status::AlreadyExists(output.string() + " is being written by " + holder +
                               "; wait for it to finish, or stop it first");
}

bool SameFile(int fd, const fs::path& path) {
  struct stat held {};
  struct stat named {};
  return ::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

}  // namespace

Result<OutputLock> OutputLock::Acquire(const fs::path& output) {
  const fs::path lock_file = LockFilePath(output);
  // The output's missing parents are created here (the run writes there anyway), and removed
  // again on release if the run left nothing in them: a refused run creates nothing.
  std::vector<fs::path> created;
  {
    std::error_code error;
    for (fs::path missing = lock_file.parent_path();
         !missing.empty() && !fs::exists(fs::symlink_status(missing, error));
         missing = missing.parent_path()) {
      created.push_back(missing);
      if (missing == missing.parent_path()) break;
    }
    fs::create_directories(lock_file.parent_path(), error);
    if (error) return ErrnoStatus("create directory", lock_file.parent_path(), error.value());
  }
  OutputLock lock;
  lock.created_dirs_ = std::move(created);
  // Bounded: each retry means another run released (unlinked) the file between our open and our
  // flock, which cannot go on for ever unless runs start and finish in a tight loop.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      const int open_error = errno;
      std::error_code error;
      if ((open_error == EACCES || open_error == EROFS || open_error == EPERM) &&
          fs::is_directory(output, error)) {
        // The parent cannot hold the file: claim the existing directory itself.
        const int dir_fd = ::open(output.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0) return ErrnoStatus("open", output, errno);
        if (::flock(dir_fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
          ::close(dir_fd);
          return HeldElsewhere(output, {});
        }
        lock.fd_ = dir_fd;
        return lock;
      }
      // Named by the output, which is what the user gave (the lock file is ours).
      return ErrnoStatus("write " + output.string() + ": create its lock file", lock_file,
                         open_error);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int lock_error = errno;
      ::close(fd);
      if (lock_error == EWOULDBLOCK) return HeldElsewhere(output, lock_file);
      // No flock here (some network file systems): the check is lost, not the run.
      return lock;
    }
    if (!SameFile(fd, lock_file)) {
      ::close(fd);  // released and unlinked by its holder meanwhile: lock the new one
      continue;
    }
    const std::string text = "pid " + std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
      // The pid only words the refusal; the lock holds without it.
    }
    lock.lock_file_ = lock_file;
    lock.fd_ = fd;
    return lock;
  }
  return HeldElsewhere(output, lock_file);
}

void OutputLock::Release() {
  if (fd_ >= 0) {
    // Unlinked while held, so no run can lock the old file after we let it go (Acquire's check).
    if (!lock_file_.empty() && SameFile(fd_, lock_file_)) ::unlink(lock_file_.c_str());
    ::close(std::exchange(fd_, -1));
  }
  lock_file_.clear();
  // rmdir removes only what is empty: a directory the run wrote into stays.
  for (const fs::path& dir : created_dirs_) ::rmdir(dir.c_str());
  created_dirs_.clear();
}

OutputLock::~OutputLock() { Release(); }

OutputLock::OutputLock(OutputLock&& other) noexcept
    : lock_file_(std::move(other.lock_file_)),
      created_dirs_(std::move(other.created_dirs_)),
      fd_(std::exchange(other.fd_, -1)) {}

OutputLock& OutputLock::operator=(OutputLock&& other) noexcept {
  if (this != &other) {
    Release();
    lock_file_ = std::move(other.lock_file_);
    created_dirs_ = std::move(other.created_dirs_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Result<OutputDirectory> OutputDirectory::Prepare(const fs::path& dir, const char* marker_file,
                                                 bool overwrite, OutputKind kind) {
  OutputDirectory out;
  out.final_dir_ = WithoutTrailingSlash(dir);
  out.write_dir_ = out.final_dir_;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(dir, error);
  if (!fs::exists(status)) {
    if (kind == OutputKind::kExport) {
      const fs::path parent = StagingPath(dir).parent_path();
      if (!parent.empty()) {
        fs::create_directories(parent, error);
        if (error) return ErrnoStatus("create directory", parent, error.value());
      }
      PACKREC_RETURN_IF_ERROR(out.ClaimStaging());
      return out;
    }
    fs::create_directories(dir, error);
    if (error) return ErrnoStatus("create directory", dir, error.value());
    out.created_ = true;
    return out;
  }
  if (!fs::is_directory(fs::status(dir, error))) {
    return Status::AlreadyExists(dir.string() + " exists and is not a directory");
  }
  // A run killed while writing its first journal leaves only that journal's temporary file.
  const fs::path first_journal = dir / (std::string(kResumeJournalName) + ".tmp");
  if (fs::exists(first_journal, error) && !fs::exists(dir / kResumeJournalName, error)) {
    std::size_t entries = 0;
    for (auto it = fs::directory_iterator(dir, error); !error && it != fs::directory_iterator();
         it.increment(error)) {
      ++entries;
    }
    if (entries == 1) fs::remove(first_journal, error);
  }
  const fs::path in_place = dir / kInPlaceMarker;
  if (fs::exists(in_place, error)) {
    if (HeldByLiveRun(in_place)) {
      return Status::AlreadyExists(dir.string() + " is being written by another packrec run");
    }
    // An export a killed run was writing in place: all of it is that run's.
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
      fs::remove_all(entry.path(), error);
      if (error) return ErrnoStatus("remove", entry.path(), error.value());
    }
  }
  if (fs::is_empty(dir, error)) {
    if (kind == OutputKind::kExport) PACKREC_RETURN_IF_ERROR(out.ClaimInPlace());
    return out;
  }
  if (fs::exists(dir / kResumeJournalName, error)) {
    if (!overwrite) {
      return Status::AlreadyExists(dir.string() + " holds an interrupted conversion")
          .WithRemedy(Remedy::kResumeOrOverwrite);
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
      fs::remove_all(entry.path(), error);
      if (error) return ErrnoStatus("remove", entry.path(), error.value());
    }
    return out;
  }
  if (!fs::exists(dir / marker_file, error)) {
    if (error) return ErrnoStatus("stat", dir / marker_file, error.value());
    return Status::AlreadyExists(dir.string() +
                                 " exists, is not empty and is not a packrec dataset; refusing "
                                 "to write into it (choose another output path)");
  }
  if (!overwrite) {
    return Status::AlreadyExists(dir.string() + " already holds a dataset")
        .WithRemedy(Remedy::kOverwriteToReplace);
  }
  PACKREC_RETURN_IF_ERROR(out.ClaimStaging());
  return out;
}

Status OutputDirectory::ClaimStaging() {
  const fs::path staging = StagingPath(final_dir_);
  const fs::path marker = staging / kStagingMarker;
  std::error_code error;
  if (fs::exists(fs::symlink_status(staging, error))) {
    // Empty and unmarked, it may be a run's killed between creating it and its marker: rmdir
    // removes only an empty directory, so nothing of anyone's is lost.
    if (!fs::exists(marker, error)) {
      if (::rmdir(staging.c_str()) != 0) {
        return Status::AlreadyExists(staging.string() + " exists and is not packrec's; remove " +
                                     "it to write " + final_dir_.string());
      }
    } else if (HeldByLiveRun(marker)) {
      return Status::AlreadyExists(final_dir_.string() + " is being written by another packrec " +
                                   "run, through " + staging.string());
    } else {
      fs::remove_all(staging, error);  // left by a run that was killed
      if (error) return ErrnoStatus("remove", staging, error.value());
    }
  }
  if (::mkdir(staging.c_str(), 0777) != 0) {
    return ErrnoStatus("create directory", staging, errno);
  }
  const int fd = LockMarker(marker, /*create=*/true);
  if (fd < 0) {
    const int open_error = errno;
    fs::remove_all(staging, error);
    return ErrnoStatus("create", marker, open_error);
  }
  lock_fd_ = fd;
  write_dir_ = staging;
  staged_ = true;
  return Status::OK();
}

Status OutputDirectory::ClaimInPlace() {
  const fs::path marker = final_dir_ / kInPlaceMarker;
  const int fd = LockMarker(marker, /*create=*/true);
  if (fd < 0) return ErrnoStatus("create", marker, errno);
  lock_fd_ = fd;
  marked_in_place_ = true;
  return Status::OK();
}

void OutputDirectory::ReleaseLock() {
  if (lock_fd_ >= 0) ::close(std::exchange(lock_fd_, -1));
}

OutputDirectory::~OutputDirectory() { ReleaseLock(); }

OutputDirectory::OutputDirectory(OutputDirectory&& other) noexcept
    : final_dir_(std::move(other.final_dir_)),
      write_dir_(std::move(other.write_dir_)),
      created_(other.created_),
      staged_(other.staged_),
      settled_(other.settled_),
      marked_in_place_(other.marked_in_place_),
      lock_fd_(std::exchange(other.lock_fd_, -1)) {}

OutputDirectory& OutputDirectory::operator=(OutputDirectory&& other) noexcept {
  if (this != &other) {
    ReleaseLock();
    final_dir_ = std::move(other.final_dir_);
    write_dir_ = std::move(other.write_dir_);
    created_ = other.created_;
    staged_ = other.staged_;
    settled_ = other.settled_;
    marked_in_place_ = other.marked_in_place_;
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

Result<OutputDirectory> OutputDirectory::Reopen(const fs::path& dir) {
  OutputDirectory out;
  out.final_dir_ = WithoutTrailingSlash(dir);
  std::error_code error;
  if (fs::exists(dir / kResumeJournalName, error)) {
    out.write_dir_ = dir;
    return out;
  }
  const fs::path staging = StagingPath(dir);
  if (fs::exists(staging / kStagingMarker, error) &&
      fs::exists(staging / kResumeJournalName, error)) {
    if (HeldByLiveRun(staging / kStagingMarker)) {
      return Status::AlreadyExists(dir.string() + " is being written by another packrec run, " +
                                   "through " + staging.string());
    }
    out.lock_fd_ = LockMarker(staging / kStagingMarker, /*create=*/false);
    out.write_dir_ = staging;
    out.staged_ = true;
    return out;
  }
  return Status::NotFound("no interrupted conversion at " + dir.string() + " (no " +
                          kResumeJournalName + ")");
}

Status OutputDirectory::Commit() {
  if (settled_) return Status::Internal("output directory committed twice");
  settled_ = true;
  std::error_code error;
  if (!staged_) {
    if (marked_in_place_) {
      fs::remove(final_dir_ / kInPlaceMarker, error);
      ReleaseLock();
      return SyncDirectory(final_dir_);
    }
    return Status::OK();
  }
  // The marker goes with the directory and is removed from the final path after, and the lock is
  // held to then: a run killed in between leaves a whole dataset with an empty marker file in
  // it, never a staging directory without its marker, which the next run could not tell from
  // someone else's; and no new run takes the directory before it is renamed.
  if (!fs::exists(fs::symlink_status(final_dir_, error))) {
    // Nothing to replace (a new export): rename(2) is atomic too.
    PACKREC_RETURN_IF_ERROR(RenamePath(write_dir_, final_dir_));
  } else if (::renameat2(AT_FDCWD, write_dir_.c_str(), AT_FDCWD, final_dir_.c_str(),
                         RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) {
      return ErrnoStatus("exchange with " + final_dir_.string() + " the new dataset", write_dir_,
                         errno);
    }
    // A file system without the exchange: move the old one aside, then the new one in.
    fs::path old = final_dir_;
    old += ".packrec-old";
    fs::remove_all(old, error);
    PACKREC_RETURN_IF_ERROR(RenamePath(final_dir_, old));
    PACKREC_RETURN_IF_ERROR(RenamePath(write_dir_, final_dir_));
    fs::remove_all(old, error);
  } else {
    fs::remove_all(write_dir_, error);  // now the old dataset
  }
  fs::remove(final_dir_ / kStagingMarker, error);
  ReleaseLock();
  const fs::path parent = final_dir_.has_parent_path() ? final_dir_.parent_path() : ".";
  return SyncDirectory(parent);
}

void OutputDirectory::Abort() {
  if (settled_) return;
  settled_ = true;
  std::error_code ignored;
  if (staged_ || created_) {
    fs::remove_all(write_dir_, ignored);
  } else {
    // An existing directory that was empty before we wrote into it.
    for (const fs::directory_entry& entry : fs::directory_iterator(write_dir_, ignored)) {
      fs::remove_all(entry.path(), ignored);
    }
  }
  ReleaseLock();
}

}  // namespace packrec
