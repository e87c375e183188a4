// Where a dataset is written, and how it becomes visible, without ever deleting something that is
// not ours and without losing an existing dataset to a failed replacement.
#ifndef PACKREC_LIB_CORE_OUTPUT_DIR_H_
#define PACKREC_LIB_CORE_OUTPUT_DIR_H_

#include <filesystem>
#include <vector>

#include "packrec/status.h"

namespace packrec {

// The resume journal of an interrupted conversion (storage/resume_journal.h): inside a dataset
// directory (shard, lmdb); beside an HDF5 file, as FILE + kResumeJournalSuffix.
inline constexpr char kResumeJournalName[] = "resume.json";
inline constexpr char kResumeJournalSuffix[] = ".resume.json";

// One run's claim on an output path (a dataset directory, an HDF5 file, an export, a part), held
// from before anything at the path is read or written until the run has committed, kept or
// aborted it: a second run on the same path (a --resume or --overwrite while the first still
// writes, one --part submitted twice) is refused before it touches anything, instead of
// destroying what the first is writing.
//
// The claim is an flock(2) on the hidden file `.NAME.packrec-lock` beside the output (in its
// parent directory, which outlives the staging swaps and renames of the output itself). The
// holder writes its pid into the file, so the refusal names the live run. Release unlinks the
// file while still holding the lock; Acquire checks that the file it locked is still the one at
// the path, so a run that opened the file just before it was unlinked retries instead of sharing
// a claim. A killed run leaves the file behind, unlocked: the next run takes it over. Where the
// parent cannot hold the file (read-only, no permission) and the output is an existing directory
// (a mount point written in place), the directory itself is flock()ed instead. File systems
// without flock (some network ones) lose only the check.
class OutputLock {
 public:
  // AlreadyExists when another live run holds `output`, naming it (and its pid when known).
  static Result<OutputLock> Acquire(const std::filesystem::path& output);

  OutputLock() = default;
  ~OutputLock();
  OutputLock(OutputLock&& other) noexcept;
  OutputLock& operator=(OutputLock&& other) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // The lock file's path (empty when the directory itself is locked).
  static std::filesystem::path LockFilePath(const std::filesystem::path& output);

 private:
  void Release();

  std::filesystem::path lock_file_;  // unlinked on release; empty for a directory lock
  // Parents of the output that Acquire created, deepest first: removed on release when empty.
  std::vector<std::filesystem::path> created_dirs_;
  int fd_ = -1;
};

class OutputDirectory {
 public:
  // What is written, which decides how a missing or empty `dir` is written. A dataset is written
  // in place: its resume journal marks an interrupted run, which --resume continues. An export
  // has no resume point: a missing `dir` is staged beside it and appears only when whole; an
  // existing empty one (perhaps a mount point, which cannot be staged beside) is written in place
  // under a `.packrec-writing` marker. Either way what a killed run left is removed by the next.
  enum class OutputKind { kDataset, kExport };

  // For the dataset directory `dir`, whose presence is marked by `marker_file` (its manifest):
  // - missing: created (with parents), written in place; an export is written to the staging
  //   directory and renamed to `dir` by Commit.
  // - an empty directory, or one holding only an export a dead run was writing in place: written
  //   in place (emptied first).
  // - a packrec dataset and `overwrite`: the new dataset is written to a sibling staging
  //   directory and swapped in by Commit, so the old one survives a failed or interrupted run.
  // - an interrupted conversion (it holds a resume journal): with `overwrite` emptied and written
  //   in place; otherwise AlreadyExists, saying to pass --resume or --overwrite.
  // - anything else: AlreadyExists ("pass --overwrite", or not a dataset); nothing is touched.
  // A staging directory or an in-place export is this run's while it lives (an flock on its
  // marker): one left by a run that is gone is removed, one another live run is writing is
  // refused (AlreadyExists).
  static Result<OutputDirectory> Prepare(const std::filesystem::path& dir, const char* marker_file,
                                         bool overwrite, OutputKind kind = OutputKind::kDataset);
  // The directory an interrupted conversion of `dir` was writing: `dir` itself, or its staging
  // directory when it was replacing a dataset there; the one holding a resume journal. NotFound
  // when neither does.
  static Result<OutputDirectory> Reopen(const std::filesystem::path& dir);

  OutputDirectory() = default;
  ~OutputDirectory();
  OutputDirectory(OutputDirectory&& other) noexcept;
  OutputDirectory& operator=(OutputDirectory&& other) noexcept;
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  // Where the files go until Commit.
  const std::filesystem::path& write_dir() const { return write_dir_; }
  const std::filesystem::path& final_dir() const { return final_dir_; }
  // Makes what was written visible at the final path: nothing to do when written in place; an
  // atomic exchange with the old dataset (which is then removed), or a rename where there was
  // none, when staged.
  Status Commit();
  // Removes everything written; the final path is left as it was before Prepare.
  void Abort();
  // Leaves what was written where it is (a resumable conversion keeping its resume point).
  void Keep() { settled_ = true; }

 private:
  // Creates and locks the staging directory of final_dir_, removing one a dead run left.
  Status ClaimStaging();
  // Creates and locks the in-place marker in final_dir_ (an export into an empty directory).
  Status ClaimInPlace();
  void ReleaseLock();

  std::filesystem::path final_dir_;
  std::filesystem::path write_dir_;
  bool created_ = false;          // final_dir_ did not exist
  bool staged_ = false;           // written through write_dir_, a staging directory
  bool settled_ = false;          // committed or aborted: nothing more to do
  bool marked_in_place_ = false;  // an export written in place, under its marker
  int lock_fd_ = -1;  // the staging or in-place marker, open and flock()ed while this run writes
};

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_OUTPUT_DIR_H_
