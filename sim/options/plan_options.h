// memsim plan's options (docs/plan.md), bound by the command line and the Python module alike,
// and the parser that turns a plan's `memsim run` flags into the configuration `memsim run`
// simulates for them (the one option spec, sim/options/options.h).
#ifndef MEMSIM_SIM_OPTIONS_PLAN_OPTIONS_H_
#define MEMSIM_SIM_OPTIONS_PLAN_OPTIONS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lib/util/status.h"
#include "sim/plan/search.h"

namespace memsim::cli {

struct PlanArgs {
  std::string graph;
  std::string gpus;                  ///< COUNTxGPU, e.g. 8xH100-80GB (a GPU alone: one)
  int64_t global_batch = 0;
  int64_t seq = 0;
  int world_max = 0;
  std::string objective = "time";
  std::string optimizer = "adamw";
  std::string torch = "2.13";
  int threads = 0;
  bool exhaustive = false;
  double front_span = 1.25;
  std::vector<std::string> precisions, shardings, checkpoints;  ///< reduced axes ("" : all)
  std::vector<int64_t> micro_batches;
  std::vector<int> tp_degrees;

  /// Adds the options to |cmd| (the graph positional too).
  void Bind(CLI::App* cmd);
  /// The search's options; errors name the option (exit 2).
  Result<PlanOptions> Options() const;
};

/// --gpus COUNTxGPU → (count, GPU name). Error: names --gpus.
Result<std::pair<int, std::string>> ParseGpus(const std::string& s);

/// `memsim run` flags (after GRAPH) → the configuration `memsim run` makes of them.
Result<RunConfig> RunConfigOfArgs(const std::vector<std::string>& args);

}  // namespace memsim::cli

#endif  // MEMSIM_SIM_OPTIONS_PLAN_OPTIONS_H_
