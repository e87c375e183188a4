// The resume journal of an interrupted conversion: how many records its files hold for certain,
// the writer's own state for reopening them, and the caller's state (how far into its input it
// was). Rewritten atomically at every checkpoint; removed when the dataset is complete.
// docs/reliability.md describes it.
#ifndef PACKREC_LIB_STORAGE_RESUME_JOURNAL_H_
#define PACKREC_LIB_STORAGE_RESUME_JOURNAL_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/output_dir.h"  // kResumeJournalName
#include "packrec/status.h"

namespace packrec {

struct ResumeJournal {
  std::string format;  // the writer's format name
  std::uint64_t records = 0;
  nlohmann::json writer = nlohmann::json::object();
  std::string caller_state;
};

Status WriteResumeJournal(const std::filesystem::path& path, const ResumeJournal& journal);
// NotFound when there is none; Corrupt when it cannot be read as one.
Result<ResumeJournal> ReadResumeJournal(const std::filesystem::path& path);

// The interrupted conversion of `format` in dataset directory `dir` (shard, lmdb): where it was
// writing (OutputDirectory::Reopen) and its journal. NotFound when there is none, InvalidArgument
// when it was of another format.
struct InterruptedConversion {
  OutputDirectory out;
  ResumeJournal journal;
};
Result<InterruptedConversion> ReopenInterrupted(const std::filesystem::path& dir,
                                                const std::string& format);

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_RESUME_JOURNAL_H_
