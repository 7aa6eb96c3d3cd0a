// Allocator throughput on a replayed real trace (events per second, one core), plus the full
// snapshot replay and SimulateAllocator. Results and the command are in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <random>
#include <unordered_map>
#include <vector>

#include "sim/allocator/caching_allocator.h"
#include "sim/allocator/simulate.h"
#include "sim/replay/replay.h"
#include "sim/replay/snapshot.h"

namespace memsim {
namespace {

constexpr const char* kTrace =
    "/tests/data/gpu/transformer_small_ctx256_bs32_fwd_bwd_warm.pickle";

// The alloc/free events of a real trace as (bytes > 0: malloc into slot | bytes == 0: free slot).
struct Op {
  int64_t bytes;
  uint32_t slot;
};

const std::vector<Op>& TraceOps() {
  static const std::vector<Op> ops = [] {
    std::vector<Op> out;
    auto snap = LoadSnapshotFile(std::string(MEMSIM_SOURCE_DIR) + kTrace);
    if (!snap.ok()) return out;
    std::unordered_map<uint64_t, uint32_t> live;
    uint32_t next = 0;
    for (const TraceEvent& e : snap->trace) {
      if (e.action == TraceAction::kAlloc && e.size > 0) {
        live[e.addr] = next;
        out.push_back({e.size, next++});
      } else if (e.action == TraceAction::kFreeCompleted) {
        auto it = live.find(e.addr);
        if (it == live.end()) continue;  // allocated before recording: not in a cold replay
        out.push_back({0, it->second});
        live.erase(it);
      }
    }
    return out;
  }();
  return ops;
}

// One cold allocator per pass over the trace (a simulated training step).
void BM_CachingAllocatorTrace(benchmark::State& state, bool expandable) {
  const std::vector<Op>& ops = TraceOps();
  if (ops.empty()) {
    state.SkipWithError("trace file missing");
    return;
  }
  AllocatorConfig cfg;
  cfg.expandable_segments = expandable;
  uint32_t slots = 0;
  for (const Op& op : ops) slots = std::max(slots, op.slot + 1);
  std::vector<BlockId> block(slots, kNoBlock);
  for (auto _ : state) {
    CachingAllocator a(cfg);
    for (const Op& op : ops) {
      if (op.bytes > 0) {
        block[op.slot] = a.Malloc(op.bytes);
      } else {
        a.Free(block[op.slot]);
      }
    }
    benchmark::DoNotOptimize(a.stats().reserved_bytes.all().peak);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ops.size()));
  state.counters["events_per_pass"] = static_cast<double>(ops.size());
}
BENCHMARK_CAPTURE(BM_CachingAllocatorTrace, default, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CachingAllocatorTrace, expandable, true)->Unit(benchmark::kMicrosecond);

// Steady state: the same allocator replays the trace again and again (cache warm).
void BM_CachingAllocatorTraceWarm(benchmark::State& state) {
  const std::vector<Op>& ops = TraceOps();
  if (ops.empty()) {
    state.SkipWithError("trace file missing");
    return;
  }
  uint32_t slots = 0;
  for (const Op& op : ops) slots = std::max(slots, op.slot + 1);
  std::vector<BlockId> block(slots, kNoBlock);
  CachingAllocator a({});
  for (auto _ : state) {
    for (const Op& op : ops) {
      if (op.bytes > 0) {
        block[op.slot] = a.Malloc(op.bytes);
      } else {
        a.Free(block[op.slot]);
        block[op.slot] = kNoBlock;
      }
    }
    for (BlockId& b : block) {
      if (b != kNoBlock) a.Free(b);
      b = kNoBlock;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ops.size()));
}
BENCHMARK(BM_CachingAllocatorTraceWarm)->Unit(benchmark::kMicrosecond);

// Many small tensors and many free blocks: a synthetic stress trace (fixed seed).
void BM_CachingAllocatorRandom(benchmark::State& state) {
  std::mt19937_64 rng(301);
  std::vector<Op> ops;
  std::vector<uint32_t> live;
  uint32_t next = 0;
  for (int i = 0; i < 200000; ++i) {
    if (live.size() < 2000 && (live.empty() || rng() % 2 == 0)) {
      const int64_t bytes = rng() % 8 == 0 ? 1 + static_cast<int64_t>(rng() % (64 << 20))
                                           : 1 + static_cast<int64_t>(rng() % (1 << 20));
      ops.push_back({bytes, next});
      live.push_back(next++);
    } else {
      const size_t k = rng() % live.size();
      ops.push_back({0, live[k]});
      live[k] = live.back();
      live.pop_back();
    }
  }
  std::vector<BlockId> block(next, kNoBlock);
  for (auto _ : state) {
    CachingAllocator a({});
    for (const Op& op : ops) {
      if (op.bytes > 0) {
        block[op.slot] = a.Malloc(op.bytes);
      } else {
        a.Free(block[op.slot]);
      }
    }
    benchmark::DoNotOptimize(a.stats().reserved_bytes.all().peak);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ops.size()));
}
BENCHMARK(BM_CachingAllocatorRandom)->Unit(benchmark::kMillisecond);

// End to end: warm-start reconstruction + replay + layout check of the real snapshot.
void BM_ReplaySnapshot(benchmark::State& state) {
  auto snap = LoadSnapshotFile(std::string(MEMSIM_SOURCE_DIR) + kTrace);
  if (!snap.ok()) {
    state.SkipWithError("trace file missing");
    return;
  }
  for (auto _ : state) {
    auto r = ReplaySnapshot(*snap);
    benchmark::DoNotOptimize(r.ok());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(snap->trace.size()));
}
BENCHMARK(BM_ReplaySnapshot)->Unit(benchmark::kMillisecond);

// Parsing the 0.5 MB snapshot pickle.
void BM_LoadSnapshotPickle(benchmark::State& state) {
  for (auto _ : state) {
    auto snap = LoadSnapshotFile(std::string(MEMSIM_SOURCE_DIR) + kTrace);
    benchmark::DoNotOptimize(snap.ok());
  }
}
BENCHMARK(BM_LoadSnapshotPickle)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memsim
