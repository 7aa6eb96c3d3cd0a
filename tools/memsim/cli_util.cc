#include "tools/memsim/cli_util.h"

#include <cstdio>
#include <cstdlib>

#include "lib/io/graph_json.h"

namespace memsim::cli {

void Fail(const Status& s, int code) {
  std::fprintf(stderr, "memsim: %s\n", s.message().c_str());
  std::fflush(stdout);
  std::exit(code);
}

Graph LoadOrFail(const std::string& path) {
  auto g = LoadGraph(path);
  if (!g.ok()) Fail(g.status());
  return std::move(g).value();
}

GpuSpec GpuOrFail(const std::string& name) {
  auto gpu = FindGpu(name);
  if (!gpu) Fail(Status::InvalidArgument("unknown --gpu \"" + name + "\" (known: " + GpuNames() + ")"));
  return *gpu;
}

void CommonOptions::Bind(CLI::App* cmd) {
  cmd->add_option("graph", graph, "graph file (JSON, see docs/graph-format.md)")->required();
  cmd->add_option("--batch", batch, "value of the symbol `batch`");
  cmd->add_option("--set", sets, "bind a symbol: --set seq=512 (repeatable)");
  cmd->add_option("--profile", profile, "device profile: cuda (PyTorch 2.x) or cpu (PyTorch 1.13 CPU)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
}

void CommonOptions::ApplyTo(SimOptions* opt) const {
  if (batch >= 0) opt->symbols["batch"] = batch;
  for (const std::string& s : sets) {
    auto eq = s.find('=');
    char* end = nullptr;
    long long v = eq == std::string::npos ? 0 : std::strtoll(s.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || end == s.c_str() + eq + 1 || *end != '\0' || v < 0)
      Fail(Status::InvalidArgument("--set \"" + s + "\": expected SYMBOL=non-negative integer"));
    opt->symbols[s.substr(0, eq)] = v;
  }
  opt->profile = profile;
}

}  // namespace memsim::cli
