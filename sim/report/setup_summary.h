// The training setup of a run in words: every setup option that differs from its default
// (checkpointing, accumulation, clipping, the optimizer's implementation, steps, parallelism,
// ...), as name/value pairs named like the command line's options. The run report's header
// and JSON `config.setup` show them, so a report says how it was made (Note [Reports describe
// their configuration] in docs/cli.md).
#ifndef MEMSIM_SIM_REPORT_SETUP_SUMMARY_H_
#define MEMSIM_SIM_REPORT_SETUP_SUMMARY_H_

#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.h"

namespace memsim {

/// {"checkpoint", "layers.[0-9]*"}, {"accumulate", "4"}, {"mesh", "dp_shard=8,tp=2"}, ... in a
/// fixed order; empty when every option is at its default.
std::vector<std::pair<std::string, std::string>> NonDefaultSetup(const SimOptions& opt);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_SETUP_SUMMARY_H_
