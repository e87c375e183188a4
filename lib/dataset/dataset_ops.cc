#include "packrec/dataset_ops.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "core/file_io.h"
#include "core/keys.h"
#include "core/tree_writer.h"
#include "packrec/image.h"
#include "storage/field_block.h"
#include "storage/manifest_json.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

// Every record's fields read under the schema (ReadField checks each value's type), and how
// many records carry each field against the manifest's field_records where it has them: fields
// renamed or reordered among one type show there when their counts differ.
template <typename Report>
void VerifyFields(const Reader& reader, const std::set<std::uint64_t>& damaged,
                  const Report& report) {
  const DatasetInfo& info = reader.info();
  std::vector<std::uint64_t> present(info.fields.size(), 0);
  bool all_read = damaged.empty();
  ReadScratch scratch;
  std::vector<std::uint64_t> ahead;
  for (std::uint64_t i = 0; i < reader.size() && !info.fields.empty(); ++i) {
    if (i % 1024 == 0) {  // a dataset at a URL fetches the next records' bytes in few requests
      ahead.clear();
      for (std::uint64_t j = i; j < std::min<std::uint64_t>(i + 1024, reader.size()); ++j) {
        ahead.push_back(j);
      }
      reader.WillNeed(ahead);
    }
    if (damaged.count(i) > 0) continue;
    for (std::size_t f = 0; f < info.fields.size(); ++f) {
      const Result<FieldView> value = reader.ReadField(i, f, scratch);  // checks the type too
      if (!value.ok()) {
        report(i, value.status());
        all_read = false;
        break;
      }
      present[f] += value->present ? 1 : 0;
    }
  }
  if (!all_read || info.field_records.size() != info.fields.size()) return;
  for (std::size_t f = 0; f < info.fields.size(); ++f) {
    if (present[f] != info.field_records[f]) {
      report(std::nullopt,
             Status::Corruption("field '" + info.fields[f].name + "' is present in " +
                                std::to_string(present[f]) + " records, the manifest's " +
                                "field_records says " + std::to_string(info.field_records[f])));
    }
  }
}

// What the manifest says of every record, checked against the records themselves: each label
// below label_count (and inside the class list when it has one), each field value of the type
// and shape the schema declares. A manifest whose checksum was recomputed over a lie (any tool
// or bug can write one) is caught here, since its shards still hash as listed.
// `damaged`: the records the reader's own Verify reported, not reported again.
void VerifyAgainstManifest(const Reader& reader, const std::set<std::uint64_t>& damaged,
                           VerifyReporter& reporter, VerifyStats& stats) {
  const DatasetInfo& info = reader.info();
  const auto report = [&](std::optional<std::uint64_t> index, const Status& status) {
    reporter.Report({"", index, "", std::nullopt, index ? status.WithRecordIndex(*index) : status});
    ++stats.problems;
  };
  Result<std::vector<std::uint32_t>> labels = reader.ReadLabels();
  if (!labels.ok()) {
    reporter.Report(
        {"", labels.status().record_index(), "", labels.status().byte_offset(), labels.status()});
    ++stats.problems;
    return;
  }
  const std::uint64_t named = info.classes.size();
  for (std::uint64_t i = 0; i < labels->size(); ++i) {
    if (damaged.count(i) > 0) continue;  // the reader's Verify has named it (its label too)
    const std::uint32_t label = (*labels)[i];
    // The reads' own check (label_count), then the class list, which only verify holds to.
    Status checked = CheckLabelAgainstManifest(info, i, label);
    if (checked.ok() && named > 0 && label >= named) {
      checked =
          Status::Corruption("record " + std::to_string(i) + " has label " + std::to_string(label) +
                             ", but the manifest lists " + std::to_string(named) + " classes");
    }
    if (!checked.ok()) report(i, checked);
  }
  VerifyFields(reader, damaged, report);
}

// Passes problems on, remembering the records they name.
class RecordingReporter : public VerifyReporter {
 public:
  explicit RecordingReporter(VerifyReporter& next) : next_(next) {}
  void Report(const VerifyProblem& problem) override {
    if (problem.record_index) {
      records.insert(*problem.record_index);
    } else {
      whole_file_damaged = true;
    }
    next_.Report(problem);
  }
  std::set<std::uint64_t> records;
  bool whole_file_damaged = false;

 private:
  VerifyReporter& next_;
};

}  // namespace

VerifyStats VerifyDataset(const Reader& reader, const VerifyOptions& options,
                          VerifyReporter& reporter) {
  RecordingReporter recording(reporter);
  VerifyStats stats = reader.Verify(recording);
  // Damage to a whole file is reported once, not again for each of its records.
  if (!recording.whole_file_damaged) {
    VerifyAgainstManifest(reader, recording.records, reporter, stats);
  }
  if (!options.deep) return stats;
  ReadScratch scratch;
  for (std::uint64_t i = 0; i < reader.size(); ++i) {
    Result<RecordView> view = reader.Read(i, scratch);
    if (!view.ok()) continue;  // Verify above has reported it
    Status decoded =
        view->encoding != Encoding::kRawRgb ? CheckDecodes(view->bytes)
        : view->bytes.size() == std::uint64_t{view->width} * view->height * 3
            ? Status::OK()
            : Status::Corruption("raw RGB record of " + std::to_string(view->bytes.size()) +
                                 " bytes is not " + std::to_string(view->width) + "x" +
                                 std::to_string(view->height) + "x3");
    if (!decoded.ok()) {
      reporter.Report({"", i, std::string(view->key), std::nullopt,
                       decoded.WithContext("record " + std::to_string(i) + " (key '" +
                                           std::string(view->key) + "') does not decode")});
      ++stats.problems;
    }
  }
  return stats;
}

namespace {

constexpr char kMetadataTable[] = "metadata.jsonl";

// The files extract writes for a record: the image (decoded pixels as .ppm), then one side file
// per present field, <key without its extension>.<suffix>, as the image folder listing reads
// them back (ListImageFolder).
std::vector<std::string> ExtractedNames(const RecordView& view,
                                        const std::vector<FieldSpec>& fields) {
  fs::path image{std::string(view.key)};
  if (view.encoding == Encoding::kRawRgb) image.replace_extension(".ppm");
  std::vector<std::string> names{image.generic_string()};
  const std::string stem = fs::path(std::string(view.key)).replace_extension().generic_string();
  for (std::size_t field = 0; field < view.fields.size() && field < fields.size(); ++field) {
    if (view.fields[field].present && !IsTableField(fields[field])) {
      names.push_back(stem + "." + FieldFileSuffix(fields[field]));
    }
  }
  return names;
}

// Record `view`'s metadata.jsonl row (file_name and its table fields), or an empty string when
// it has none: what the image folder listing reads back (ingest/metadata_table.h).
std::string MetadataRow(const RecordView& view, const std::vector<FieldSpec>& fields) {
  nlohmann::json row = nlohmann::json::object();
  for (std::size_t field = 0; field < view.fields.size() && field < fields.size(); ++field) {
    if (view.fields[field].present && IsTableField(fields[field])) {
      row[fields[field].name] = FieldValueToJson(fields[field], view.fields[field].bytes);
    }
  }
  if (row.empty()) return "";
  row["file_name"] = std::string(view.key);
  return row.dump() + "\n";
}

std::string Where(const RecordView& view) {
  return "record " + std::to_string(view.index) + " (key '" + PrintableKey(view.key) + "')";
}

// Every record in order, through `visit`. Without skip_bad_records the first error (a read's or
// visit's) is returned; with it, each record that cannot be read, or that `visit` refuses when
// `refusals_are_records` (a key that cannot be a file name, not a full disk), is noted in
// stats.skipped (and `bad`, so a later pass leaves it out too) and the rest go on: records are
// then read one by one, so that a bad one does not end the walk as it ends ForEach's stream.
Status VisitRecords(const Reader& reader, const ExtractOptions& options,
                    std::set<std::uint64_t>& bad, ExtractStats& stats, bool refusals_are_records,
                    const Reader::Visitor& visit) {
  if (!options.skip_bad_records) return reader.ForEach(visit);
  ReadScratch scratch;
  for (std::uint64_t index = 0; index < reader.size(); ++index) {
    if (bad.count(index)) continue;
    Result<RecordView> view = reader.Read(index, scratch);
    Status status = view.status();
    if (view.ok()) {
      status = visit(*view);
      if (!refusals_are_records) PACKREC_RETURN_IF_ERROR(status);
    }
    if (status.ok()) continue;
    bad.insert(index);
    stats.skipped.push_back({index, view.ok() ? std::string(view->key) : std::string(), status});
  }
  std::sort(stats.skipped.begin(), stats.skipped.end(),
            [](const ExtractSkipped& a, const ExtractSkipped& b) {
              return a.record_index < b.record_index;
            });
  return Status::OK();
}

// Checks every key and every file name extract would write, before the first file is written,
// so a bad key leaves no partial tree; notes names that differ only in case.
Status CheckExtractTargets(const Reader& reader, const ExtractOptions& options,
                           std::set<std::uint64_t>& bad, ExtractStats& stats) {
  std::unordered_map<std::string, std::uint64_t> targets;  // file name -> first record
  std::unordered_map<std::string, std::uint64_t> folded;   // ASCII-lowercased name -> record
  PACKREC_RETURN_IF_ERROR(
      VisitRecords(reader, options, bad, stats, true, [&](const RecordView& view) -> Status {
        // The rule convert applies (core/keys.h), checked again: older datasets, and the writer
        // API, may hold keys it refuses.
        const std::string problem = KeyProblem(view.key);
        if (problem.starts_with("holds a control character")) {
          return Status::InvalidArgument(Where(view) + ": key " + problem +
                                         "; refusing to make such a file name");
        }
        if (!problem.empty()) {
          return Status::InvalidArgument(Where(view) +
                                         ": key would escape the output directory (it " + problem +
                                         "); refusing");
        }
        for (const std::string& name : ExtractedNames(view, reader.info().fields)) {
          const auto [first, fresh] = targets.emplace(name, view.index);
          if (!fresh) {
            return Status::InvalidArgument(
                Where(view) + ": record " + std::to_string(first->second) +
                " is extracted to the same file " + name + " (a key collision); refusing");
          }
          const auto [other, unique] = folded.emplace(AsciiLower(name), view.index);
          if (!unique) {
            stats.case_collisions.push_back("records " + std::to_string(other->second) + " and " +
                                            std::to_string(view.index) + " (" + name +
                                            ") differ only in case");
          }
        }
        return Status::OK();
      }));
  const bool has_table = std::any_of(reader.info().fields.begin(), reader.info().fields.end(),
                                     [](const FieldSpec& spec) { return IsTableField(spec); });
  if (has_table && targets.count(kMetadataTable)) {
    return Status::InvalidArgument("record " + std::to_string(targets[kMetadataTable]) +
                                   " is extracted to " + kMetadataTable +
                                   ", where its fields' table goes; refusing");
  }
  return Status::OK();
}

// Writes one record's image (decoded pixels as binary PPM, P6, which every image tool opens) and
// its side files; appends its metadata.jsonl row to `metadata`.
Status WriteRecordFiles(const RecordView& view, const std::vector<FieldSpec>& fields,
                        TreeWriter& tree, bool overwrite, ExtractStats& stats,
                        std::string& metadata) {
  fs::path target{std::string(view.key)};
  std::span<const std::byte> contents = view.bytes;
  std::vector<std::byte> ppm;
  if (view.encoding == Encoding::kRawRgb) {
    target.replace_extension(".ppm");
    const std::string header =
        "P6\n" + std::to_string(view.width) + " " + std::to_string(view.height) + "\n255\n";
    const auto header_bytes = AsBytes(header);
    ppm.assign(header_bytes.begin(), header_bytes.end());
    ppm.insert(ppm.end(), view.bytes.begin(), view.bytes.end());
    contents = ppm;
  }
  const Status written = tree.Write(target.generic_string(), contents, overwrite);
  if (!written.ok()) return written.WithContext(Where(view));
  ++stats.files_written;
  stats.bytes_written += contents.size();
  // The fields go back beside the image as the side files they came from, or into
  // metadata.jsonl.
  metadata += MetadataRow(view, fields);
  const std::vector<std::string> names = ExtractedNames(view, fields);
  for (std::size_t field = 0, name = 1; field < view.fields.size(); ++field) {
    if (!view.fields[field].present || IsTableField(fields[field])) continue;
    const Status side = tree.Write(names[name++], view.fields[field].bytes, overwrite);
    if (!side.ok()) return side.WithContext(Where(view) + ", field '" + fields[field].name + "'");
    ++stats.files_written;
    stats.bytes_written += view.fields[field].bytes.size();
  }
  return Status::OK();
}

}  // namespace

Result<ExtractStats> ExtractDataset(const Reader& reader, const fs::path& out_dir,
                                    const ExtractOptions& options) {
  std::error_code error;
  const bool existed = fs::exists(out_dir, error) || error;
  // Directories opened by descriptor without following links, files renamed into place: nothing
  // is created or written outside out_dir, whatever links are in it or appear while we write.
  PACKREC_ASSIGN_OR_RETURN(TreeWriter tree, TreeWriter::Open(out_dir));
  ExtractStats stats;
  std::set<std::uint64_t> bad;  // records left out (skip_bad_records)
  const Status checked = CheckExtractTargets(reader, options, bad, stats);
  if (!checked.ok()) {
    if (!existed) fs::remove(out_dir, error);  // still empty: nothing was written yet
    const bool damaged =
        checked.code() == StatusCode::kCorruption || checked.code() == StatusCode::kTruncated;
    return damaged ? checked.WithRemedy(Remedy::kSkipBadInput) : checked;
  }
  std::string metadata;  // metadata.jsonl, one row per record with table fields
  PACKREC_RETURN_IF_ERROR(
      VisitRecords(reader, options, bad, stats, false, [&](const RecordView& view) {
        return WriteRecordFiles(view, reader.info().fields, tree, options.overwrite, stats,
                                metadata);
      }));
  if (!metadata.empty()) {
    PACKREC_RETURN_IF_ERROR(tree.Write(kMetadataTable, AsBytes(metadata), options.overwrite));
    ++stats.files_written;
    stats.bytes_written += metadata.size();
  }
  return stats;
}

}  // namespace packrec
