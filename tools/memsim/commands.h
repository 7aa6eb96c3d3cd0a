// The memsim subcommands. Each Register*Command adds one CLI11 subcommand with its options and
// its callback; main.cc calls them in the order they appear in `memsim --help`.
// Callbacks print their report to stdout, errors to stderr, and throw CLI::RuntimeError(code)
// to exit non-zero (2 for bad input, 1 for other failures).
#ifndef MEMSIM_TOOLS_MEMSIM_COMMANDS_H_
#define MEMSIM_TOOLS_MEMSIM_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace memsim::cli {

void RegisterRunCommand(CLI::App& app);         // run_command.cc
void RegisterSummaryCommand(CLI::App& app);     // summary_command.cc
void RegisterReplayCommand(CLI::App& app);      // replay_command.cc
void RegisterImportOnnxCommand(CLI::App& app);  // import_onnx_command.cc
void RegisterSweepCommand(CLI::App& app);       // sweep_command.cc
void RegisterFitCommand(CLI::App& app);         // sweep_command.cc
void RegisterAdviseCommand(CLI::App& app);      // sweep_command.cc
void RegisterMergeCommand(CLI::App& app);       // sweep_command.cc
void RegisterPlanCommand(CLI::App& app);        // plan_command.cc

}  // namespace memsim::cli

#endif  // MEMSIM_TOOLS_MEMSIM_COMMANDS_H_
