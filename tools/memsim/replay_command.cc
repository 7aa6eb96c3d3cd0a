// `memsim replay FILE [--alloc-conf STR] [--json]`: replays a real PyTorch memory recording
// (a _dump_snapshot() pickle, or the alloc_data JSON / trace_plot HTML of memory_viz) through
// the caching-allocator model and compares peaks and decisions with the recording.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct ReplayArgs {
  std::string file;
  std::string alloc_conf;
  bool json = false;
};

std::string MiB(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

void PrintText(const std::string& file, const ReplayReport& r) {
  std::printf("replay: %s (%s)\n", file.c_str(), r.format.c_str());
  std::printf(
      "alloc conf: %s%s\n", r.alloc_conf.empty() ? "(defaults)" : r.alloc_conf.c_str(),
      r.override_conf ? "  [override; cold start from the live blocks]" : "  [as recorded]");
  if (r.warm_start) {
    std::printf(
        "start state: %lld segments, %lld live blocks rebuilt from the dump (%d restarts)\n",
        static_cast<long long>(r.initial_segments), static_cast<long long>(r.initial_live_blocks),
        r.restarts);
  }
  std::printf("trace: %lld events, %lld allocations\n", static_cast<long long>(r.trace_events),
              static_cast<long long>(r.allocs));
  std::printf("%-28s %18s %18s\n", "", "recorded", "simulated");
  if (r.recorded_peak_reserved_bytes) {
    const double err = *r.recorded_peak_reserved_bytes
                           ? 100.0 *
                                 static_cast<double>(r.simulated_peak_reserved_bytes -
                                                     *r.recorded_peak_reserved_bytes) /
                                 static_cast<double>(*r.recorded_peak_reserved_bytes)
                           : 0.0;
    std::printf("%-28s %18s %18s  (%+.3f%%)\n", "peak reserved",
                MiB(*r.recorded_peak_reserved_bytes).c_str(),
                MiB(r.simulated_peak_reserved_bytes).c_str(), err);
  } else {
    std::printf("%-28s %18s %18s\n", "peak reserved", "n/a",
                MiB(r.simulated_peak_reserved_bytes).c_str());
  }
  std::printf("%-28s %18s %18s\n", "peak allocated (requested)",
              MiB(r.recorded_peak_allocated_bytes).c_str(),
              MiB(r.simulated_peak_requested_bytes).c_str());
  std::printf("%-28s %18s %18s\n", "peak allocated (blocks)", "n/a",
              MiB(r.simulated_peak_allocated_bytes).c_str());
  if (r.segment_allocs_recorded) {
    std::printf("segment allocations: %lld recorded, %lld simulated, %lld matched (%.1f%%)\n",
                static_cast<long long>(*r.segment_allocs_recorded),
                static_cast<long long>(r.segment_allocs_simulated.value_or(0)),
                static_cast<long long>(r.segment_allocs_matched.value_or(0)),
                100.0 * SegmentMatchRate(r));
  } else {
    std::printf("segment allocations: n/a (the file has no segment information)\n");
  }
  if (r.alloc_decisions_matched) {
    std::printf("allocations at the recorded address: %lld / %lld\n",
                static_cast<long long>(*r.alloc_decisions_matched),
                static_cast<long long>(r.allocs));
  }
  if (r.final_layout_matches) {
    std::printf("final layout matches the dump: %s\n", *r.final_layout_matches ? "yes" : "no");
  }
}

}  // namespace

void RegisterReplayCommand(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand("replay",
                                     "replay a PyTorch memory snapshot (pickle or memory_viz "
                                     "alloc_data) through the allocator model");
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
    if (!args->alloc_conf.empty()) {
      if (Result<AllocatorConfig> c = ParseAllocConf(args->alloc_conf); !c.ok())
        Fail(c.status().WithPrefix("--alloc-conf"));
      opt.alloc_conf = args->alloc_conf;
    }
    Result<ReplayReport> r = ReplaySnapshot(*snap, opt);
    if (!r.ok()) Fail(r.status().WithPrefix(args->file));
    if (args->json) {
      nlohmann::ordered_json j;
      j["file"] = args->file;
      const nlohmann::ordered_json report = ReplayReportToJson(*r);
      for (auto it = report.begin(); it != report.end(); ++it) j[it.key()] = it.value();
      std::cout << j.dump(2) << "\n";
    } else {
      PrintText(args->file, *r);
    }
  });
}

}  // namespace memsim::cli
