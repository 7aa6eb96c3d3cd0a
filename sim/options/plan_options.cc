#include "sim/options/plan_options.h"

#include <algorithm>
#include <cctype>

#include "lib/util/text_limits.h"
#include "sim/options/options.h"
#include "sim/options/parse_error.h"

namespace memsim::cli {

void PlanArgs::Bind(CLI::App* cmd) {
  cmd->add_option("graph", graph, "graph file (JSON, see docs/graph-format.md)")->required();
  cmd->add_option("--gpus", gpus, "the devices: COUNTxGPU, e.g. 8xH100-80GB (catalog names as --gpu takes them)")
      ->required();
  cmd->add_option("--global-batch", global_batch, "samples per optimizer step: micro-batch x accumulation x world")
      ->required();
  cmd->add_option("--seq", seq, "value of the symbol seq (default: the graph's)");
  cmd->add_option("--world-max", world_max, "the largest data-parallel world tried (default: every GPU)");
  cmd->add_option("--objective", objective,
                  "which plan of the front: time (fastest, default), memory (smallest), balanced (time x memory)");
  cmd->add_option("--optimizer", optimizer, "the optimizer trained with (default adamw)")->capture_default_str();
  cmd->add_option("--torch", torch, "the PyTorch release whose rules apply: 2.13 (default) or 1.13")
      ->check(CLI::IsMember({"1.13", "2.13"}));
  cmd->add_option("--threads", threads, "worker threads (0 = all cores); output does not depend on it");
  cmd->add_option("--front-span", front_span,
                  "--objective time: search the front up to this many times the fastest fitting plan's step time "
                  "(0: the whole front)")
      ->capture_default_str();
  cmd->add_flag("--exhaustive", exhaustive, "simulate every candidate, no pruning (to check the pruned search)");
  cmd->add_option("--precision", precisions, "only these precisions: fp32, amp-bf16, amp-fp16, bf16")->delimiter(',');
  cmd->add_option("--sharding", shardings,
                  "only these shardings: ddp, zero1, zero2, zero3, zero3-offload, fsdp, fsdp-grad-op, fsdp-offload, "
                  "fsdp2, fsdp2-no-reshard, hsdp")
      ->delimiter(',');
  cmd->add_option("--checkpoints", checkpoints, "only these checkpointings: none, all, every-K, sac-all, sac-every-K")
      ->delimiter(',');
  cmd->add_option("--micro-batch", micro_batches, "only these micro-batches")->delimiter(',');
  cmd->add_option("--tp", tp_degrees, "only these tensor-parallel degrees (1: none)")->delimiter(',');
}

Result<std::pair<int, std::string>> ParseGpus(const std::string& s) {
  const size_t x = s.find_first_of("xX");
  if (x == std::string::npos || x == 0 || !std::all_of(s.begin(), s.begin() + static_cast<long>(x), ::isdigit))
    return std::make_pair(1, s);  // a GPU alone
  if (x > 6) return Status::InvalidArgument("--gpus \"" + Excerpt(s) + "\": expected COUNTxGPU with COUNT 1 to 100000");
  const int n = std::stoi(s.substr(0, x));
  if (n < 1 || n > 100000) return Status::InvalidArgument("--gpus \"" + Excerpt(s) + "\": expected COUNTxGPU with COUNT 1 to 100000");
  return std::make_pair(n, s.substr(x + 1));
}

Result<PlanOptions> PlanArgs::Options() const {
  PlanOptions o;
  PlanRequest& r = o.request;
  MEMSIM_ASSIGN_OR_RETURN(auto g, ParseGpus(gpus));
  r.gpus = g.first;
  r.gpu = g.second;
  r.global_batch = global_batch;
  if (seq < 0) return Status::InvalidArgument("--seq " + std::to_string(seq) + ": expected 1 or more");
  r.seq = seq;
  if (world_max < 0) return Status::InvalidArgument("--world-max " + std::to_string(world_max) + ": expected 1 or more");
  r.world_max = world_max;
  r.optimizer = optimizer;
  r.torch = torch;
  MEMSIM_ASSIGN_OR_RETURN(o.objective, ParseObjective(objective));
  for (const std::string& p : precisions) {
    MEMSIM_ASSIGN_OR_RETURN(Precision v, ParsePrecision(p));
    r.precisions.push_back(v);
  }
  for (const std::string& p : shardings) {
    MEMSIM_ASSIGN_OR_RETURN(Sharding v, ParseSharding(p));
    r.shardings.push_back(v);
  }
  for (const std::string& p : checkpoints) {
    MEMSIM_ASSIGN_OR_RETURN(Checkpointing v, ParseCheckpointing(p));
    r.checkpoints.push_back(v);
  }
  for (int64_t m : micro_batches)
    if (m < 1) return Status::InvalidArgument("--micro-batch " + std::to_string(m) + ": expected 1 or more");
  r.micro_batches = micro_batches;
  for (int t : tp_degrees)
    if (t < 1 || t > 1024) return Status::InvalidArgument("--tp " + std::to_string(t) + ": expected 1 to 1024");
  r.tp_degrees = tp_degrees;
  o.threads = threads;
  o.exhaustive = exhaustive;
  if (!(front_span == 0 || (front_span >= 1 && front_span <= 1e6)))
    return Status::InvalidArgument("--front-span " + std::to_string(front_span) + ": expected 0 (the whole front) or 1 or more");
  o.front_span = front_span;
  o.configure = RunConfigOfArgs;
  return o;
}

Result<RunConfig> RunConfigOfArgs(const std::vector<std::string>& args) {
  CLI::App app{"memsim run"};
  ConfigOptions options;
  options.Bind(&app, /*lists=*/false);
  GuardIntegerText(&app);
  std::vector<std::string> argv = args;
  argv.insert(argv.begin(), "graph");
  std::reverse(argv.begin(), argv.end());  // CLI11 takes the vector reversed
  try {
    app.parse(argv);
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(ParseErrorMessage(app, e));
  }
  return options.Single("run");
}

}  // namespace memsim::cli
