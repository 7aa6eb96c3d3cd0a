// memsim run: simulate one training step of a graph and report its peak memory.
#include <algorithm>
#include <memory>

#include "lib/util/atomic_file.h"
#include "sim/options/options.h"
#include "sim/ranks.h"
#include "sim/report/memviz.h"
#include "sim/report/run_report.h"
#include "sim/report/timeline.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct RunArgs {
  ConfigOptions config;
  bool json = false;
  int top = 10;
  std::string events_path;
  std::string timeline_path;
  bool explain = false;
  bool strict = false;
  int rank = 0;  ///< whose stream --events, the Chrome trace and the memory_viz pickle write
};

/// The simulated run standing for rank |rank| (every rank is listed in one run's ranks).
Result<const RankRun*> RunOfRank(const std::vector<RankRun>& runs, int rank) {
  for (const RankRun& run : runs)
    if (std::find(run.ranks.begin(), run.ranks.end(), rank) != run.ranks.end()) return &run;
  int world = 0;
  for (const RankRun& run : runs) world += static_cast<int>(run.ranks.size());
  return Status::InvalidArgument("--rank " + std::to_string(rank) + ": expected a rank from 0 to " +
                                 std::to_string(std::max(world, 1) - 1));
}


/// Writes the --timeline file, by extension: the page has a panel per distinct rank, the trace
/// and the memory_viz pickle are |r|'s (the --rank). The Chrome trace is streamed into the file.
Status WriteTimeline(const std::string& path, const Graph& g, const RunConfig& c, const std::vector<RankRun>& runs,
                     const RunResult& r, int top) {
  if (path.ends_with(".html")) return WriteFileAtomic(path, HtmlTimeline(g, PanelsOf(g, c, runs), top));
  if (path.ends_with(".pickle"))
    return WriteFileAtomic(path, ToPickle(MemoryVizSnapshot(g, r.sim.events, *r.alloc.placement)));
  MEMSIM_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::Open(path));
  MEMSIM_RETURN_IF_ERROR(StreamChromeTrace(g, r.sim.events, r.sim.peak, 1 << 20, LevelsOf(g, r, c.alloc.capacity_bytes),
                                           [&](std::string_view chunk) { return out.Write(chunk); }));
  return out.Commit();
}

/// Refuses what run would not do: --top below 0, a --timeline format it does not write.
Status CheckRunArgs(const RunArgs& a) {
  if (a.top < 0)
    return Status::InvalidArgument("--top " + std::to_string(a.top) + ": expected 0 or more (0 lists none)");
  const std::string& t = a.timeline_path;
  if (!t.empty() && !t.ends_with(".html") && !t.ends_with(".json") && !t.ends_with(".pickle"))
    return Status::InvalidArgument("--timeline \"" + t + "\": name a FILE.html (a standalone page), FILE.json (a "
                                   "Chrome trace for Perfetto) or FILE.pickle (for pytorch.org/memory_viz)");
  return Status::OK();
}

void Run(const RunArgs& a) {
  OkOrFail(CheckRunArgs(a));
  Graph g = LoadConfigGraph(a.config);
  if (a.strict) OkOrFail(RefuseRecordedRules(g));
  RunConfig c = ValueOrFail(a.config.Single("run"));
  c.sim.explain = a.explain;
  c.workspace_range = true;
  c.alloc.record_placement = !a.timeline_path.empty();
  // Several ranks: rank 0's run is the report's, every distinct rank is listed (sim/ranks.h).
  std::vector<RankRun> runs = ValueOrFail(RunRanks(g, c));
  RunResult& r = runs.front().result;
  const RunResult& chosen = ValueOrFail(RunOfRank(runs, a.rank))->result;
  // Output files are complete or absent, and a write error exits 2 (lib/util/atomic_file.h).
  if (!a.events_path.empty()) OkOrFail(WriteFileAtomic(a.events_path, EventsText(chosen.sim.events)));
  if (!a.timeline_path.empty())
    OkOrFail(WriteTimeline(a.timeline_path, g, c, runs, chosen, a.top));
  RunReport report = MakeRunReport(g, c, r, a.top);
  if (c.sim.parallel.enabled()) report.ranks = MakeRanksReport(g, c, runs);
  OkOrFail(WriteStdout(a.json ? ToJson(report).dump(2) + "\n" : ToText(report)));
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "simulate one training step and report its peak memory");
  args->config.Bind(cmd, /*lists=*/false);
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--explain", args->explain, "say what keeps each listed tensor alive at the peak (held_by)");
  cmd->add_flag("--strict", args->strict,
                "refuse a graph with ops on recorded rules (measured by the exporter: Note [Recorded rules])");
  cmd->add_option("--top", args->top, "how many tensors alive at the peak to list")->capture_default_str();
  cmd->add_option("--events", args->events_path, "write the allocate/free event stream to this file");
  cmd->add_option("--rank", args->rank,
                  "with several ranks: the rank whose stream --events and the .json / .pickle --timeline write "
                  "(default 0; the .html page shows every distinct rank)");
  cmd->add_option("--timeline", args->timeline_path,
                  "write memory over time: FILE.html (standalone page), FILE.json (Chrome trace for Perfetto) "
                  "or FILE.pickle (a _dump_snapshot() for pytorch.org/memory_viz)");
  cmd->callback([args] { Run(*args); });
}

}  // namespace memsim::cli
