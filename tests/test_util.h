// Helpers shared by the tests: temporary directories, real images, byte surgery, running the CLI.
#ifndef PACKREC_TESTS_TEST_UTIL_H_
#define PACKREC_TESTS_TEST_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "packrec/status.h"

namespace packrec::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

std::vector<std::byte> ReadBytes(const std::filesystem::path& path);
void WriteBytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);
void WriteText(const std::filesystem::path& path, const std::string& text);
void FlipByte(const std::filesystem::path& path, std::uint64_t offset);
void TruncateFile(const std::filesystem::path& path, std::uint64_t size);

// A real JPEG (libjpeg-turbo) of the given size; `seed` varies the content.
std::vector<std::byte> MakeJpeg(std::uint32_t width, std::uint32_t height, std::uint64_t seed,
                                bool gray = false, bool progressive = false);
// A real PNG (libpng) of the given size, RGB.
std::vector<std::byte> MakePng(std::uint32_t width, std::uint32_t height, std::uint64_t seed);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs the packrec CLI with `args` (already shell-quoted where needed).
CommandResult RunCli(const std::string& args);
// As RunCli, with stdout alone in `output` (stderr discarded): what a script parsing it sees.
CommandResult RunCliStdout(const std::string& args);
std::string Quote(const std::filesystem::path& path);
// Starts the packrec CLI with `args` (one argument each, no quoting) without waiting for it; its
// stdout and stderr go to `output` (/dev/null when empty). Reap it with WaitForCli.
pid_t SpawnCli(const std::vector<std::string>& args, const std::filesystem::path& output = {});
// Waits for a process SpawnCli started: its exit code, or 128 + the signal that ended it.
int WaitForCli(pid_t pid);

// A tmpfs of `size` (mount's syntax: "1m") mounted at `path` (created), unmounted on
// destruction. mounted() is false where the test may not mount one (not root): skip then.
class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::filesystem::path& path, const std::string& size);
  ~ScopedTmpfs();
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  bool RemountReadOnly() const;

 private:
  std::filesystem::path path_;
  bool mounted_ = false;
};

// Every regular file under `root`, as relative path -> bytes.
std::vector<std::pair<std::string, std::vector<std::byte>>> SnapshotTree(
    const std::filesystem::path& root);

}  // namespace packrec::test

#endif  // PACKREC_TESTS_TEST_UTIL_H_
