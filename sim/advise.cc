#include "sim/advise.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "lib/ir/module_paths.h"
#include "sim/fit.h"
#include "sim/ranks.h"

namespace memsim {

std::vector<std::string> RepeatedBlocks(const Graph& g) {
  // Module paths ending in an index ("layer1.0", "transformer.h.11"), whose parent has several.
  std::map<std::string, std::set<std::string>> children;
  for (const std::string& p : ModulePaths(g)) {
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string last = p.substr(dot + 1);
    if (!last.empty() && std::all_of(last.begin(), last.end(), ::isdigit)) children[p.substr(0, dot)].insert(p);
  }
  std::vector<std::string> blocks;
  for (const auto& entry : children) {
    const std::string& parent = entry.first;  // not a structured binding: clang 14 cannot capture one
    const std::set<std::string>& kids = entry.second;
    if (kids.size() < 2) continue;
    bool nested = std::any_of(blocks.begin(), blocks.end(), [&](const std::string& b) {
      return parent.size() > b.size() && parent.compare(0, b.size() + 1, b + ".") == 0;
    });
    if (!nested) blocks.insert(blocks.end(), kids.begin(), kids.end());
  }
  return blocks;
}

namespace {

/// Sharding remedies, when several ranks are given (--ddp WORLD or --world N): Notes [ZeRO],
/// [ZeRO mixed precision], [FSDP], [FSDP mixed precision].
void AddShardingRemedies(const std::vector<std::string>& blocks, std::vector<Change>* out) {
  std::vector<Change>& c = *out;
  // |dtype| "bf16": DeepSpeed's bf16 mode (module in bf16, fp32 master partition; Note [ZeRO
  // mixed precision]), offered only for an fp32 model without autocast.
  auto sharding = [](int stage, const char* offload, const char* dtype) {
    return [stage, offload, dtype](const RunConfig& b, RunConfig* v) {
      const ParallelOptions& p = b.sim.parallel;
      auto profile = FindProfile(b.sim.profile, b.sim.torch);
      if (p.world <= 1 || p.data_parallel || !p.fsdp.empty() || p.zero_stage >= stage || !profile) return false;
      if (profile->zero_whole_parameters && (stage > 1 || *offload || *dtype)) return false;  // 1.13 CPU: ZeRO-1 only
      if (*dtype && (!b.sim.dtype.empty() || !b.sim.amp.empty())) return false;
      v->sim.parallel.zero_stage = stage;
      v->sim.parallel.ddp = false;
      v->sim.parallel.offload = offload;
      if (*dtype) v->sim.dtype = dtype;
      return true;
    };
  };
  c.push_back({"shard the optimizer state over the ranks (ZeRO-1: --zero 1)", false, sharding(1, "", "")});
  c.push_back({"shard the optimizer state and gradients (ZeRO-2: --zero 2)", false, sharding(2, "", "")});
  c.push_back({"shard the optimizer state, gradients and parameters (ZeRO-3: --zero 3)", false, sharding(3, "", "")});
  c.push_back({"ZeRO-3 with the optimizer in host memory (--zero 3 --offload optimizer)", false, sharding(3, "optimizer", "")});
  c.push_back({"ZeRO-2 in DeepSpeed bf16 mode, fp32 master partition (--zero 2 --dtype bf16)", false, sharding(2, "", "bf16")});
  c.push_back({"ZeRO-3 in DeepSpeed bf16 mode, fp32 master partition (--zero 3 --dtype bf16)", false, sharding(3, "", "bf16")});
  if (!blocks.empty()) {
    const std::string wrap = " --wrap " + blocks.front() + (blocks.size() > 1 ? " ... " + blocks.back() : "");
    // |mp| "bf16": MixedPrecision(bf16) (Note [FSDP mixed precision]); |offload|: CPUOffload.
    auto fsdp = [blocks](const char* mp, const char* offload) {
      return [blocks, mp, offload](const RunConfig& b, RunConfig* v) {
        const ParallelOptions& p = b.sim.parallel;
        auto profile = FindProfile(b.sim.profile, b.sim.torch);
        if (p.world <= 1 || p.data_parallel || !p.fsdp.empty() || p.zero_stage > 0 || !profile || !profile->cuda)
          return false;
        if (*mp && (!b.sim.dtype.empty() || !b.sim.amp.empty())) return false;
        v->sim.parallel.ddp = false;
        v->sim.parallel.fsdp = "full";
        v->sim.parallel.wrap_modules = blocks;
        v->sim.parallel.offload = offload;
        if (*mp) v->sim.parallel.fsdp_mixed_precision = v->sim.dtype = mp;
        return true;
      };
    };
    c.push_back({"FSDP FULL_SHARD wrapping the repeated blocks (--fsdp full" + wrap + ")", false, fsdp("", "")});
    c.push_back({"FSDP FULL_SHARD with bf16 MixedPrecision (--fsdp full --fsdp-mixed-precision bf16" + wrap + ")",
                 false, fsdp("bf16", "")});
    c.push_back({"FSDP FULL_SHARD with CPU offload (--fsdp full --offload params" + wrap + ")", false, fsdp("", "params")});
  }
}

}  // namespace

std::vector<Change> CandidateChanges(const Graph& g) {
  std::vector<Change> c;
  c.push_back({"in-place activations (--inplace-activations on)", false, [](const RunConfig& b, RunConfig* v) {
                 if (b.sim.inplace == std::optional<bool>(true)) return false;
                 v->sim.inplace = true;
                 return true;
               }});
  c.push_back({"expandable segments (--alloc-conf expandable_segments:True; PYTORCH_ALLOC_CONF, "
               "PYTORCH_CUDA_ALLOC_CONF in 1.13)", false,
               [](const RunConfig& b, RunConfig* v) {
                 if (b.alloc.alloc_conf.find("expandable_segments:True") != std::string::npos) return false;
                 v->alloc.alloc_conf = b.alloc.alloc_conf.empty() ? "expandable_segments:True"
                                                                  : b.alloc.alloc_conf + ",expandable_segments:True";
                 return true;
               }});
  c.push_back({"halve the batch and accumulate gradients over 2 passes (same effective batch, --accumulate)", false,
               [](const RunConfig& b, RunConfig* v) {
                 auto it = b.sim.symbols.find("batch");
                 if (it == b.sim.symbols.end() || it->second < 2 || it->second % 2 != 0) return false;
                 v->sim.symbols["batch"] = it->second / 2;
                 v->sim.accumulate = b.sim.accumulate * 2;
                 return true;
               }});
  std::vector<std::string> blocks = RepeatedBlocks(g);
  if (!blocks.empty())
    c.push_back({"checkpoint the " + std::to_string(blocks.size()) + " repeated blocks (--checkpoint " + blocks.front() +
                     (blocks.size() > 1 ? " ... " + blocks.back() : "") + ")",
                 false, [blocks](const RunConfig& b, RunConfig* v) {
                   if (!b.sim.checkpoint_globs.empty()) return false;
                   v->sim.checkpoint_globs = blocks;
                   return true;
                 }});
  // Selective checkpointing (Note [Selective activation checkpointing]): the same blocks with
  // torchtitan's policy, between none and full recomputation.
  if (!blocks.empty())
    c.push_back({"selectively checkpoint the " + std::to_string(blocks.size()) +
                     " repeated blocks, torchtitan's policy: matmul and attention outputs kept (--checkpoint " +
                     blocks.front() + (blocks.size() > 1 ? " ... " + blocks.back() : "") + " --sac torchtitan)",
                 false, [blocks](const RunConfig& b, RunConfig* v) {
                   if (!b.sim.checkpoint_globs.empty() || b.sim.checkpoint_impl == "reentrant") return false;
                   v->sim.checkpoint_globs = blocks;
                   v->sim.sac = "torchtitan";
                   return true;
                 }});
  // Mixed precision (Note [Autocast]): the same model, GEMMs and convolutions in 16 bits.
  c.push_back({"mixed precision: torch.autocast bf16 (--amp bf16)", false, [](const RunConfig& b, RunConfig* v) {
                 if (!b.sim.amp.empty() || !b.sim.dtype.empty()) return false;
                 v->sim.amp = "bf16";
                 return true;
               }});
  c.push_back({"mixed precision: torch.autocast fp16 with a GradScaler (--amp fp16)", false,
               [](const RunConfig& b, RunConfig* v) {
                 if (!b.sim.amp.empty() || !b.sim.dtype.empty()) return false;
                 v->sim.amp = "fp16";
                 return true;
               }});
  c.push_back({"SGD with momentum instead of an Adam-family optimizer", true, [](const RunConfig& b, RunConfig* v) {
                 if (!b.sim.optimizer.starts_with("adam")) return false;
                 v->sim.optimizer = "momentum";
                 return true;
               }});
  AddShardingRemedies(blocks, &c);
  size_t half = g.parameters.size() / 2;
  c.push_back({"freeze the first half of the parameter tensors (--freeze-params " + std::to_string(half) + ")", true,
               [half](const RunConfig& b, RunConfig* v) {
                 if (half == 0 || b.sim.freeze_params >= static_cast<int64_t>(half)) return false;
                 v->sim.freeze_params = static_cast<int64_t>(half);
                 return true;
               }});
  return c;
}

namespace {

/// Several ranks whose streams differ (DataParallel's device 0 and the others,
/// ZeroRedundancyOptimizer's partitions): |row| becomes the largest rank's (peak reserved),
/// |rank| which one it is.
void LargestRank(const Graph& g, const RunConfig& c, SweepRow* row, int* rank) {
  *rank = 0;
  if (!row->status.ok() || !RanksMayDiffer(c)) return;
  std::vector<std::shared_ptr<const CompiledStep>> steps;
  *row = LargestRankRow(c, [&](const RunConfig& rc) -> Result<const CompiledStep*> {
    MEMSIM_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledStep> cs, CompileStep(g, rc));
    steps.push_back(cs);
    return cs.get();
  });
  *rank = row->rank;
}

}  // namespace

Result<AdviseReport> Advise(const Graph& g, const RunConfig& base, int threads, int64_t max_batch) {
  std::vector<Change> changes = CandidateChanges(g);
  std::vector<RunConfig> configs = {base};
  std::vector<size_t> which;
  for (size_t i = 0; i < changes.size(); ++i) {
    RunConfig v = base;
    if (changes[i].apply(base, &v)) {
      configs.push_back(v);
      which.push_back(i);
    }
  }
  std::vector<SweepRow> rows = RunSweep(g, configs, threads);
  if (!rows[0].status.ok()) return rows[0].status;
  AdviseReport rep;
  rep.model = g.name;
  rep.gpu = base.device.gpu;
  rep.capacity_bytes = base.alloc.capacity_bytes;
  rep.baseline = rows[0];
  LargestRank(g, base, &rep.baseline, &rep.baseline_rank);
  rep.world = base.sim.parallel.enabled() ? base.sim.parallel.world : 1;
  for (size_t k = 0; k < which.size(); ++k) {
    AdvisedChange ch{changes[which[k]].what, changes[which[k]].changes_training, rows[k + 1]};
    LargestRank(g, configs[k + 1], &ch.row, &ch.rank);
    const bool more = ch.row.status.ok() && ch.row.peak_reserved_bytes > rep.baseline.peak_reserved_bytes;
    (more ? rep.left_out : rep.changes).push_back(std::move(ch));
  }
  std::stable_sort(rep.changes.begin(), rep.changes.end(), [](const AdvisedChange& x, const AdvisedChange& y) {
    return std::make_pair(x.row.oom, x.row.peak_reserved_bytes) < std::make_pair(y.row.oom, y.row.peak_reserved_bytes);
  });
  if (rep.capacity_bytes > 0 && g.FindSymbol("batch") != kNone) {
    auto fit = FitBatch(g, base, max_batch);
    if (fit.ok()) rep.max_batch = fit->max_batch;
  }
  return rep;
}

}  // namespace memsim
