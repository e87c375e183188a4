#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "packrec/dataset_ops.h"
#include "packrec/reader.h"

namespace packrec::cli {
namespace {

class CollectingReporter final : public VerifyReporter {
 public:
  explicit CollectingReporter(bool print) : print_(print) {}
  void Report(const VerifyProblem& problem) override {
    if (print_) std::cout << "PROBLEM " << PrintableText(problem.status.ToString()) << "\n";
    problems.push_back(problem);
  }
  std::vector<VerifyProblem> problems;

 private:
  bool print_;
};

}  // namespace

void AddVerifyCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "verify", "Check every checksum of a dataset; with --deep, also decode every image");
  struct Args {
    std::string path;
    bool deep = false;
    bool json = false;
    RemoteOptions remote;
  };
  auto args = std::make_shared<Args>();
  command->add_option("DATASET", args->path, "Dataset directory, or its URL (https://, s3://)")
      ->required();
  AddRemoteOptions(command, args->remote);
  command->add_flag("--deep", args->deep, "Also decode every image");
  AddMaxPixelsOption(command);
  command->add_flag("--json", args->json,
                    "Print the result as JSON, an error as {\"error\": {...}}");
  command->callback([args, &exit_code] {
    OpenOptions open;
    open.remote = args->remote;
    open.allow_damaged_shards = true;  // report every damaged shard, not only the first
    Result<std::unique_ptr<Reader>> reader = OpenDataset(args->path, open);
    if (!reader.ok()) {
      exit_code = Fail("verify", reader.status(), args->json);
      return;
    }
    CollectingReporter reporter(!args->json);
    const VerifyStats stats = VerifyDataset(**reader, {args->deep}, reporter);
    exit_code = stats.problems == 0 ? kExitOk : kExitCorrupt;
    if (args->json) {
      nlohmann::json out;
      out["ok"] = stats.problems == 0;
      out["records_checked"] = stats.records_checked;
      out["bytes_checked"] = stats.bytes_checked;
      out["metadata_checksummed"] = (*reader)->info().metadata_checksummed;
      nlohmann::json problems = nlohmann::json::array();
      for (const VerifyProblem& p : reporter.problems) {
        nlohmann::json item;
        item["file"] = p.file;
        item["record_index"] = p.record_index ? nlohmann::json(*p.record_index) : nullptr;
        item["key"] = p.key;
        item["byte_offset"] = p.byte_offset ? nlohmann::json(*p.byte_offset) : nullptr;
        item["code"] = CodeId(p.status.code());
        item["message"] = p.status.message();
        problems.push_back(std::move(item));
      }
      out["problems"] = std::move(problems);
      // A key of raw bytes is not UTF-8: replaced (U+FFFD) rather than nlohmann's exception.
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return;
    }
    std::cout << (stats.problems == 0 ? "OK" : "FAILED") << ": checked " << stats.records_checked
              << " of " << (*reader)->size() << " records (" << HumanBytes(stats.bytes_checked)
              << (args->deep ? ", decoded" : "") << "), " << stats.problems << " problem(s)\n";
    const DatasetInfo& info = (*reader)->info();
    if (!info.metadata_checksummed) {
      std::cout << "note: this " << info.format << " dataset is of layout version "
                << info.format_version
                << ", whose labels, image sizes and keys are under no checksum: damage to them "
                   "cannot be found; convert it again with this packrec to cover them\n";
    }
  });
}

}  // namespace packrec::cli
