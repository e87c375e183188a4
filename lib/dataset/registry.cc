// Where lib/ reaches the formats: the registry of their descriptors (each format folder says what
// it is, what it reads and writes and which options it takes), and the entry points that pick a
// format through it. source_registry.cc reaches the import sources.
#include "dataset/registry.h"

#include <string>
#include <system_error>

#include "hdf5/hdf5_format.h"
#include "lmdb/lmdb_format.h"
#include "packrec/format.h"
#include "packrec/reader.h"
#include "packrec/writer.h"
#include "recordio/recordio_format.h"
#include "shard/shard_format.h"
#include "storage/object_store.h"
#include "storage/resume_journal.h"
#include "storage/source_util.h"
#include "tfrecord/tfrecord_format.h"
#include "wds/wds_format.h"

namespace packrec {

namespace fs = std::filesystem;

const std::vector<const FormatDescriptor*>& FormatDescriptors() {
  // packrec's own formats first (OpenDataset probes them in this order), then the exports, which
  // packrec writes for other tools' readers and imports as sources (packrec/source.h).
  // Never destroyed (nor are the descriptors): a thread still inside OpenDataset when the process
  // exits (a Python daemon thread) must not find the list freed by exit()'s static destructors,
  // which crashed such a process with SIGSEGV about once in 100 exits.
  static const std::vector<const FormatDescriptor*>& kAll =
      *new std::vector<const FormatDescriptor*>{
          &shard::ShardFormat(), &lmdb::LmdbFormat(),         &hdf5::Hdf5Format(),
          &wds::WdsFormat(),     &tfrecord::TfRecordFormat(), &recordio::RecordIoFormat(),
      };
  return kAll;
}

const FormatDescriptor* FindFormatDescriptor(std::string_view name) {
  if (name.empty()) return FormatDescriptors().front();  // WriterOptions' default
  for (const FormatDescriptor* format : FormatDescriptors()) {
    if (format->info.name == name) return format;
  }
  return nullptr;
}

namespace {

// The format among `formats` one of whose `FormatInfo::*suffixes` `name` ends with, any case.
const FormatDescriptor* FormatNamedBy(std::string_view name,
                                      std::vector<std::string> FormatInfo::*suffixes) {
  const std::string lower = AsciiLower(std::string(name));
  for (const FormatDescriptor* format : FormatDescriptors()) {
    for (const std::string& suffix : format->info.*suffixes) {
      if (lower.size() > suffix.size() && lower.ends_with(suffix)) return format;
    }
  }
  return nullptr;
}

}  // namespace

Result<std::string> ChooseOutputFormat(const fs::path& output, std::string_view requested) {
  // "out/" names the directory "out".
  const fs::path named = output.has_filename() ? output : output.parent_path();
  const std::string name = named.filename().string();
  const FormatDescriptor* by_suffix = FormatNamedBy(name, &FormatInfo::suffixes);
  const FormatDescriptor* by_file = FormatNamedBy(name, &FormatInfo::file_suffixes);
  if (requested.empty() && by_file == nullptr) {
    return (by_suffix != nullptr ? by_suffix : FormatDescriptors().front())->info.name;
  }
  const std::string chosen(requested);
  if (!chosen.empty()) PACKREC_RETURN_IF_ERROR(FindFormat(chosen).status());
  if (by_suffix != nullptr && by_suffix->info.name != chosen) {
    return Status::InvalidArgument("the output " + output.string() + " is named like a " +
                                   by_suffix->info.name + " dataset, but the format asked for is " +
                                   chosen + ": name it for that format, or ask for " +
                                   by_suffix->info.name);
  }
  if (by_file != nullptr && by_file->info.name != chosen) {
    return Status::InvalidArgument(
        "the output " + output.string() + " is named like one file of a " + by_file->info.name +
        " export, but " +
        (chosen.empty() ? "no format was asked for" : "the format asked for is " + chosen) +
        ": a " + by_file->info.name + " export is a directory of such files; name a directory" +
        (chosen.empty() ? " (packrec's own formats: " + JoinFormatNames(&FormatInfo::readable) +
                              "), or ask for " + by_file->info.name + " by name"
                        : ""));
  }
  return chosen;
}

const std::vector<FormatInfo>& ListFormats() {
  static const std::vector<FormatInfo>& kInfos = *[] {
    auto* infos = new std::vector<FormatInfo>;  // never destroyed, as FormatDescriptors()
    for (const FormatDescriptor* format : FormatDescriptors()) infos->push_back(format->info);
    return infos;
  }();
  return kInfos;
}

Result<FormatInfo> FindFormat(std::string_view name) {
  if (const FormatDescriptor* format = FindFormatDescriptor(name)) return format->info;
  std::string known;
  for (const std::string& each : WritableFormats()) known += (known.empty() ? "" : ", ") + each;
  return Status::InvalidArgument("--format '" + std::string(name) + "' is not one of: " + known);
}

std::string JoinFormatNames(bool FormatInfo::*flag) {
  std::vector<std::string> names;
  for (const FormatInfo& info : ListFormats()) {
    if (info.*flag) names.push_back(info.name);
  }
  std::string joined;
  for (std::size_t i = 0; i < names.size(); ++i) {
    joined += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return joined;
}

Result<std::unique_ptr<Reader>> OpenDataset(const fs::path& path, const OpenOptions& options) {
  if (IsRemoteUrl(path.string())) {
    for (const FormatDescriptor* format : FormatDescriptors()) {
      if (format->open_url != nullptr) return format->open_url(path.string(), options);
    }
    return Status::NotSupported("no format of this build reads from URLs: " + path.string());
  }
  std::error_code error;
  if (!fs::exists(path, error)) return Status::NotFound("no such dataset: " + path.string());
  for (const FormatDescriptor* format : FormatDescriptors()) {
    if (format->looks_like == nullptr) continue;
    PACKREC_ASSIGN_OR_RETURN(const bool found, format->looks_like(path));
    if (found) return format->open(path, options);
  }
  if (fs::is_regular_file(path, error) && fs::file_size(path, error) == 0) {
    return Status::Truncated(path.string() + " is empty (0 bytes): a dataset file cut short?");
  }
  return Status::NotFound(path.string() +
                          " is not a packrec dataset (no manifest.json; an interrupted convert "
                          "leaves none)");
}

namespace {

// A schema given to a format that would drop it is refused: nothing is lost silently.
Status CheckFieldsStored(const FormatDescriptor& format, const WriterOptions& options) {
  if (options.fields.empty() || format.info.stores_fields) return Status::OK();
  std::string names;
  for (const FieldSpec& field : options.fields) names += (names.empty() ? "" : ", ") + field.name;
  std::size_t keepers = 0;
  for (const FormatInfo& info : ListFormats()) keepers += info.stores_fields ? 1 : 0;
  return Status::NotSupported("the " + format.info.name + " format does not store record fields " +
                              "yet, and the records have " + std::to_string(options.fields.size()) +
                              " (" + names + "); the " +
                              JoinFormatNames(&FormatInfo::stores_fields) +
                              (keepers > 1 ? " formats keep them" : " format keeps them"));
}

}  // namespace

Result<std::unique_ptr<DatasetWriter>> CreateDatasetWriter(const fs::path& path,
                                                           const WriterOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(const std::string chosen, ChooseOutputFormat(path, options.format));
  const FormatDescriptor* format = FindFormatDescriptor(chosen);
  if (format == nullptr) return FindFormat(chosen).status();
  PACKREC_RETURN_IF_ERROR(CheckFieldsStored(*format, options));
  WriterOptions named = options;
  named.format = chosen;
  return format->create(path, named);
}

Result<ResumedWriter> ResumeDatasetWriter(const fs::path& path, const WriterOptions& options) {
  const FormatDescriptor* format = FindFormatDescriptor(options.format);
  if (format != nullptr && format->resume != nullptr) {
    PACKREC_RETURN_IF_ERROR(CheckFieldsStored(*format, options));
    return format->resume(path, options);
  }
  return Status::InvalidArgument("--resume applies to the " +
                                 JoinFormatNames(&FormatInfo::resumable) + " formats, not '" +
                                 options.format + "'");
}

Result<std::optional<std::string>> ReadResumeState(const fs::path& path,
                                                   const std::string& format) {
  fs::path journal_path;
  const FormatDescriptor* descriptor = FindFormatDescriptor(format);
  if (descriptor != nullptr && descriptor->info.single_file) {
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
                                   " conversion: resume it in the " + journal->format + " format")
        .WithRemedy(Remedy::kOverwriteToRestart);
  }
  return std::optional<std::string>(journal->caller_state);
}

fs::path RejectsFilePath(const fs::path& path, const std::string& format) {
  const FormatDescriptor* descriptor = FindFormatDescriptor(format);
  const bool beside = descriptor != nullptr && descriptor->info.single_file;
  return beside ? fs::path(path.string() + ".rejects.tsv") : path / "rejects.tsv";
}

std::vector<std::string> WritableFormats() {
  std::vector<std::string> names;
  for (const FormatInfo& info : ListFormats()) names.push_back(info.name);
  return names;
}

}  // namespace packrec
