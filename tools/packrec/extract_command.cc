#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "packrec/dataset_ops.h"
#include "packrec/reader.h"

namespace packrec::cli {
namespace {

void PrintJson(const ExtractStats& stats, const std::string& out_dir) {
  nlohmann::json out;
  out["output"] = out_dir;
  out["files"] = stats.files_written;
  out["bytes"] = stats.bytes_written;
  out["case_collisions"] = stats.case_collisions;
  nlohmann::json skipped = nlohmann::json::array();
  for (const ExtractSkipped& record : stats.skipped) {
    skipped.push_back({{"record_index", record.record_index},
                       {"key", record.key},
                       {"code", CodeId(record.status.code())},
                       {"message", record.status.message()}});
  }
  out["skipped"] = std::move(skipped);
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintText(const ExtractStats& stats, const std::string& out_dir) {
  std::cout << "extracted " << stats.files_written << " files (" << HumanBytes(stats.bytes_written)
            << ") to " << out_dir << "\n";
  for (const std::string& collision : stats.case_collisions) {
    std::cout << "warning: " << collision << ": one file on a case-insensitive file system\n";
  }
  if (stats.skipped.empty()) return;
  // Every one: the list is what a salvage is for (which records to fetch again).
  std::cout << "skipped " << stats.skipped.size() << " damaged or refused records:\n";
  for (const ExtractSkipped& record : stats.skipped) {
    std::cout << "  record " << record.record_index
              << (record.key.empty() ? "" : " (" + PrintableText(record.key) + ")") << ": "
              << PrintableText(record.status.ToString()) << "\n";
  }
}

}  // namespace

void AddExtractCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "extract", "Write every record back as a file OUT/<key>, byte for byte as stored");
  struct Args {
    std::string path;
    std::string out;
    std::string on_error = "fail";
    bool overwrite = false;
    bool json = false;
    RemoteOptions remote;
  };
  auto args = std::make_shared<Args>();
  command->add_option("DATASET", args->path, "Dataset directory, or its URL (https://, s3://)")
      ->required();
  AddRemoteOptions(command, args->remote);
  command->add_option("OUT", args->out, "Directory to write into")->required();
  command->add_flag("--overwrite", args->overwrite, "Replace files that already exist");
  command
      ->add_option("--on-error", args->on_error,
                   "fail: the first damaged record (checksum, truncated or damaged shard) or "
                   "unusable key stops extract before any file is written; skip: extract every "
                   "other record and list the ones left out (exit code 5 when any was)")
      ->check(CLI::IsMember({"fail", "skip"}));
  command->add_flag("--json", args->json,
                    "Print the result as JSON (files, bytes, skipped records), an error as "
                    "{\"error\": {...}}");
  command->callback([args, &exit_code] {
    ExtractOptions options;
    options.overwrite = args->overwrite;
    options.skip_bad_records = args->on_error == "skip";
    OpenOptions open;
    open.remote = args->remote;
    open.allow_damaged_shards = options.skip_bad_records;  // salvage the good shards' records
    Result<std::unique_ptr<Reader>> reader = OpenDataset(args->path, open);
    if (!reader.ok()) {
      const StatusCode code = reader.status().code();
      const bool damaged = code == StatusCode::kCorruption || code == StatusCode::kTruncated;
      exit_code = Fail("extract",
                       damaged && !options.skip_bad_records
                           ? reader.status().WithRemedy(Remedy::kSkipBadInput)
                           : reader.status(),
                       args->json);
      return;
    }
    Result<ExtractStats> stats = ExtractDataset(**reader, args->out, options);
    if (!stats.ok()) {
      exit_code = Fail("extract", stats.status(), args->json);
      return;
    }
    if (args->json) {
      PrintJson(*stats, args->out);
    } else {
      PrintText(*stats, args->out);
    }
    exit_code = stats->skipped.empty() ? kExitOk : kExitCorrupt;
  });
}

}  // namespace packrec::cli
