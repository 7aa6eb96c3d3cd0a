// memsim sweep: the cartesian product of configuration lists, simulated in parallel.
// memsim fit: the largest batch that fits a device. memsim advise: single changes ranked.
#include <algorithm>
#include <memory>

#include "lib/util/atomic_file.h"
#include "sim/advise.h"
#include "sim/report/sweep_report.h"
#include "sim/sweep.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"
#include "tools/memsim/options.h"

namespace memsim::cli {
namespace {

struct SweepArgs {
  ConfigOptions config;
  int threads = 0;
  int64_t max_batch = 65536;
  bool json = false;
  bool csv = false;
};

constexpr size_t kMaxConfigurations = 1000000;

void Sweep(const SweepArgs& a) {
  Graph g = LoadOrFail(a.config.graph);
  SweepSpec spec = ValueOrFail(a.config.Spec());
  size_t n = ValueOrFail(spec.Count(kMaxConfigurations));
  std::vector<RunConfig> configs;
  configs.reserve(n);
  for (size_t i = 0; i < n; ++i) configs.push_back(spec.Config(i));
  SweepTable table{g.name, &spec, RunSweep(g, configs, a.threads)};
  // A sweep where no configuration is valid is a usage error, as `run` would say.
  if (!table.rows.empty() && std::none_of(table.rows.begin(), table.rows.end(), [](const SweepRow& r) { return r.status.ok(); }))
    Fail(table.rows.front().status);
  OkOrFail(WriteStdout(a.json ? ToJson(table).dump(2) + "\n" : ToText(table, a.csv)));
}

void Fit(const SweepArgs& a) {
  Graph g = LoadOrFail(a.config.graph);
  RunConfig base = ValueOrFail(a.config.Single("fit"));
  FitReport report{g.name, base.alloc.capacity_bytes, a.max_batch, ValueOrFail(FitBatch(g, base, a.max_batch))};
  OkOrFail(WriteStdout(a.json ? ToJson(report).dump(2) + "\n" : ToText(report)));
}

void AdviseCommand(const SweepArgs& a) {
  Graph g = LoadOrFail(a.config.graph);
  RunConfig base = ValueOrFail(a.config.Single("advise"));
  AdviseReport report = ValueOrFail(Advise(g, base, a.threads, a.max_batch));
  OkOrFail(WriteStdout(a.json ? ToJson(report).dump(2) + "\n" : ToText(report)));
}

void AddCommon(CLI::App* cmd, SweepArgs* a, bool lists) {
  a->config.Bind(cmd, lists);
  cmd->add_flag("--json", a->json, "JSON output");
}

}  // namespace

void RegisterAdviseCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("advise", "which single change (in-place, expandable segments, batch, ...) saves the most memory");
  AddCommon(cmd, args.get(), false);
  cmd->add_option("--max-batch", args->max_batch, "upper end of the fit search")->capture_default_str();
  cmd->callback([args] { AdviseCommand(*args); });
}

void RegisterSweepCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "simulate every combination of the given options, in parallel");
  AddCommon(cmd, args.get(), true);
  cmd->add_flag("--csv", args->csv, "CSV output (bytes as integers)");
  cmd->add_option("--threads", args->threads, "worker threads (0 = all cores); output does not depend on it");
  cmd->callback([args] { Sweep(*args); });
}

void RegisterFitCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("fit", "the largest batch that fits a device (--gpu or --capacity)");
  AddCommon(cmd, args.get(), false);
  cmd->add_option("--max-batch", args->max_batch, "upper end of the search")->capture_default_str();
  cmd->callback([args] { Fit(*args); });
}

}  // namespace memsim::cli
