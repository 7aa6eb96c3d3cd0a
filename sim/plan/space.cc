#include "sim/plan/space.h"

#include <algorithm>

#include "lib/ir/module_paths.h"
#include "lib/ir/tensor_parallel.h"
#include "lib/util/nearest.h"
#include "sim/advise.h"

namespace memsim {
namespace {

constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kAmpBf16, Precision::kAmpFp16, Precision::kBf16};
constexpr Sharding kShardings[] = {Sharding::kDdp,        Sharding::kZero1,     Sharding::kZero2,      Sharding::kZero3,
                                   Sharding::kZero3Offload, Sharding::kFsdp,      Sharding::kFsdpGradOp, Sharding::kFsdpOffload,
                                   Sharding::kFsdp2,        Sharding::kFsdp2NoReshard, Sharding::kHsdp};
/// The tensor-parallel degrees tried by default: those of one node's NVLink domain.
constexpr int kMaxTp = 8;

bool IsFsdp(Sharding s) { return s == Sharding::kFsdp || s == Sharding::kFsdpGradOp || s == Sharding::kFsdpOffload; }
bool WrapsBlocks(Sharding s) { return IsFsdp(s) || IsMeshSharding(s); }

/// The default checkpointing values: none, every 4th and every 2nd block, all, all selectively.
std::vector<Checkpointing> DefaultCheckpoints(size_t blocks) {
  if (blocks == 0) return {Checkpointing{}};
  std::vector<Checkpointing> v = {Checkpointing{0, false}};
  for (int k : {4, 2})
    if (blocks >= static_cast<size_t>(2 * k)) v.push_back({k, false});
  v.push_back({1, false});
  v.push_back({1, true});
  return v;
}

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) d.push_back(n / i);
    }
  std::sort(d.begin(), d.end());
  return d;
}

}  // namespace

bool IsMeshSharding(Sharding s) {
  return s == Sharding::kFsdp2 || s == Sharding::kFsdp2NoReshard || s == Sharding::kHsdp;
}

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kAmpBf16: return "amp-bf16";
    case Precision::kAmpFp16: return "amp-fp16";
    case Precision::kBf16: return "bf16";
  }
  return "";
}

std::string_view ShardingName(Sharding s) {
  switch (s) {
    case Sharding::kDdp: return "ddp";
    case Sharding::kZero1: return "zero1";
    case Sharding::kZero2: return "zero2";
    case Sharding::kZero3: return "zero3";
    case Sharding::kZero3Offload: return "zero3-offload";
    case Sharding::kFsdp: return "fsdp";
    case Sharding::kFsdpGradOp: return "fsdp-grad-op";
    case Sharding::kFsdpOffload: return "fsdp-offload";
    case Sharding::kFsdp2: return "fsdp2";
    case Sharding::kFsdp2NoReshard: return "fsdp2-no-reshard";
    case Sharding::kHsdp: return "hsdp";
  }
  return "";
}

std::string_view ShardingTitle(Sharding s) {
  switch (s) {
    case Sharding::kDdp: return "DDP (one rank: no data parallelism)";
    case Sharding::kZero1: return "DeepSpeed ZeRO-1";
    case Sharding::kZero2: return "DeepSpeed ZeRO-2";
    case Sharding::kZero3: return "DeepSpeed ZeRO-3";
    case Sharding::kZero3Offload: return "DeepSpeed ZeRO-3 + optimizer offload";
    case Sharding::kFsdp: return "FSDP FULL_SHARD";
    case Sharding::kFsdpGradOp: return "FSDP SHARD_GRAD_OP";
    case Sharding::kFsdpOffload: return "FSDP FULL_SHARD + CPUOffload";
    case Sharding::kFsdp2: return "FSDP2 fully_shard";
    case Sharding::kFsdp2NoReshard: return "FSDP2 fully_shard, reshard_after_forward=False";
    case Sharding::kHsdp: return "HSDP (FSDP2 on 2 replicas)";
  }
  return "";
}

std::string CheckpointingName(const Checkpointing& c) {
  if (c.every == 0) return "none";
  std::string n = c.every == 1 ? "all" : "every-" + std::to_string(c.every);
  return c.sac ? "sac-" + n : n;
}

std::string CandidateLabel(const PlanCandidate& c) {
  return std::string(PrecisionName(c.precision)) + " " + std::string(ShardingName(c.sharding)) + " world " +
         std::to_string(c.world) + (c.tp > 1 ? " tp " + std::to_string(c.tp) : "") + ", ckpt " + CheckpointingName(c.checkpoint) + ", micro-batch " +
         std::to_string(c.micro_batch) + " x " + std::to_string(c.accumulate);
}

const std::vector<PlanAxis>& PlanAxes() {
  static const std::vector<PlanAxis> axes = {
      {"precision", "fp32, amp-bf16, amp-fp16, bf16", "--amp bf16|fp16; bf16: --dtype bf16 (DDP, ZeRO: DeepSpeed bf16 mode) or --fsdp-mixed-precision bf16"},
      {"world", "the divisors of --gpus up to --world-max that divide the global batch", "--ddp N / --world N"},
      {"sharding", "ddp, zero1, zero2, zero3, zero3-offload, fsdp, fsdp-grad-op, fsdp-offload, fsdp2, fsdp2-no-reshard, hsdp",
       "--zero 1|2|3 [--offload optimizer]; --fsdp full|grad-op --wrap BLOCKS [--offload params]; --mesh [dp_replicate=2,]dp_shard=N --wrap BLOCKS [--reshard-after-forward false]"},
      {"tp", "1 and the divisors of --gpus up to 8, when the graph's Linears have the layers plan",
       "--mesh [dp_shard=W,]tp=N --tp-plan layers (with more than one data-parallel rank: FSDP2, the 2-D mesh)"},
      {"checkpoint", "none, every-4, every-2, all, sac-all (of the repeated blocks)", "--checkpoint BLOCKS [--sac torchtitan]"},
      {"micro-batch", "the divisors of global batch / world; accumulation = global / (micro-batch x world)",
       "--batch M --accumulate K"},
  };
  return axes;
}

PlanModel PlanModelOf(const Graph& g) {
  PlanModel m;
  m.blocks = RepeatedBlocks(g);
  m.has_seq = g.FindSymbol("seq") != kNone;
  m.has_batch = g.FindSymbol("batch") != kNone;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::kLinear && !TpStyleOf("layers", op.module).empty()) m.tp_layers = true;
  return m;
}

namespace {

/// The tensor-parallel degrees of |r| over |m|: 1, and with the layers plan the divisors of the
/// GPU count up to a node (kMaxTp), or |r.tp_degrees|.
std::vector<int64_t> TpDegrees(const PlanRequest& r, const PlanModel& m) {
  if (!r.tp_degrees.empty()) return std::vector<int64_t>(r.tp_degrees.begin(), r.tp_degrees.end());
  std::vector<int64_t> out;
  for (int64_t t : Divisors(r.gpus))
    if (t == 1 || (m.tp_layers && t <= kMaxTp)) out.push_back(t);
  return out;
}

/// Whether sharding |s| over |w| data-parallel ranks with tp degree |t| means something that
/// memsim simulates: a sharding needs two ranks (HSDP: two replicas of two or more); FSDP wraps
/// the repeated blocks; tp with more than one data-parallel rank is FSDP2's 2-D mesh (--mesh
/// dp_shard=N,tp=M; not HSDP with tp, which `memsim run` refuses), as the 1-D shardings do not
/// take a mesh.
bool Meaningful(Sharding s, int64_t w, int64_t t, const PlanModel& m) {
  if (w == 1 && s != Sharding::kDdp) return false;
  if (s == Sharding::kHsdp && (w < 4 || w % 2 != 0)) return false;
  if (WrapsBlocks(s) && m.blocks.empty()) return false;
  if (t > 1 && w > 1 && s != Sharding::kFsdp2 && s != Sharding::kFsdp2NoReshard) return false;
  return true;
}

}  // namespace

std::vector<PlanCandidate> EnumerateCandidates(const PlanRequest& r, const PlanModel& m) {
  const std::vector<Precision> precisions = r.precisions.empty() ? std::vector<Precision>(std::begin(kPrecisions), std::end(kPrecisions)) : r.precisions;
  const std::vector<Sharding> shardings = r.shardings.empty() ? std::vector<Sharding>(std::begin(kShardings), std::end(kShardings)) : r.shardings;
  const std::vector<Checkpointing> checkpoints = r.checkpoints.empty() ? DefaultCheckpoints(m.blocks.size()) : r.checkpoints;
  const int world_max = r.world_max > 0 ? std::min(r.world_max, r.gpus) : r.gpus;
  std::vector<PlanCandidate> out;
  for (Precision p : precisions)
    for (int64_t t : TpDegrees(r, m)) {
      if (t < 1 || r.gpus % t != 0) continue;
      for (int64_t w : Divisors(r.gpus / t)) {
        if (w > world_max || r.global_batch % w != 0) continue;
        const int64_t per_rank = r.global_batch / w;
        std::vector<int64_t> micro = r.micro_batches.empty() ? Divisors(per_rank) : r.micro_batches;
        for (Sharding s : shardings) {
          if (!Meaningful(s, w, t, m)) continue;
          for (const Checkpointing& ck : checkpoints) {
            if (ck.every > 0 && m.blocks.empty()) continue;
            for (int64_t mb : micro) {
              if (mb < 1 || per_rank % mb != 0) continue;
              out.push_back({p, static_cast<int>(w), static_cast<int>(t), s, ck, mb, per_rank / mb});
            }
          }
        }
      }
    }
  return out;
}

std::vector<std::string> CheckpointedBlocks(const Checkpointing& c, const std::vector<std::string>& blocks) {
  std::vector<std::string> out;
  if (c.every <= 0) return out;
  for (size_t i = 0; i < blocks.size(); i += static_cast<size_t>(c.every)) out.push_back(blocks[i]);
  return out;
}

std::vector<std::string> CheckpointGlobs(const Checkpointing& c, const std::vector<std::string>&) {
  // The block selectors (Note [Block selectors]): @blocks%K=0 is CheckpointedBlocks' every K-th.
  if (c.every <= 0) return {};
  if (c.every == 1) return {"@blocks"};
  return {"@blocks%" + std::to_string(c.every) + "=0"};
}

std::vector<std::string> ArgsOf(const PlanCandidate& c, const PlanRequest& r, const PlanModel& m) {
  std::vector<std::string> a = {"--gpu", r.gpu, "--optimizer", r.optimizer};
  if (r.torch != "2.13") a.insert(a.end(), {"--torch", r.torch});
  if (r.seq > 0) a.insert(a.end(), {"--set", "seq=" + std::to_string(r.seq)});
  a.insert(a.end(), {"--batch", std::to_string(c.micro_batch)});
  if (c.accumulate > 1) a.insert(a.end(), {"--accumulate", std::to_string(c.accumulate)});
  const bool fsdp = IsFsdp(c.sharding) || IsMeshSharding(c.sharding);
  switch (c.precision) {
    case Precision::kFp32: break;
    case Precision::kAmpBf16: a.insert(a.end(), {"--amp", "bf16"}); break;
    case Precision::kAmpFp16: a.insert(a.end(), {"--amp", "fp16"}); break;
    case Precision::kBf16:
      if (!fsdp) a.insert(a.end(), {"--dtype", "bf16"});
      break;
  }
  for (const std::string& g : CheckpointGlobs(c.checkpoint, m.blocks)) a.insert(a.end(), {"--checkpoint", g});
  if (c.checkpoint.sac) a.insert(a.end(), {"--sac", "torchtitan"});
  const std::string w = std::to_string(c.world);
  switch (c.sharding) {
    case Sharding::kDdp:
      if (c.world > 1) a.insert(a.end(), {"--ddp", w});
      break;
    case Sharding::kZero1: a.insert(a.end(), {"--world", w, "--zero", "1"}); break;
    case Sharding::kZero2: a.insert(a.end(), {"--world", w, "--zero", "2"}); break;
    case Sharding::kZero3: a.insert(a.end(), {"--world", w, "--zero", "3"}); break;
    case Sharding::kZero3Offload: a.insert(a.end(), {"--world", w, "--zero", "3", "--offload", "optimizer"}); break;
    case Sharding::kFsdp:
    case Sharding::kFsdpGradOp:
    case Sharding::kFsdpOffload:
      a.insert(a.end(), {"--world", w, "--fsdp", c.sharding == Sharding::kFsdpGradOp ? "grad-op" : "full"});
      a.insert(a.end(), {"--wrap", "@blocks"});
      if (c.sharding == Sharding::kFsdpOffload) a.insert(a.end(), {"--offload", "params"});
      if (c.precision == Precision::kBf16) a.insert(a.end(), {"--fsdp-mixed-precision", "bf16"});
      break;
    case Sharding::kFsdp2:
    case Sharding::kFsdp2NoReshard:
    case Sharding::kHsdp: break;  // the mesh, below
  }
  if (IsMeshSharding(c.sharding) || c.tp > 1) {
    std::string mesh;
    if (c.sharding == Sharding::kHsdp) mesh = "dp_replicate=2,dp_shard=" + std::to_string(c.world / 2);
    if (IsMeshSharding(c.sharding) && c.sharding != Sharding::kHsdp) mesh = "dp_shard=" + w;
    if (c.tp > 1) mesh += (mesh.empty() ? "" : ",") + std::string("tp=") + std::to_string(c.tp);
    a.insert(a.end(), {"--mesh", mesh});
    if (IsMeshSharding(c.sharding)) a.insert(a.end(), {"--wrap", "@blocks"});
    if (c.sharding == Sharding::kFsdp2NoReshard) a.insert(a.end(), {"--reshard-after-forward", "false"});
    if (IsMeshSharding(c.sharding) && c.precision == Precision::kBf16) a.insert(a.end(), {"--fsdp2-mp", "param=bf16,reduce=fp32"});
    if (c.tp > 1) a.insert(a.end(), {"--tp-plan", "layers"});
  }
  return a;
}

namespace {

template <typename T, size_t N, typename F>
Result<T> ParseName(std::string_view s, const T (&all)[N], F name, const char* option) {
  std::vector<std::string_view> names;
  for (T v : all) {
    if (name(v) == s) return v;
    names.push_back(name(v));
  }
  std::string list;
  for (std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  const std::string near = NearestName(s, names, 3);
  return Status::InvalidArgument(std::string(option) + " \"" + std::string(s) + "\": " +
                                 (near.empty() ? "" : "did you mean " + near + "? ") + "expected " + list);
}

}  // namespace

Result<Precision> ParsePrecision(std::string_view s) { return ParseName(s, kPrecisions, PrecisionName, "--precision"); }
Result<Sharding> ParseSharding(std::string_view s) { return ParseName(s, kShardings, ShardingName, "--sharding"); }

Result<Checkpointing> ParseCheckpointing(std::string_view s) {
  Checkpointing c;
  std::string_view rest = s;
  if (rest.starts_with("sac-")) {
    c.sac = true;
    rest.remove_prefix(4);
  }
  if (rest == "none" && !c.sac) return c;
  if (rest == "all") {
    c.every = 1;
    return c;
  }
  if (rest.starts_with("every-")) {
    rest.remove_prefix(6);
    int k = 0;
    for (char ch : rest) k = (ch >= '0' && ch <= '9' && k < 1000) ? k * 10 + (ch - '0') : -1;
    if (k >= 1 && !rest.empty()) {
      c.every = k;
      return c;
    }
  }
  return Status::InvalidArgument("--checkpoints \"" + std::string(s) +
                                 "\": expected none, all, every-K (K >= 1), or sac-all / sac-every-K");
}

}  // namespace memsim
