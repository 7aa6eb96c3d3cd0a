// memsim summary: a per-layer table like Keras model.summary().
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "lib/analysis/summary.h"
#include "sim/report/format.h"
#include "sim/options/options.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct SummaryArgs {
  ConfigOptions config;
  bool json = false;
};

void Summary(const SummaryArgs& a) {
  Graph g = LoadConfigGraph(a.config);
  RunConfig c = ValueOrFail(a.config.Single("summary"));
  c.sim.optimizer = "none";
  auto r = Simulate(g, c.sim);
  if (!r.ok()) Fail(r.status());
  LayerTable t = SummarizeLayers(g, r->bound, r->profile, r->frozen);
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = g.name;
    j["layers"] = nlohmann::ordered_json::array();
    for (const LayerRow& l : t.rows)
      j["layers"].push_back({{"module", l.module}, {"ops", l.ops}, {"output_shape", l.output_shape},
                             {"params", l.params}, {"activation_bytes", l.activation_bytes},
                             {"saved_bytes", l.saved_bytes}});
    j["total_params"] = t.total_params;
    j["trainable_params"] = t.trainable_params;
    j["param_bytes"] = t.param_bytes;
    j["total_activation_bytes"] = t.total_activation_bytes;
    j["total_saved_bytes"] = t.total_saved_bytes;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("%-34s %-22s %14s %14s %14s\n", "layer (ops)", "output shape", "params", "activations", "saved for bwd");
  std::printf("%s\n", std::string(102, '=').c_str());
  for (const LayerRow& l : t.rows) {
    std::string name = (l.module.empty() ? "(top)" : l.module) + " (" + l.ops + ")";
    if (name.size() > 34) name = name.substr(0, 31) + "...";
    std::printf("%-34s %-22s %14lld %14s %14s\n", name.c_str(), l.output_shape.c_str(), (long long)l.params,
                HumanBytes(l.activation_bytes).c_str(), HumanBytes(l.saved_bytes).c_str());
  }
  std::printf("%s\n", std::string(102, '=').c_str());
  std::printf("Total params: %lld (%s)\nTrainable params: %lld\nNon-trainable params: %lld\n",
              (long long)t.total_params, HumanBytes(t.param_bytes).c_str(), (long long)t.trainable_params,
              (long long)(t.total_params - t.trainable_params));
  std::printf("Activations (all op outputs): %s\nSaved for backward: %s\n", HumanBytes(t.total_activation_bytes).c_str(),
              HumanBytes(t.total_saved_bytes).c_str());
}

}  // namespace

void RegisterSummaryCommand(CLI::App& app) {
  auto args = std::make_shared<SummaryArgs>();
  CLI::App* cmd = app.add_subcommand("summary", "per-layer table: output shape, params, activation and saved bytes");
  args->config.Bind(cmd, /*lists=*/false, ConfigOptions::Scope::kShapes);
  cmd->add_flag("--json", args->json, "print the table as JSON");
  cmd->callback([args] { Summary(*args); });
}

}  // namespace memsim::cli
