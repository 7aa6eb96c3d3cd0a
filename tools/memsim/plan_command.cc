// memsim plan: the cheapest training plan that fits (docs/plan.md; sim/plan/search.h).
#include <memory>

#include "lib/util/atomic_file.h"
#include "sim/options/plan_options.h"
#include "sim/plan/search.h"
#include "sim/report/plan_report.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct PlanCommandArgs {
  PlanArgs plan;
  bool json = false;
  std::string html;       ///< --html FILE
  std::string framework;  ///< --framework pytorch|torchtitan|deepspeed|hf: print the chosen plan's snippet
  bool no_timing = false;
};

void PlanCommand(const PlanCommandArgs& a) {
  PlanOptions o = ValueOrFail(a.plan.Options());
  if (!a.framework.empty() && a.framework != "pytorch" && a.framework != "torchtitan" && a.framework != "deepspeed" &&
      a.framework != "hf")
    Fail(Status::InvalidArgument("--framework \"" + a.framework + "\": expected pytorch, torchtitan, deepspeed or hf"));
  Graph g = LoadOrFail(a.plan.graph);
  PlanReport report;
  report.graph_path = a.plan.graph;
  report.blocks = PlanModelOf(g).blocks;
  report.result = ValueOrFail(Plan(g, o));
  report.timing = !a.no_timing;
  if (!a.html.empty()) OkOrFail(WriteFileAtomic(a.html, ToHtml(report)));
  if (!a.framework.empty()) {
    if (!report.result.chosen) Fail(Status::InvalidArgument("no plan fits: nothing to write for --framework"), 1);
    OkOrFail(WriteStdout(ValueOrFail(PlanSnippet(report, report.result.front[*report.result.chosen], a.framework))));
    return;
  }
  OkOrFail(WriteStdout(a.json ? ToJson(report).dump(2) + "\n" : ToText(report)));
}

}  // namespace

void RegisterPlanCommand(CLI::App& app) {
  auto args = std::make_shared<PlanCommandArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "the fastest (or smallest) training plan that fits the GPUs: precision, "
                                             "micro-batch, checkpointing, sharding, world, each simulated");
  args->plan.Bind(cmd);
  cmd->add_flag("--json", args->json, "JSON output");
  cmd->add_option("--html", args->html, "also write the ranked front as a standalone HTML page to FILE");
  cmd->add_option("--framework", args->framework,
                  "print the chosen plan set up in pytorch, torchtitan (TOML), deepspeed (JSON) or hf (TrainingArguments)");
  cmd->add_flag("--no-timing", args->no_timing, "leave the search's wall clock out (reproducible output)");
  cmd->callback([args] { PlanCommand(*args); });
}

}  // namespace memsim::cli
