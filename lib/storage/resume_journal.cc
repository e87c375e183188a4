#include "storage/resume_journal.h"

#include <system_error>

#include "core/file_io.h"

namespace packrec {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kJournalVersion = 1;
}  // namespace

Status WriteResumeJournal(const fs::path& path, const ResumeJournal& journal) {
  const json document = {{"packrec_resume", kJournalVersion},
                         {"format", journal.format},
                         {"records", journal.records},
                         {"writer", journal.writer},
                         {"caller", journal.caller_state}};
  return WriteFileAtomically(path, AsBytes(document.dump(1)));
}

Result<ResumeJournal> ReadResumeJournal(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return Status::NotFound("no resume journal at " + path.string());
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, ReadWholeFile(path));
  const std::string_view text = AsText(bytes);
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return Status::Corruption("resume journal " + path.string() + ": " + why)
        .WithRemedy(Remedy::kOverwriteToRestart);
  };
  if (document.is_discarded() || !document.is_object()) return bad("not a JSON object");
  const auto version = document.find("packrec_resume");
  if (version == document.end() || !version->is_number_integer()) return bad("no packrec_resume");
  if (*version != kJournalVersion) {
    return bad("version " + version->dump() + ", this packrec reads version " +
               std::to_string(kJournalVersion));
  }
  ResumeJournal journal;
  const auto format = document.find("format");
  const auto records = document.find("records");
  const auto writer = document.find("writer");
  const auto caller = document.find("caller");
  if (format == document.end() || !format->is_string()) return bad("no format");
  if (records == document.end() || !records->is_number_unsigned()) return bad("no records");
  if (writer == document.end() || !writer->is_object()) return bad("no writer state");
  if (caller == document.end() || !caller->is_string()) return bad("no caller state");
  journal.format = format->get<std::string>();
  journal.records = records->get<std::uint64_t>();
  journal.writer = *writer;
  journal.caller_state = caller->get<std::string>();
  return journal;
}

Result<InterruptedConversion> ReopenInterrupted(const fs::path& dir, const std::string& format) {
  PACKREC_ASSIGN_OR_RETURN(OutputDirectory out, OutputDirectory::Reopen(dir));
  PACKREC_ASSIGN_OR_RETURN(ResumeJournal journal,
                           ReadResumeJournal(out.write_dir() / kResumeJournalName));
  if (journal.format != format) {
    return Status::InvalidArgument(dir.string() + " holds an interrupted " + journal.format +
                                   " conversion, not a " + format + " one");
  }
  return InterruptedConversion{std::move(out), std::move(journal)};
}

}  // namespace packrec
