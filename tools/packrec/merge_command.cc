#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "packrec/merge.h"

namespace packrec::cli {

void AddMergeCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "merge",
      "Join the parts of a partitioned conversion (convert --part I/N) into one dataset, "
      "record for record what a single convert writes");
  struct Args {
    std::string out;
    std::vector<std::string> parts;
    MergeOptions options;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  command->add_option("OUT", args->out, "Dataset to create")->required();
  command->add_option("PARTS", args->parts,
                      "Part datasets, or directories holding them (every part-*-of-* inside); "
                      "none: OUT is the directory of parts, merged in place");
  command->add_flag("--overwrite", args->options.overwrite,
                    "Replace OUT if it already holds a packrec dataset");
  command->add_flag("--remove-parts", args->options.remove_parts,
                    "Delete the parts once OUT is complete");
  command->add_flag("--json", args->json,
                    "Print the result as JSON (parts, records, bytes, rejected, seconds), an "
                    "error as {\"error\": {...}}");
  command->callback([args, &exit_code] {
    std::vector<std::filesystem::path> parts(args->parts.begin(), args->parts.end());
    if (parts.empty()) parts.push_back(args->out);
    Result<MergeStats> stats = MergeParts(parts, args->out, args->options);
    if (!stats.ok()) {
      exit_code = Fail("merge", stats.status(), args->json);
      return;
    }
    if (args->json) {
      nlohmann::json out;
      out["output"] = args->out;
      out["parts"] = stats->parts;
      out["records"] = stats->records;
      out["output_bytes"] = stats->output_bytes;
      out["rejected"] = stats->rejected;
      out["seconds"] = stats->elapsed_seconds;
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << "merged " << stats->parts << " parts: " << stats->records << " records ("
              << HumanBytes(stats->output_bytes) << ", " << stats->rejected
              << " rejected inputs) into " << args->out << " in " << stats->elapsed_seconds
              << " s\n";
  });
}

}  // namespace packrec::cli
