#include "sim/advise.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "lib/ir/compile_mode.h"
#include "lib/ir/compiled_budget.h"
#include "lib/ir/lora.h"
#include "lib/ir/quantized_base.h"
#include "lib/ir/module_paths.h"
#include "sim/fit.h"
#include "sim/ranks.h"

namespace memsim {

std::string ShellJoin(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) {
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-.,:=/+@%", c);
    });
    std::string q = a;
    if (!plain) {
      q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += "'";
    }
    out += (out.empty() ? "" : " ") + q;
  }
  return out;
}

std::vector<std::string> BlockGlobs(const std::vector<std::string>& blocks) {
  std::vector<std::string> globs;
  for (const std::string& b : blocks) {
    const size_t dot = b.rfind('.');
    std::string glob = b.substr(0, dot + 1);
    for (size_t i = dot + 1; i < b.size(); ++i) glob += "[0-9]";
    if (std::find(globs.begin(), globs.end(), glob) == globs.end()) globs.push_back(glob);
  }
  return globs;
}

namespace {

using Args = std::vector<std::string>;

/// FLAG VALUE for each value.
Args Repeat(const char* flag, const std::vector<std::string>& values) {
  Args a;
  for (const std::string& v : values) a.insert(a.end(), {flag, v});
  return a;
}

/// The last names of the Linear modules inside |blocks| (what PEFT's target_modules lists), in
/// graph order.
std::vector<std::string> BlockLinearNames(const Graph& g, const std::vector<std::string>& blocks) {
  std::vector<std::string> names;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kLinear || op.module.empty()) continue;
    const bool inside = std::any_of(blocks.begin(), blocks.end(), [&](const std::string& b) {
      return op.module.size() > b.size() && op.module.compare(0, b.size() + 1, b + ".") == 0;
    });
    const std::string name = op.module.substr(op.module.rfind('.') + 1);
    if (inside && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

/// Sharding remedies, when several ranks are given (--ddp WORLD or --world N): Notes [ZeRO],
/// [ZeRO mixed precision], [FSDP], [FSDP mixed precision].
void AddShardingRemedies(const std::vector<std::string>& blocks, std::vector<Change>* out) {
  std::vector<Change>& c = *out;
  // |dtype| "bf16": DeepSpeed's bf16 mode (module in bf16, fp32 master partition; Note [ZeRO
  // mixed precision]), offered only for an fp32 model without autocast.
  auto sharding = [](int stage, const char* offload, const char* dtype) {
    return [stage, offload, dtype](const RunConfig& b, RunConfig* v, Args* args) {
      const ParallelOptions& p = b.sim.parallel;
      auto profile = FindProfile(b.sim.profile, b.sim.torch);
      if (p.world <= 1 || p.data_parallel || !p.fsdp.empty() || p.zero_stage >= stage || !profile) return false;
      if (profile->zero_whole_parameters && (stage > 1 || *offload || *dtype)) return false;  // 1.13 CPU: ZeRO-1 only
      if (*dtype && (!b.sim.dtype.empty() || !b.sim.amp.empty())) return false;
      v->sim.parallel.zero_stage = stage;
      v->sim.parallel.ddp = profile->zero_whole_parameters;  // 1.13 CPU: ZeroRedundancyOptimizer under DDP
      v->sim.parallel.offload = offload;
      *args = {profile->zero_whole_parameters ? "--ddp" : "--world", std::to_string(p.world), "--zero", std::to_string(stage)};
      if (*offload) args->insert(args->end(), {"--offload", offload});
      if (*dtype) {
        v->sim.dtype = dtype;
        args->insert(args->end(), {"--dtype", dtype});
      }
      return true;
    };
  };
  c.push_back({"shard the optimizer state over the ranks (ZeRO-1)", false, sharding(1, "", "")});
  c.push_back({"shard the optimizer state and gradients (ZeRO-2)", false, sharding(2, "", "")});
  c.push_back({"shard the optimizer state, gradients and parameters (ZeRO-3)", false, sharding(3, "", "")});
  c.push_back({"ZeRO-3 with the optimizer in host memory", false, sharding(3, "optimizer", "")});
  c.push_back({"ZeRO-2 in DeepSpeed bf16 mode, fp32 master partition", false, sharding(2, "", "bf16")});
  c.push_back({"ZeRO-3 in DeepSpeed bf16 mode, fp32 master partition", false, sharding(3, "", "bf16")});
  if (blocks.empty()) return;
  // |mp| "bf16": MixedPrecision(bf16) (Note [FSDP mixed precision]); |offload|: CPUOffload.
  auto fsdp = [blocks](const char* mp, const char* offload) {
    return [blocks, mp, offload](const RunConfig& b, RunConfig* v, Args* args) {
      const ParallelOptions& p = b.sim.parallel;
      auto profile = FindProfile(b.sim.profile, b.sim.torch);
      if (p.world <= 1 || p.data_parallel || !p.fsdp.empty() || p.zero_stage > 0 || !profile || !profile->cuda)
        return false;
      if (*mp && (!b.sim.dtype.empty() || !b.sim.amp.empty())) return false;
      v->sim.parallel.ddp = false;
      v->sim.parallel.fsdp = "full";
      v->sim.parallel.wrap_modules = blocks;
      v->sim.parallel.offload = offload;
      *args = {"--world", std::to_string(p.world), "--fsdp", "full"};
      if (*mp) {
        v->sim.parallel.fsdp_mixed_precision = v->sim.dtype = mp;
        args->insert(args->end(), {"--fsdp-mixed-precision", mp});
      }
      if (*offload) args->insert(args->end(), {"--offload", offload});
      Args wrap = Repeat("--wrap", BlockGlobs(blocks));
      args->insert(args->end(), wrap.begin(), wrap.end());
      return true;
    };
  };
  c.push_back({"FSDP FULL_SHARD wrapping the repeated blocks", false, fsdp("", "")});
  c.push_back({"FSDP FULL_SHARD with bf16 MixedPrecision", false, fsdp("bf16", "")});
  c.push_back({"FSDP FULL_SHARD with CPU offload", false, fsdp("", "params")});
}

/// Checkpointing the repeated blocks, fully or with torchtitan's selective policy (Notes
/// [Activation checkpointing], [Selective activation checkpointing]).
void AddCheckpointRemedies(const std::vector<std::string>& blocks, std::vector<Change>* c) {
  if (blocks.empty()) return;
  const std::string n = std::to_string(blocks.size());
  c->push_back({"checkpoint the " + n + " repeated blocks", false, [blocks](const RunConfig& b, RunConfig* v, Args* args) {
                  if (!b.sim.checkpoint_globs.empty()) return false;
                  v->sim.checkpoint_globs = blocks;
                  *args = Repeat("--checkpoint", BlockGlobs(blocks));
                  return true;
                }});
  c->push_back({"selectively checkpoint the " + n +
                    " repeated blocks, torchtitan's policy: matmul and attention outputs kept",
                false, [blocks](const RunConfig& b, RunConfig* v, Args* args) {
                  if (!b.sim.checkpoint_globs.empty() || b.sim.checkpoint_impl == "reentrant") return false;
                  v->sim.checkpoint_globs = blocks;
                  v->sim.sac = "torchtitan";
                  *args = Repeat("--checkpoint", BlockGlobs(blocks));
                  args->insert(args->end(), {"--sac", "torchtitan"});
                  return true;
                }});
}

/// The fine-tuning modes (Notes [LoRA], [Quantized base weights], [Activation offloading]).
void AddFineTuningRemedies(const Graph& g, const std::vector<std::string>& blocks, std::vector<Change>* c) {
  const std::vector<std::string> linears = BlockLinearNames(g, blocks);
  if (g.lora || g.quantized_base || linears.empty()) return;
  LoraConfig lora;
  lora.r = 16;
  lora.alpha = 32;
  lora.targets = linears;
  c->push_back({"LoRA adapters of rank 16 on the repeated blocks' Linear layers, the base frozen", true,
                [spec = lora.ToString()](const RunConfig&, RunConfig*, Args* args) {
                  *args = {"--lora", spec};
                  return true;
                },
                [lora](const Graph& graph) { return ApplyLora(graph, lora); }});
  // QLoRA as the QLoRA paper and PEFT's examples set it up: NF4 with double quantization, bf16 compute.
  const std::string nf4 = "nf4,double_quant=on,compute=bf16";
  c->push_back({"QLoRA: the same adapters on an NF4 base (bitsandbytes, double quantization, bf16 compute)", true,
                [spec = lora.ToString(), nf4](const RunConfig&, RunConfig*, Args* args) {
                  *args = {"--lora", spec, "--quantize-base", nf4};
                  return true;
                },
                [lora, nf4](const Graph& graph) -> Result<Graph> {
                  MEMSIM_ASSIGN_OR_RETURN(Graph adapted, ApplyLora(graph, lora));
                  MEMSIM_ASSIGN_OR_RETURN(QuantizedBaseConfig q, ParseQuantizedBaseSpec(nf4));
                  return ApplyQuantizedBase(adapted, q);
                }});
}

/// Optimizer changes that keep Adam's update: bitsandbytes' 8-bit states (paged on a GPU), the step
/// in backward (Notes [bitsandbytes optimizers], [Optimizer in backward]).
void AddOptimizerRemedies(std::vector<Change>* c) {
  auto adam = [](const RunConfig& b) { return b.sim.optimizer == "adam" || b.sim.optimizer == "adamw"; };
  c->push_back({"bitsandbytes' 8-bit AdamW: block-wise uint8 states", true, [adam](const RunConfig& b, RunConfig* v, Args* args) {
                  if (!adam(b) || b.sim.parallel.enabled()) return false;
                  v->sim.optimizer = b.sim.optimizer + "8bit";
                  *args = {"--optimizer", v->sim.optimizer};
                  return true;
                }});
  c->push_back({"bitsandbytes' paged 8-bit AdamW: the states in CUDA unified memory", true,
                [adam](const RunConfig& b, RunConfig* v, Args* args) {
                  auto profile = FindProfile(b.sim.profile, b.sim.torch);
                  if (!adam(b) || b.sim.parallel.enabled() || !profile || !profile->cuda) return false;
                  v->sim.optimizer = "paged_" + b.sim.optimizer + "8bit";
                  *args = {"--optimizer", v->sim.optimizer};
                  return true;
                }});
  c->push_back({"step the optimizer in backward, each grad freed after its own update (torchtune optimizer_in_bwd)",
                false, [](const RunConfig& b, RunConfig* v, Args* args) {
                  if (b.sim.optimizer_in_backward || b.sim.optimizer == "none" || b.sim.optimizer == "recorded" ||
                      b.sim.accumulate > 1 || b.sim.clip_grad_norm > 0 || b.sim.amp == "fp16" || b.sim.grad_scaler == "on" ||
                      b.sim.parallel.enabled())
                    return false;
                  v->sim.optimizer_in_backward = true;
                  *args = {"--optimizer-in-backward", "on"};
                  return true;
                }});
}

/// Activation offloading (Note [Activation offloading]).
void AddOffloadRemedy(std::vector<Change>* c) {
  c->push_back({"offload the saved activations to pinned host memory (torch.autograd.graph.save_on_cpu)", false,
                [](const RunConfig& b, RunConfig* v, Args* args) {
                  auto profile = FindProfile(b.sim.profile, b.sim.torch);
                  if (!profile || !profile->cuda || b.sim.save_on_cpu != "off" || b.sim.offload_activations != "off")
                    return false;
                  v->sim.save_on_cpu = "pin";
                  *args = {"--save-on-cpu", "pin"};
                  return true;
                }});
  c->push_back({"offload the saved activations with torchtune's OffloadActivations (pinned, a side stream, "
                "tensors of 1 KiB and more; TRL's activation_offloading is a copy)",
                false, [](const RunConfig& b, RunConfig* v, Args* args) {
                  auto profile = FindProfile(b.sim.profile, b.sim.torch);
                  if (!profile || !profile->cuda || b.sim.save_on_cpu != "off" || b.sim.offload_activations != "off")
                    return false;
                  v->sim.offload_activations = "on";
                  *args = {"--offload-activations", "on"};
                  return true;
                }});
}

/// torch.compile's other activation memory budgets the export recorded (Note [Compiled regions]).
void AddCompiledBudgetRemedies(const Graph& g, std::vector<Change>* c) {
  auto region = std::find_if(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == OpKind::kCompiled; });
  if (region == g.ops.end()) return;
  const double now = region->attrs.GetFloat("memory_budget", 1.0);
  for (const std::string& b : RecordedMemoryBudgets(*region)) {
    if (std::stod(b) == now) continue;
    c->push_back({"torch.compile with activation_memory_budget " + b + " (the partitioner's program the export recorded)",
                  false,
                  [b](const RunConfig&, RunConfig*, Args* args) {
                    *args = {"--memory-budget", b};
                    return true;
                  },
                  [b](const Graph& x) { return SelectMemoryBudget(x, b); }});
  }
}

/// torch.compile on or off: the export's other form of the same model (the compiled regions, or
/// the eager ops the export kept beside them: lib/ir/compile_mode.h).
void AddCompileRemedy(const Graph& g, std::vector<Change>* c) {
  if (!g.compile_twin) return;
  const bool on = !HasCompiledRegions(g);
  c->push_back({on ? "compile with torch.compile (Inductor's program the export recorded)"
                   : "run eager, without torch.compile (the eager ops the export kept)",
                false,
                [on](const RunConfig&, RunConfig*, Args* args) {
                  *args = {"--compile", on ? "on" : "off"};
                  return true;
                },
                [on](const Graph& x) { return SelectCompile(x, on); }});
}

}  // namespace

std::vector<Change> CandidateChanges(const Graph& g) {
  std::vector<Change> c;
  c.push_back({"in-place activations", false, [](const RunConfig& b, RunConfig* v, Args* args) {
                 if (b.sim.inplace == std::optional<bool>(true)) return false;
                 v->sim.inplace = true;
                 *args = {"--inplace-activations", "on"};
                 return true;
               }});
  c.push_back({"expandable segments (PYTORCH_ALLOC_CONF; PYTORCH_CUDA_ALLOC_CONF in 1.13)", false,
               [](const RunConfig& b, RunConfig* v, Args* args) {
                 if (b.alloc.alloc_conf.find("expandable_segments:True") != std::string::npos) return false;
                 v->alloc.alloc_conf = b.alloc.alloc_conf.empty() ? "expandable_segments:True"
                                                                  : b.alloc.alloc_conf + ",expandable_segments:True";
                 *args = {"--alloc-conf", v->alloc.alloc_conf};
                 return true;
               }});
  c.push_back({"halve the batch and accumulate gradients over 2 passes (same effective batch)", false,
               [](const RunConfig& b, RunConfig* v, Args* args) {
                 auto it = b.sim.symbols.find("batch");
                 if (it == b.sim.symbols.end() || it->second < 2 || it->second % 2 != 0) return false;
                 v->sim.symbols["batch"] = it->second / 2;
                 v->sim.accumulate = b.sim.accumulate * 2;
                 *args = {"--batch", std::to_string(it->second / 2), "--accumulate", std::to_string(v->sim.accumulate)};
                 return true;
               }});
  std::vector<std::string> blocks = RepeatedBlocks(g);
  AddCheckpointRemedies(blocks, &c);
  // Mixed precision (Note [Autocast]): the same model, GEMMs and convolutions in 16 bits. Not on
  // compiled regions: they run in the dtypes they were compiled in (`export_torch.py --compile
  // --amp bf16` compiles under autocast; Note [Compiled regions]).
  for (const char* amp : {"bf16", "fp16"}) {
    if (HasCompiledRegions(g)) break;
    c.push_back({std::string("mixed precision: torch.autocast ") + amp + (*amp == 'f' ? " with a GradScaler" : ""), false,
                 [amp](const RunConfig& b, RunConfig* v, Args* args) {
                   if (!b.sim.amp.empty() || !b.sim.dtype.empty()) return false;
                   v->sim.amp = amp;
                   *args = {"--amp", amp};
                   return true;
                 }});
  }
  c.push_back({"SGD with momentum instead of an Adam-family optimizer", true,
               [](const RunConfig& b, RunConfig* v, Args* args) {
                 if (!b.sim.optimizer.starts_with("adam")) return false;
                 v->sim.optimizer = "momentum";
                 *args = {"--optimizer", "momentum"};
                 return true;
               }});
  AddOptimizerRemedies(&c);
  AddFineTuningRemedies(g, blocks, &c);
  AddOffloadRemedy(&c);
  AddCompiledBudgetRemedies(g, &c);
  AddCompileRemedy(g, &c);
  AddShardingRemedies(blocks, &c);
  size_t half = g.parameters.size() / 2;
  c.push_back({"freeze the first half of the parameter tensors", true, [half](const RunConfig& b, RunConfig* v, Args* args) {
                 if (half == 0 || b.sim.freeze_params >= static_cast<int64_t>(half)) return false;
                 v->sim.freeze_params = static_cast<int64_t>(half);
                 *args = {"--freeze-params", std::to_string(half)};
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
  MEMSIM_RETURN_IF_ERROR(CheckThreads(threads));
  const std::vector<Change> changes = CandidateChanges(g);
  // The changes on |g| run as one sweep with the baseline; a change that rewrites the graph
  // (LoRA) runs on its own graph.
  struct Candidate {
    size_t change;
    const Graph* graph;
    RunConfig config;
    std::vector<std::string> args;
    SweepRow row;
  };
  std::vector<Candidate> cands;
  std::deque<Graph> rewritten;
  for (size_t i = 0; i < changes.size(); ++i) {
    Candidate c{i, &g, base, {}, {}};
    if (!changes[i].apply(base, &c.config, &c.args)) continue;
    if (changes[i].rewrite) {
      Result<Graph> r = changes[i].rewrite(g);
      if (!r.ok()) continue;
      c.graph = &rewritten.emplace_back(std::move(*r));
    }
    cands.push_back(std::move(c));
  }
  std::vector<RunConfig> configs = {base};
  for (const Candidate& c : cands)
    if (c.graph == &g) configs.push_back(c.config);
  std::vector<SweepRow> rows = RunSweep(g, configs, threads);
  if (!rows[0].status.ok()) return rows[0].status;
  for (size_t k = 0, next = 1; k < cands.size(); ++k)
    cands[k].row = cands[k].graph == &g ? rows[next++] : RunSweep(*cands[k].graph, {cands[k].config}, threads)[0];
  AdviseReport rep;
  rep.model = g.name;
  rep.gpu = base.device.gpu;
  rep.capacity_bytes = base.alloc.capacity_bytes;
  rep.baseline = rows[0];
  LargestRank(g, base, &rep.baseline, &rep.baseline_rank);
  rep.world = base.sim.parallel.enabled() ? base.sim.parallel.world : 1;
  for (Candidate& c : cands) {
    AdvisedChange ch{c.change, changes[c.change].what, std::move(c.args), changes[c.change].changes_training,
                     std::move(c.row)};
    LargestRank(*c.graph, c.config, &ch.row, &ch.rank);
    const bool more = ch.row.status.ok() && ch.row.peak_reserved_bytes > rep.baseline.peak_reserved_bytes;
    (more ? rep.left_out : rep.changes).push_back(std::move(ch));
  }
  std::stable_sort(rep.changes.begin(), rep.changes.end(), [](const AdvisedChange& x, const AdvisedChange& y) {
    return std::make_pair(x.row.oom, x.row.peak_reserved_bytes) < std::make_pair(y.row.oom, y.row.peak_reserved_bytes);
  });
  auto profile = FindProfile(base.sim.profile, base.sim.torch);
  if (!g.compile_twin && !HasCompiledRegions(g) && profile && profile->torch != "1.13")
    rep.notes.push_back("torch.compile is not proposed: this graph has no compiled program; `tools/export_torch.py "
                        "MODEL --compile` records Inductor's (CPU) program beside the eager ops");
  if (rep.capacity_bytes > 0 && g.FindSymbol("batch") != kNone) {
    auto fit = FitBatch(g, base, max_batch);
    if (fit.ok()) rep.max_batch = fit->max_batch;
  }
  return rep;
}

Result<std::vector<FitProposal>> ProposeForFit(const Graph& g, const RunConfig& base, int threads, int64_t limit) {
  RunConfig one = base;
  one.sim.symbols["batch"] = 1;
  MEMSIM_ASSIGN_OR_RETURN(AdviseReport advice, Advise(g, one, threads, /*max_batch=*/1));
  const std::vector<Change> changes = CandidateChanges(g);
  std::vector<FitProposal> out;
  for (const AdvisedChange& ch : advice.changes) {
    if (!ch.row.status.ok() || ch.row.oom) continue;
    RunConfig v = one;
    std::vector<std::string> args;
    changes[ch.index].apply(one, &v, &args);
    std::optional<Graph> rewritten;
    if (changes[ch.index].rewrite) {
      MEMSIM_ASSIGN_OR_RETURN(Graph r, changes[ch.index].rewrite(g));
      rewritten = std::move(r);
    }
    auto fit = FitBatch(rewritten ? *rewritten : g, v, limit);
    out.push_back({ch, fit.ok() ? fit->max_batch : 1});
  }
  std::stable_sort(out.begin(), out.end(), [](const FitProposal& a, const FitProposal& b) { return a.max_batch > b.max_batch; });
  return out;
}

Result<FitAnswer> FitWithProposals(const Graph& g, const RunConfig& base, const std::string& symbol, int64_t limit,
                                   int threads) {
  FitAnswer a;
  MEMSIM_ASSIGN_OR_RETURN(a.fit, FitSymbol(g, base, symbol, limit));
  if (a.fit.max_batch == 0 && symbol == "batch" && a.fit.above.oom) {
    MEMSIM_ASSIGN_OR_RETURN(a.proposals, ProposeForFit(g, base, threads, limit));
  }
  return a;
}

}  // namespace memsim
