#include <iostream>

#include "cli_common.h"
#include "packrec/dataset_ops.h"
#include "packrec/reader.h"

namespace packrec::cli {

void AddExtractCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "extract", "Write every record back as a file OUT/<key>, byte for byte as stored");
  struct Args {
    std::string path;
    std::string out;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  command->add_option("DATASET", args->path, "Dataset directory")->required();
  command->add_option("OUT", args->out, "Directory to write into")->required();
  command->add_flag("--overwrite", args->overwrite, "Replace files that already exist");
  command->callback([args, &exit_code] {
    Result<std::unique_ptr<Reader>> reader = OpenDataset(args->path);
    if (!reader.ok()) {
      exit_code = Fail("extract", reader.status());
      return;
    }
    Result<ExtractStats> stats = ExtractDataset(**reader, args->out, args->overwrite);
    if (!stats.ok()) {
      exit_code = Fail("extract", stats.status());
      return;
    }
    std::cout << "extracted " << stats->files_written << " files ("
              << HumanBytes(stats->bytes_written) << ") to " << args->out << "\n";
    for (const std::string& collision : stats->case_collisions) {
      std::cout << "warning: " << collision << ": one file on a case-insensitive file system\n";
    }
  });
}

}  // namespace packrec::cli
