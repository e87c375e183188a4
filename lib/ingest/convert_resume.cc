// Resume points of a listing conversion: what the writer's journal keeps of the conversion (its
// listing, options, position and rejects), how a --resume run checks that it continues the same
// conversion over unchanged inputs, and where it starts.
#include <nlohmann/json.hpp>

#include <string>

#include "dataset/registry.h"
#include "ingest/convert_internal.h"
#include "packrec/reader.h"
#include "storage/json_util.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;

// What a resume point records of the conversion (the writer's journal carries it): the listing
// and options it is of, and how far into the listing its records reach.
std::string CallerState(const DatasetMetadata& metadata, std::uint64_t next_item,
                        std::uint64_t input_bytes, std::uint64_t input_stamps,
                        const std::vector<Reject>& rejects,
                        const std::vector<std::uint64_t>& reject_items) {
  nlohmann::json json;
  json["input_stamps"] = input_stamps;
  json["listing_hash"] = metadata.listing_hash;
  json["options"] = nlohmann::json::parse(metadata.options_json);
  json["next_item"] = next_item;
  json["input_bytes"] = input_bytes;
  nlohmann::json kept = nlohmann::json::array();
  for (std::size_t i = 0; i < rejects.size() && reject_items[i] < next_item; ++i) {
    kept.push_back(
        {{"item", reject_items[i]}, {"path", rejects[i].path}, {"reason", rejects[i].reason}});
  }
  json["rejects"] = std::move(kept);
  return json.dump();
}

// Reads a resume point's caller state into `start`, after checking it is of this conversion.
// `check_counts`: also that its records and rejects add up to its position (known only once the
// writer is reopened and says how many records it holds).
Status RestoreCallerState(const std::string& text, const DatasetMetadata& metadata,
                          const ConvertOptions& options, std::uint64_t items, bool check_counts,
                          ConvertStart& start) {
  if (text.empty()) return Status::OK();  // the first journal: nothing written yet
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  const std::string where = options.output.string();
  const auto refuse = [&](const std::string& why) {
    return Status::AlreadyExists(where + " holds an interrupted conversion " + why)
        .WithRemedy(Remedy::kOverwriteToRestart);
  };
  if (json.is_discarded() || !json.is_object()) return refuse("with a damaged resume journal");
  try {
    if (json.at("listing_hash").get<std::string>() != metadata.listing_hash) {
      return refuse("of another listing (the input changed since)");
    }
    if (json.at("options") != nlohmann::json::parse(metadata.options_json)) {
      return refuse("with other options (" + json.at("options").dump() + ")");
    }
    start.next_item = GetUnsigned<std::uint64_t>(json.at("next_item"));
    start.input_bytes = GetUnsigned<std::uint64_t>(json.at("input_bytes"));
    if (json.contains("input_stamps")) {
      start.input_stamps = GetUnsigned<std::uint64_t>(json.at("input_stamps"));
      start.has_input_stamps = true;
    }
    for (const nlohmann::json& reject : json.at("rejects")) {
      start.reject_items.push_back(GetUnsigned<std::uint64_t>(reject.at("item")));
      start.rejects.push_back(
          {reject.at("path").get<std::string>(), reject.at("reason").get<std::string>()});
    }
  } catch (const nlohmann::json::exception&) {
    return refuse("with a damaged resume journal");
  }
  if (start.next_item > items ||
      (check_counts && start.next_item - start.rejects.size() != start.resumed_records)) {
    return refuse("whose journal does not add up (" + std::to_string(start.resumed_records) +
                  " records and " + std::to_string(start.rejects.size()) + " rejects before item " +
                  std::to_string(start.next_item) + ")");
  }
  return Status::OK();
}

// Whether the inputs before a resume point are as the interrupted run read them (same size and
// modification time: an input replaced or edited since would leave its old record kept).
Status CheckInputsUnchanged(const ConvertStart& check, const SourceListing& listing,
                            const ConvertOptions& options) {
  if (!check.has_input_stamps) return Status::OK();
  std::uint64_t stamps = 0;
  std::size_t next_reject = 0;
  for (std::uint64_t item = 0; item < check.next_item; ++item) {
    if (next_reject < check.reject_items.size() && check.reject_items[next_reject] == item) {
      ++next_reject;  // rejected: no record, no stamp
      continue;
    }
    const SourceItem& input = listing.items[item];
    const Result<FileStamp> stamp = StampOf(input.path);
    if (!stamp.ok()) {
      return Status::AlreadyExists(
                 options.output.string() + " holds an interrupted conversion whose input " +
                 input.path.string() + " is gone since (" + stamp.status().message() + ")")
          .WithRemedy(Remedy::kOverwriteToRestart);
    }
    stamps += InputStamp(input.key, *stamp);
  }
  if (stamps != check.input_stamps) {
    return Status::AlreadyExists(options.output.string() +
                                 " holds an interrupted conversion some of whose inputs before its "
                                 "resume point changed "
                                 "since (a file's size or modification time differs): its records "
                                 "of them would be the "
                                 "old ones")
        .WithRemedy(Remedy::kOverwriteToRestart);
  }
  return Status::OK();
}

}  // namespace

void ResumePoints::Adding(std::uint64_t item, std::uint64_t input_bytes_before,
                          std::uint64_t input_stamp) {
  since_checkpoint_.push_back({added_, item, input_bytes_before, input_stamps_});
  input_stamps_ += input_stamp;
}

std::string ResumePoints::StateAfter(std::uint64_t records, std::uint64_t current_item,
                                     const ConvertStats& stats) {
  while (!since_checkpoint_.empty() && since_checkpoint_.front().record < records) {
    since_checkpoint_.pop_front();
  }
  // Every record added so far is durable: the next item is the one after the current.
  const bool all = since_checkpoint_.empty();
  const Entry& next = all ? Entry{} : since_checkpoint_.front();
  return CallerState(metadata_, all ? current_item + 1 : next.item,
                     all ? stats.input_bytes : next.input_bytes_before,
                     all ? input_stamps_ : next.input_stamps_before, stats.rejects, reject_items_);
}

Result<ConvertStart> StartConversion(const ConvertOptions& options,
                                     const WriterOptions& writer_options,
                                     const DatasetMetadata& metadata,
                                     const SourceListing& listing) {
  const std::uint64_t items = listing.items.size();
  ConvertStart start;
  if (options.resume) {
    PACKREC_ASSIGN_OR_RETURN(const std::optional<std::string> state,
                             ReadResumeState(options.output, writer_options.format));
    if (state) {
      // Checked before the writer is reopened: reopening drops what came after the resume point.
      ConvertStart check;
      PACKREC_RETURN_IF_ERROR(RestoreCallerState(*state, metadata, options, items, false, check));
      PACKREC_RETURN_IF_ERROR(CheckInputsUnchanged(check, listing, options));
      PACKREC_ASSIGN_OR_RETURN(ResumedWriter resumed,
                               ResumeDatasetWriter(options.output, writer_options));
      start.resumed_records = resumed.records;
      PACKREC_RETURN_IF_ERROR(
          RestoreCallerState(resumed.caller_state, metadata, options, items, true, start));
      start.writer = std::move(resumed.writer);
      return start;
    }
  }
  PACKREC_ASSIGN_OR_RETURN(start.writer, CreateDatasetWriter(options.output, writer_options));
  return start;
}

std::optional<FinishedDataset> FindFinishedDataset(const fs::path& path,
                                                   const DatasetMetadata& metadata) {
  Result<std::unique_ptr<Reader>> existing = OpenDataset(path);
  if (!existing.ok()) return std::nullopt;
  const DatasetInfo& info = (*existing)->info();
  // Without exceptions: unreadable options are "other options".
  const nlohmann::json theirs = nlohmann::json::parse(info.options_json, nullptr, false);
  const bool same = info.listing_hash == metadata.listing_hash && !theirs.is_discarded() &&
                    theirs == nlohmann::json::parse(metadata.options_json);
  return FinishedDataset{(*existing)->size(), same};
}

}  // namespace packrec::conversion
