// packrec: the command-line face of the library. Each subcommand parses its flags and calls one
// library entry point (one file per subcommand).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <new>
#include <system_error>

#include "cli_common.h"
#include "packrec/packrec.h"

namespace {

bool IsCommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (command->get_name() == name) return true;
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
  if (argc > 1 && argv[1][0] != '-' && !IsCommand(app, argv[1])) {
    std::fprintf(stderr,
                 "packrec: unknown command '%s' (commands: synth, convert, info, verify, "
                 "extract, bench; see packrec --help)\n",
                 argv[1]);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
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
