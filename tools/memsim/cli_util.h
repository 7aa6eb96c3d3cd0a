// Helpers shared by the subcommands: loading a graph with a one-line error, and failing with
// an exit code.
#ifndef MEMSIM_TOOLS_MEMSIM_CLI_UTIL_H_
#define MEMSIM_TOOLS_MEMSIM_CLI_UTIL_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"
#include "sim/options/options.h"

namespace memsim::cli {

/// Prints "memsim: <message>" to stderr and exits with |code| (2: bad input).
[[noreturn]] void Fail(const Status& s, int code = 2);

/// Loads |path| or fails with the loader's message.
Graph LoadOrFail(const std::string& path);

/// Loads the graph |options| name and adapts it to them (--lora, --quantize-base), or fails (exit 2).
Graph LoadConfigGraph(const ConfigOptions& options);

/// Fails with |s|'s error (exit 2) unless it is OK.
inline void OkOrFail(const Status& s) {
  if (!s.ok()) Fail(s);
}

/// The value of |r|, or fails with its error (exit 2).
template <typename T>
T ValueOrFail(Result<T> r) {
  if (!r.ok()) Fail(r.status());
  return std::move(r).value();
}

}  // namespace memsim::cli

#endif  // MEMSIM_TOOLS_MEMSIM_CLI_UTIL_H_
