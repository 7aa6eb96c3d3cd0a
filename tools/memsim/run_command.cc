// memsim run: simulate one training step of a graph and report its peak memory.
#include <fstream>
#include <iostream>
#include <memory>

#include "sim/report/memviz.h"
#include "sim/report/run_report.h"
#include "sim/report/timeline.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"
#include "tools/memsim/options.h"

namespace memsim::cli {
namespace {

struct RunArgs {
  ConfigOptions config;
  bool json = false;
  int top = 10;
  std::string events_path;
  std::string timeline_path;
  bool explain = false;
};

TimelineLevels Levels(const RunResult& r) {
  TimelineLevels lv;
  if (!r.device.modelled || !r.alloc.placement) return lv;
  lv.reserved = ReservedSeries(r.alloc.placement->segment_bytes);
  lv.overhead_bytes = r.device.overhead.bytes;
  lv.capacity_bytes = r.device.capacity_bytes;
  return lv;
}

void WriteTimeline(const std::string& path, const Graph& g, const RunResult& r, int top) {
  std::ofstream out(path);
  if (!out) Fail(Status::InvalidArgument(path + ": cannot write"));
  if (path.ends_with(".html")) {
    out << HtmlTimeline(g, r.sim.events, r.sim.peak, top, Levels(r));
  } else if (path.ends_with(".pickle")) {
    out << ToPickle(MemoryVizSnapshot(g, r.sim.events, *r.alloc.placement));
  } else {
    out << ChromeTrace(g, r.sim.events, r.sim.peak, 1 << 20, Levels(r)).dump() << "\n";
  }
}

void Run(const RunArgs& a) {
  Graph g = LoadOrFail(a.config.graph);
  RunConfig c = ValueOrFail(a.config.Single("run"));
  c.sim.explain = a.explain;
  c.workspace_range = true;
  c.alloc.record_placement = !a.timeline_path.empty();
  RunResult r = ValueOrFail(RunPipeline(g, c));
  if (!a.events_path.empty()) {
    std::ofstream out(a.events_path);
    if (!out) Fail(Status::InvalidArgument(a.events_path + ": cannot write"));
    out << EventsText(r.sim.events);
  }
  if (!a.timeline_path.empty()) WriteTimeline(a.timeline_path, g, r, a.top);
  RunReport report = MakeRunReport(g, c, r, a.top);
  if (a.json)
    std::cout << ToJson(report).dump(2) << "\n";
  else
    std::cout << ToText(report);
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "simulate one training step and report its peak memory");
  args->config.Bind(cmd, /*lists=*/false);
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--explain", args->explain, "say what keeps each listed tensor alive at the peak (held_by)");
  cmd->add_option("--top", args->top, "how many tensors alive at the peak to list")->capture_default_str();
  cmd->add_option("--events", args->events_path, "write the allocate/free event stream to this file");
  cmd->add_option("--timeline", args->timeline_path,
                  "write memory over time: FILE.html (standalone page), FILE.json (Chrome trace for Perfetto) "
                  "or FILE.pickle (a _dump_snapshot() for pytorch.org/memory_viz)");
  cmd->callback([args] { Run(*args); });
}

}  // namespace memsim::cli
