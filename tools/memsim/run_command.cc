// memsim run: simulate one training step of a graph and report its peak memory.
#include <fstream>
#include <iostream>
#include <memory>

#include "sim/report.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct RunArgs {
  CommonOptions common;
  std::string optimizer = "sgd";
  std::string step = "first";
  std::vector<std::string> freeze;
  int64_t freeze_params = 0;
  std::string inplace = "keep";
  bool json = false;
  int top = 10;
  std::string events_path;
};

void Run(const RunArgs& a) {
  Graph g = LoadOrFail(a.common.graph);
  SimOptions opt;
  a.common.ApplyTo(&opt);
  opt.optimizer = a.optimizer;
  opt.first_step = a.step == "first";
  opt.freeze_globs = a.freeze;
  opt.freeze_params = a.freeze_params;
  if (a.inplace != "keep") opt.inplace = a.inplace == "on";
  auto r = Simulate(g, opt);
  if (!r.ok()) Fail(r.status());
  if (!a.events_path.empty()) {
    std::ofstream out(a.events_path);
    if (!out) Fail(Status::InvalidArgument(a.events_path + ": cannot write"));
    out << EventsText(r->events);
  }
  if (a.json) std::cout << RunReportJson(g, opt, *r, a.top).dump(2) << "\n";
  else std::cout << RunReportText(g, opt, *r, a.top);
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "simulate one training step and report its peak memory");
  args->common.Bind(cmd);
  cmd->add_option("--optimizer", args->optimizer, "none, sgd, momentum, nesterov, adam, adamw, adam_amsgrad, "
                                                  "adamw_amsgrad, adagrad, rmsprop, rmsprop_momentum, rmsprop_centered")
      ->capture_default_str();
  cmd->add_option("--step", args->step, "first (optimizer state created during the step) or steady")
      ->check(CLI::IsMember({"first", "steady"}))
      ->capture_default_str();
  cmd->add_option("--freeze", args->freeze, "freeze parameters whose name matches this glob (repeatable)");
  cmd->add_option("--freeze-params", args->freeze_params, "freeze the first K parameter tensors (registration order)");
  cmd->add_option("--inplace-activations", args->inplace, "on, off, or keep the graph's in-place flags")
      ->check(CLI::IsMember({"on", "off", "keep"}))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_option("--top", args->top, "how many tensors alive at the peak to list")->capture_default_str();
  cmd->add_option("--events", args->events_path, "write the allocate/free event stream to this file");
  cmd->callback([args] { Run(*args); });
}

}  // namespace memsim::cli
