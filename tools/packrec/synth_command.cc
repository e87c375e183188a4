#include <iostream>

#include "cli_common.h"
#include "packrec/synth.h"

namespace packrec::cli {

void AddSynthCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "synth", "Write a synthetic ImageNet-like tree of JPEGs (OUT/<class>/<file>.JPEG)");
  struct Args {
    std::string out;
    SynthOptions options;
  };
  auto args = std::make_shared<Args>();
  command->add_option("OUT", args->out, "Directory to create (must not exist or be empty)")
      ->required();
  command->add_option("--classes", args->options.classes, "Number of class folders")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  command->add_option("--per-class", args->options.per_class, "Images per class")
      ->check(CLI::Range(1u, 10000000u))
      ->capture_default_str();
  command->add_option("--seed", args->options.seed, "Seed; the same seed gives the same bytes")
      ->check(Uint64Digits())
      ->capture_default_str();
  command->add_option("--width", args->options.mean_width, "Mean width (sizes vary +-25%)")
      ->check(CLI::Range(16u, 16384u))
      ->capture_default_str();
  command->add_option("--height", args->options.mean_height, "Mean height")
      ->check(CLI::Range(16u, 16384u))
      ->capture_default_str();
  command->callback([args, &exit_code] {
    Result<SynthStats> stats = WriteSyntheticTree(args->out, args->options);
    if (!stats.ok()) {
      exit_code = Fail("synth", stats.status());
      return;
    }
    std::cout << "wrote " << stats->files << " JPEGs (" << HumanBytes(stats->bytes) << ") in "
              << args->options.classes << " classes to " << args->out << "\n";
  });
}

}  // namespace packrec::cli
