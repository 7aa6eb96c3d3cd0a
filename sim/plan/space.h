// The planner's candidate space (docs/plan.md): a table of axes — precision, data-parallel
// world, sharding, activation checkpointing, micro-batch (the accumulation follows from the
// global batch) — whose product, less the combinations that mean nothing, is the set of
// training plans `memsim plan` searches. A candidate becomes the `memsim run` flags that set it
// up (ArgsOf); the planner simulates exactly those flags, so a plan's figures are the ones `memsim
// run` prints for them. Parallel degrees beyond data parallelism (tensor, pipeline, context,
// expert) are further rows of kPlanAxes when memsim simulates them (Note [Planner space]).
#ifndef MEMSIM_SIM_PLAN_SPACE_H_
#define MEMSIM_SIM_PLAN_SPACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

enum class Precision : uint8_t { kFp32, kAmpBf16, kAmpFp16, kBf16 };
/// How the training state is spread over the data-parallel ranks.
/// FSDP2 (fully_shard over the mesh's dp_shard dimension), FSDP2 without resharding after forward,
/// and HSDP (2 replicas of FSDP2 over half the ranks each) are the `--mesh` shardings; only they
/// combine with tensor parallelism (Note [Planner space]).
enum class Sharding : uint8_t {
  kDdp, kZero1, kZero2, kZero3, kZero3Offload, kFsdp, kFsdpGradOp, kFsdpOffload, kFsdp2, kFsdp2NoReshard, kHsdp
};
/// FSDP2, FSDP2 without resharding, HSDP: set up by --mesh.
bool IsMeshSharding(Sharding s);

std::string_view PrecisionName(Precision p);   ///< fp32, amp-bf16, amp-fp16, bf16
std::string_view ShardingName(Sharding s);     ///< ddp, zero1, ..., fsdp-offload
/// What the sharding is in words ("FSDP FULL_SHARD", "DeepSpeed ZeRO-3 + optimizer offload").
std::string_view ShardingTitle(Sharding s);

/// Activation checkpointing of the repeated blocks: none (every == 0), every |every|-th block
/// (block index % every == 0: every == 1 is all of them), fully or with torchtitan's selective
/// policy (|sac|).
struct Checkpointing {
  int every = 0;
  bool sac = false;
  bool operator==(const Checkpointing&) const = default;
};
std::string CheckpointingName(const Checkpointing& c);  ///< none, all, every-2, sac-all, ...

/// One training plan.
struct PlanCandidate {
  Precision precision = Precision::kFp32;
  int world = 1;  ///< data-parallel ranks
  int tp = 1;     ///< tensor-parallel degree (ranks used: world x tp)
  Sharding sharding = Sharding::kDdp;
  Checkpointing checkpoint;
  int64_t micro_batch = 1;
  int64_t accumulate = 1;
  bool operator==(const PlanCandidate&) const = default;
};
/// "amp-bf16 fsdp world 8, ckpt all, micro-batch 2 x 32" ("... world 4 tp 2, ..." with tp).
std::string CandidateLabel(const PlanCandidate& c);

/// What the search is asked (memsim plan's options) and the axis values it may take.
struct PlanRequest {
  std::string gpu = "H100-80GB";  ///< catalog name (sim/gpus.h)
  int gpus = 1;                   ///< devices available
  int64_t global_batch = 1;       ///< micro-batch × accumulation × data-parallel world
  int64_t seq = 0;                ///< the symbol seq (0: the graph's default)
  int world_max = 0;              ///< the largest data-parallel world tried (0: gpus)
  std::string optimizer = "adamw";
  std::string torch = "2.13";
  // The axes' values (empty: every value the axis has); the reduced spaces of tests.
  std::vector<Precision> precisions;
  std::vector<Sharding> shardings;
  std::vector<Checkpointing> checkpoints;
  std::vector<int64_t> micro_batches;
  std::vector<int> tp_degrees;  ///< empty: 1 and the divisors of gpus up to a node when the graph allows tp
};

/// One axis of the space: its name and the labels of its values (docs, --space listing).
struct PlanAxis {
  std::string_view name;
  std::string_view values;
  std::string_view how;  ///< the `memsim run` flags it sets
};
/// The table of axes (Note [Planner space]).
const std::vector<PlanAxis>& PlanAxes();

/// The graph facts the space needs: the repeated blocks (what checkpointing and FSDP wrap).
struct PlanModel {
  std::vector<std::string> blocks;  ///< RepeatedBlocks(g)
  bool has_seq = false;             ///< the graph has a symbol seq
  bool has_batch = false;
  bool tp_layers = false;           ///< --tp-plan layers selects some Linear of the graph
};
PlanModel PlanModelOf(const Graph& g);

/// Every candidate of |r| over |m|, in a fixed order (the axes' order, first slowest): the
/// world sizes are the divisors of |r.gpus| up to world_max that divide the global batch; the
/// micro-batches the divisors of global / world (or |r.micro_batches|); combinations that
/// mean nothing (a sharding with one rank, checkpointing without blocks) are left out.
std::vector<PlanCandidate> EnumerateCandidates(const PlanRequest& r, const PlanModel& m);

/// The `memsim run` flags of |c| (after GRAPH; with --gpu, --optimizer, --torch, --set seq=...).
std::vector<std::string> ArgsOf(const PlanCandidate& c, const PlanRequest& r, const PlanModel& m);

/// The module paths |c| checkpoints (every |every|-th block) and the globs that select them.
std::vector<std::string> CheckpointedBlocks(const Checkpointing& c, const std::vector<std::string>& blocks);
std::vector<std::string> CheckpointGlobs(const Checkpointing& c, const std::vector<std::string>& blocks);

/// Parsers of the axis values (--precision, --sharding, --checkpoints): error names the option.
Result<Precision> ParsePrecision(std::string_view s);
Result<Sharding> ParseSharding(std::string_view s);
Result<Checkpointing> ParseCheckpointing(std::string_view s);

}  // namespace memsim

#endif  // MEMSIM_SIM_PLAN_SPACE_H_
