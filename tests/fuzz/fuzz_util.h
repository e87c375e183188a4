// Shared by the fuzz targets: a scratch directory for the process (emptied per input), and reading
// a dataset through every reader entry point (open, Read, ForEach, Verify), so the bytes reach
// every check.
#ifndef PACKREC_TESTS_FUZZ_FUZZ_UTIL_H_
#define PACKREC_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "packrec/reader.h"

namespace packrec::fuzz {

// One directory per process, under TMPDIR, removed at exit.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path path = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
                                 ("packrec-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchDir(), ignored);
    });
    return path;
  }();
  return dir;
}

// ScratchDir()/name, emptied: each input starts from nothing the last one left.
inline std::filesystem::path FreshDir(const std::string& name) {
  const std::filesystem::path dir = ScratchDir() / name;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir);
  return dir;
}

class Quiet final : public VerifyReporter {
 public:
  void Report(const VerifyProblem&) override {}
};

// Opens `path` and reads all of it every way a loader would; errors are fine, crashes are not.
inline void ReadEverything(const std::filesystem::path& path) {
  Result<std::unique_ptr<Reader>> reader = OpenDataset(path);
  if (!reader.ok()) return;
  ReadScratch scratch;
  const std::uint64_t count = std::min<std::uint64_t>((*reader)->size(), 256);
  for (std::uint64_t i = 0; i < count; ++i) (void)(*reader)->Read(i, scratch);
  (void)(*reader)->Read(count + 7, scratch);  // past the end
  (void)(*reader)->ForEach([](const RecordView&) { return Status::OK(); });
  Quiet quiet;
  (void)(*reader)->Verify(quiet);
}

}  // namespace packrec::fuzz

#endif  // PACKREC_TESTS_FUZZ_FUZZ_UTIL_H_
