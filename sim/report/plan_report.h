// memsim plan's report: the Pareto front of the plans that fit, ranked (text, JSON, HTML), the
// chosen plan with its `memsim run` flags, and a ready-to-run snippet of it in the user's
// framework (PyTorch, torchtitan TOML, DeepSpeed JSON, Hugging Face TrainingArguments).
#ifndef MEMSIM_SIM_REPORT_PLAN_REPORT_H_
#define MEMSIM_SIM_REPORT_PLAN_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lib/util/status.h"
#include "sim/plan/search.h"

namespace memsim {

struct PlanReport {
  std::string graph_path;            ///< GRAPH as given, for the `memsim run` line
  std::vector<std::string> blocks;   ///< the repeated blocks (snippets wrap and checkpoint them)
  PlanResult result;
  bool timing = true;                ///< print the search's wall clock (golden tests turn it off)
};

/// The `memsim run` command line of |row| (shell-quoted).
std::string RunCommandOf(const PlanReport& r, const PlanRow& row);

/// The chosen plan set up in |framework|: pytorch, torchtitan, deepspeed or hf. Error: another name.
Result<std::string> PlanSnippet(const PlanReport& r, const PlanRow& row, std::string_view framework);

nlohmann::ordered_json ToJson(const PlanReport& r);
std::string ToText(const PlanReport& r);
std::string ToHtml(const PlanReport& r);

}  // namespace memsim

#endif  // MEMSIM_SIM_REPORT_PLAN_REPORT_H_
