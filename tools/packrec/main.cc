// packrec: the command-line face of the library. Each subcommand parses its flags and calls one
// library entry point (one file per subcommand).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli_common.h"
#include "packrec/packrec.h"

namespace {

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  return names;
}

// Levenshtein distance, for "did you mean": CLI11 2.3 (Debian 12) suggests nothing for a
// misspelt command or flag, and the names are few and short.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The one of `names` closest to `typed`, when it is close enough to be what was meant.
std::optional<std::string> Closest(std::string_view typed, const std::vector<std::string>& names) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, typed.size() / 4) + 1;
  for (const std::string& name : names) {
    const std::size_t distance = EditDistance(typed, name);
    if (distance < best_distance) {
      best_distance = distance;
      best = name;
    }
  }
  return best;
}

// After CLI11's "not expected" message: a close flag of the command for each unknown --flag.
void SuggestFlags(const CLI::App& app, const std::vector<std::string>& extras) {
  std::vector<std::string> flags;
  for (const CLI::App* command : app.get_subcommands()) {
    for (const CLI::Option* option : command->get_options()) {
      for (const std::string& name : option->get_lnames()) flags.push_back("--" + name);
    }
  }
  for (const std::string& extra : extras) {
    if (!extra.starts_with("--")) continue;
    const std::string typed = extra.substr(0, extra.find('='));
    if (const std::optional<std::string> meant = Closest(typed, flags)) {
      std::fprintf(stderr, "packrec: unknown flag %s; did you mean %s?\n", typed.c_str(),
                   meant->c_str());
    }
  }
}

// A command line that asks for JSON (a command's --json) gets its usage errors as JSON on stdout
// too, so a script parsing stdout never meets plain text.
bool AsksForJson(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--json" || arg.starts_with("--json=")) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace packrec::cli;
  CLI::App app{
      "packrec: pack small image files into LMDB, HDF5 or mmap-friendly shards, read them back "
      "fast, verify them.\n\nTypical use:\n"
      "  packrec synth demo-tree --classes 10 --per-class 200\n"
      "  packrec convert demo-tree demo.pkr\n"
      "  packrec info demo.pkr && packrec verify demo.pkr\n"
      "  packrec extract demo.pkr restored/\n"
      "  packrec bench demo-tree demo.pkr --quick\n",
      "packrec"};
  app.set_version_flag("--version", std::string("packrec ") + packrec::Version());
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 internal error, 2 bad flag or value, 3 input missing or not an "
      "image, 4 output exists, 5 dataset corrupt or truncated, 6 I/O error (disk full, "
      "permission), 7 written by a newer packrec. See docs/cli.md.");
  int exit_code = kExitOk;
  AddSynthCommand(app, exit_code);
  AddConvertCommand(app, exit_code);
  AddInfoCommand(app, exit_code);
  AddVerifyCommand(app, exit_code);
  AddExtractCommand(app, exit_code);
  AddMergeCommand(app, exit_code);
  AddBenchCommand(app, exit_code);
  const std::vector<std::string> commands = CommandNames(app);
  if (argc > 1 && argv[1][0] != '-' && std::ranges::find(commands, argv[1]) == commands.end()) {
    std::string listed;
    for (const std::string& name : commands) listed += (listed.empty() ? "" : ", ") + name;
    const std::optional<std::string> meant = Closest(argv[1], commands);
    const std::string message = "unknown command '" + std::string(argv[1]) + "'" +
                                (meant ? ": did you mean '" + *meant + "'?" : std::string()) +
                                " (commands: " + listed + "; see packrec --help)";
    std::fprintf(stderr, "packrec: %s\n", message.c_str());
    if (AsksForJson(argc, argv)) std::printf("%s\n", UsageErrorJson("", message).c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
      std::vector<std::string> extras = app.remaining();
      for (const CLI::App* command : app.get_subcommands()) {
        const std::vector<std::string> left = command->remaining();
        extras.insert(extras.end(), left.begin(), left.end());
      }
      SuggestFlags(app, extras);
    }
    if (code != 0 && AsksForJson(argc, argv)) {
      const std::string command = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
      std::printf("%s\n", UsageErrorJson(command, error.what()).c_str());
    }
    return code == 0 ? kExitOk : kExitUsage;
  } catch (const std::bad_alloc&) {
    // The library returns errors as values; these two are what the system can still throw at
    // any allocation or thread start, and they end with a message, not an abort and a core.
    std::fprintf(stderr, "packrec: out of memory\n");
    return kExitInternal;
  } catch (const std::system_error& error) {
    std::fprintf(stderr, "packrec: %s\n", error.what());
    return kExitIO;
  }
  return exit_code;
}
