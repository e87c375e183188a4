// Where lib/ reaches the formats: each storage format's probe, opener and writer factory, and the
// export writers (source_registry.cc reaches their import sources).
#include <array>
#include <string>
#include <system_error>

#include "dataset/resume_journal.h"
#include "hdf5/hdf5_format.h"
#include "lmdb/lmdb_format.h"
#include "packrec/reader.h"
#include "packrec/writer.h"
#include "recordio/recordio_format.h"
#include "shard/shard_format.h"
#include "tfrecord/tfrecord_format.h"
#include "wds/wds_format.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

struct FormatEntry {
  const char* name;
  Result<bool> (*looks_like)(const fs::path&);
  Result<std::unique_ptr<Reader>> (*open)(const fs::path&, const OpenOptions&);
  Result<std::unique_ptr<DatasetWriter>> (*create)(const fs::path&, const WriterOptions&);
  Result<ResumedWriter> (*resume)(const fs::path&, const WriterOptions&);
};

constexpr std::array<FormatEntry, 3> kFormats = {{
    {"shard", shard::LooksLikeShardDataset, shard::OpenShardDataset, shard::CreateShardWriter,
     shard::ResumeShardWriter},
    {"lmdb", lmdb::LooksLikeLmdbDataset, lmdb::OpenLmdbDataset, lmdb::CreateLmdbWriter,
     lmdb::ResumeLmdbWriter},
    {"hdf5", hdf5::LooksLikeHdf5Dataset, hdf5::OpenHdf5Dataset, hdf5::CreateHdf5Writer,
     hdf5::ResumeHdf5Writer},
}};

struct ExportEntry {
  const char* name;
  Result<std::unique_ptr<DatasetWriter>> (*create)(const fs::path&, const WriterOptions&);
};

// Formats packrec writes for other tools' readers but does not read as datasets (it imports
// them: packrec/source.h).
constexpr std::array<ExportEntry, 3> kExports = {{
    {"wds", wds::CreateWdsWriter},
    {"tfrecord", tfrecord::CreateTfRecordWriter},
    {"recordio", recordio::CreateRecordIoWriter},
}};

}  // namespace

Result<std::unique_ptr<Reader>> OpenDataset(const fs::path& path, const OpenOptions& options) {
  std::error_code error;
  if (!fs::exists(path, error)) return Status::NotFound("no such dataset: " + path.string());
  for (const FormatEntry& format : kFormats) {
    PACKREC_ASSIGN_OR_RETURN(const bool found, format.looks_like(path));
    if (found) return format.open(path, options);
  }
  if (fs::is_regular_file(path, error) && fs::file_size(path, error) == 0) {
    return Status::Truncated(path.string() + " is empty (0 bytes): a dataset file cut short?");
  }
  return Status::NotFound(path.string() +
                          " is not a packrec dataset (no manifest.json; an interrupted convert "
                          "leaves none)");
}

Result<std::unique_ptr<DatasetWriter>> CreateDatasetWriter(const fs::path& path,
                                                           const WriterOptions& options) {
  for (const FormatEntry& format : kFormats) {
    if (options.format == format.name) return format.create(path, options);
  }
  for (const ExportEntry& format : kExports) {
    if (options.format == format.name) return format.create(path, options);
  }
  std::string known;
  for (const std::string& name : WritableFormats()) known += (known.empty() ? "" : ", ") + name;
  return Status::InvalidArgument("--format '" + options.format + "' is not one of: " + known);
}

Result<ResumedWriter> ResumeDatasetWriter(const fs::path& path, const WriterOptions& options) {
  for (const FormatEntry& format : kFormats) {
    if (options.format == format.name) return format.resume(path, options);
  }
  return Status::InvalidArgument("--resume applies to the shard, lmdb and hdf5 formats, not '" +
                                 options.format + "'");
}

Result<std::optional<std::string>> ReadResumeState(const fs::path& path,
                                                   const std::string& format) {
  fs::path journal_path;
  if (format == "hdf5") {
    journal_path = path;
    journal_path += kResumeJournalSuffix;
  } else {
    Result<OutputDirectory> interrupted = OutputDirectory::Reopen(path);
    if (!interrupted.ok()) return std::optional<std::string>();
    journal_path = interrupted->write_dir() / kResumeJournalName;
  }
  Result<ResumeJournal> journal = ReadResumeJournal(journal_path);
  if (!journal.ok()) {
    if (journal.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
    return journal.status();
  }
  if (journal->format != format) {
    return Status::InvalidArgument(path.string() + " holds an interrupted " + journal->format +
                                   " conversion: resume it with --format " + journal->format +
                                   ", or pass --overwrite to start again");
  }
  return std::optional<std::string>(journal->caller_state);
}

fs::path RejectsFilePath(const fs::path& path, const std::string& format) {
  return format == "hdf5" ? fs::path(path.string() + ".rejects.tsv") : path / "rejects.tsv";
}

std::vector<std::string> WritableFormats() {
  std::vector<std::string> names;
  for (const FormatEntry& format : kFormats) names.emplace_back(format.name);
  for (const ExportEntry& format : kExports) names.emplace_back(format.name);
  return names;
}

}  // namespace packrec
