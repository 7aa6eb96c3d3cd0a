// `memsim replay FILE [--alloc-conf STR] [--json]`: replays a real PyTorch memory recording
// (a _dump_snapshot() pickle, or the alloc_data JSON / trace_plot HTML of memory_viz) through
// the caching-allocator model, compares peaks and decisions with the recording, explains the
// fragmentation at the peak and replays it under expandable_segments / max_split_size_mb.
#include <memory>
#include <string>

#include "lib/util/atomic_file.h"
#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"
#include "sim/report/replay_report.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct ReplayArgs {
  std::string file;
  std::string alloc_conf;
  bool json = false;
};

}  // namespace

void RegisterReplayCommand(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand("replay",
                                     "replay a PyTorch memory snapshot (pickle or memory_viz "
                                     "alloc_data) through the allocator model: recorded vs simulated, "
                                     "the fragmentation at the peak, expandable_segments / "
                                     "max_split_size_mb what-ifs");
  cmd->add_option("FILE", args->file,
                  "torch.cuda.memory._dump_snapshot() pickle, alloc_data JSON or trace_plot HTML")
      ->required();
  cmd->add_option("--alloc-conf", args->alloc_conf,
                  "simulate this PYTORCH_CUDA_ALLOC_CONF instead of the recorded settings");
  cmd->add_flag("--json", args->json, "print a JSON report");
  cmd->callback([args]() {
    Result<MemorySnapshot> snap = LoadSnapshotFile(args->file);
    if (!snap.ok()) Fail(snap.status());
    ReplayOptions opt;
    opt.what_if = true;
    if (!args->alloc_conf.empty()) {
      if (Result<AllocatorConfig> c = ParseAllocConf(args->alloc_conf); !c.ok())
        Fail(c.status().WithPrefix("--alloc-conf"));
      opt.alloc_conf = args->alloc_conf;
    }
    Result<ReplayReport> r = ReplaySnapshot(*snap, opt);
    if (!r.ok()) Fail(r.status().WithPrefix(args->file));
    OkOrFail(WriteStdout(args->json ? ReplayJson(args->file, *r).dump(2) + "\n" : ReplayText(args->file, *r)));
  });
}

}  // namespace memsim::cli
