// What every subcommand shares: exit codes, error printing, human-readable sizes.
#ifndef PACKREC_TOOLS_PACKREC_CLI_COMMON_H_
#define PACKREC_TOOLS_PACKREC_CLI_COMMON_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec::cli {

// Documented in docs/cli.md; scripts depend on them: never renumber.
enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,
  kExitUsage = 2,         // bad flag or flag value
  kExitInput = 3,         // missing input, no images found, an input that is not an image
  kExitOutputExists = 4,  // output exists (pass --overwrite) or is not ours to replace
  kExitCorrupt = 5,       // dataset corrupt or truncated; verify found problems
  kExitIO = 6,            // the system refused: permission, disk full, ...
  kExitNotSupported = 7,  // written by a newer packrec; or needs what this machine lacks
};

// `text` safe for a terminal line: control characters and bytes that are not UTF-8 as \xNN, so
// a key holding a newline or raw binary cannot forge a line or garble the terminal.
std::string PrintableText(std::string_view text);

int ExitCodeFor(const Status& status);
// The status code as one word for JSON ("AlreadyExists", "InvalidInput", "Corruption"): stable
// for scripts to compare, unlike the message.
std::string CodeId(StatusCode code);
// What the CLI tells the user to do about an error (Status::remedy), in its flags' terms.
std::string_view Advice(Remedy remedy);
// Prints "packrec <command>: error: <status>; <advice>" to stderr and returns its exit code.
// With `json` (the command's --json) it also prints ErrorJson on stdout: a script that parses
// stdout gets JSON in every outcome.
int Fail(const std::string& command, const Status& status, bool json = false);
// {"error": {"command", "code", "exit_code", "message", "advice", "path", "record_index",
// "byte_offset"}}: the error as data (docs/cli.md, "Machine-readable output").
std::string ErrorJson(const std::string& command, const Status& status);
// The same for a command line CLI11 refused (exit code 2): code "InvalidArgument".
std::string UsageErrorJson(const std::string& command, const std::string& message);

// Adds --max-pixels N to `command`: the pixel limit of every probe and decode in this run
// (SetMaxImagePixels; default PACKREC_MAX_IMAGE_PIXELS or 178956970, PIL's bomb threshold).
void AddMaxPixelsOption(CLI::App* command);
// Adds what reading a dataset at a URL takes (docs/remote.md): --cache DIR, --cache-size SIZE,
// --remote-timeout SECONDS and --remote-tries N, stored into `remote`. The environment's
// PACKREC_REMOTE_* and PACKREC_CACHE_* variables, when set, win over them.
void AddRemoteOptions(CLI::App* command, RemoteOptions& remote);
std::string HumanBytes(std::uint64_t bytes);
// A check for 64-bit unsigned flags: decimal digits only, at most 2^64 - 1. CLI11 alone lets "-1"
// wrap around and "" through.
const CLI::Validator& Uint64Digits();

// Each subcommand registers itself and stores its exit code in `exit_code` when it runs.
void AddSynthCommand(CLI::App& app, int& exit_code);
void AddConvertCommand(CLI::App& app, int& exit_code);
void AddInfoCommand(CLI::App& app, int& exit_code);
void AddVerifyCommand(CLI::App& app, int& exit_code);
void AddExtractCommand(CLI::App& app, int& exit_code);
void AddMergeCommand(CLI::App& app, int& exit_code);
void AddBenchCommand(CLI::App& app, int& exit_code);

}  // namespace packrec::cli

#endif  // PACKREC_TOOLS_PACKREC_CLI_COMMON_H_
