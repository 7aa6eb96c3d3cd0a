// Helpers shared by the subcommands: loading a graph with a one-line error, the common
// simulation options, and failing with an exit code.
#ifndef MEMSIM_TOOLS_MEMSIM_CLI_UTIL_H_
#define MEMSIM_TOOLS_MEMSIM_CLI_UTIL_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/gpus.h"
#include "sim/simulator.h"

namespace memsim::cli {

/// Prints "memsim: <message>" to stderr and exits with |code| (2: bad input).
[[noreturn]] void Fail(const Status& s, int code = 2);

/// Loads |path| or fails with the loader's message.
Graph LoadOrFail(const std::string& path);

/// The GPU named by --gpu, or fails listing the known names.
GpuSpec GpuOrFail(const std::string& name);

/// Options shared by run-like commands; Bind() adds them to a subcommand.
struct CommonOptions {
  std::string graph;
  int64_t batch = -1;
  std::vector<std::string> sets;
  std::string profile = "cuda";

  void Bind(CLI::App* cmd);
  /// Fills |opt|'s symbols from --batch and --set, or fails naming the bad --set.
  void ApplyTo(SimOptions* opt) const;
};

}  // namespace memsim::cli

#endif  // MEMSIM_TOOLS_MEMSIM_CLI_UTIL_H_
