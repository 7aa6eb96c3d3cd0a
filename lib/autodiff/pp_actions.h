// The schedule IR of torch.distributed.pipelining's multi-stage schedules (Note [Pipeline
// parallel] in docs/parallel.md): each rank's compute actions as ScheduleInterleaved1F1B,
// ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble and ScheduleDualPipeV compute them, and the lowering
// _PipelineScheduleRuntime runs (_add_reduce_grad, _add_send_recv), transcribed from
// torch/distributed/pipelining/schedules.py (torch 2.13).
#ifndef MEMSIM_LIB_AUTODIFF_PP_ACTIONS_H_
#define MEMSIM_LIB_AUTODIFF_PP_ACTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memsim {

/// _ComputationType (UNSHARD/RESHARD: FSDP's, in the lists only when the stages use it).
enum class PpOp : uint8_t { kF, kB, kI, kW, kSendF, kRecvF, kSendB, kRecvB, kReduceGrad, kOverlapFB, kUnshard, kReshard };

/// _Action: a stage's computation or communication for one microbatch (REDUCE_GRAD: none);
/// OVERLAP_F_B (DualPipeV) has no stage of its own and runs its |sub| actions in order.
struct PpAction {
  int stage = 0;
  PpOp op = PpOp::kF;
  int mb = -1;
  std::vector<PpAction> sub;
  bool operator==(const PpAction&) const = default;
  /// _Action.__repr__: "2F0", "1SEND_B3", "0REDUCE_GRAD", "(0F2;3B0)OVERLAP_F_B".
  std::string str() const;
};

/// The multi-stage schedules memsim interprets (torch's class names without "Schedule").
enum class PpMulti : uint8_t { kInterleaved1F1B, kInterleavedZeroBubble, kZBVZeroBubble, kDualPipeV };

/// ZBVZeroBubble and DualPipeV place the stages V-style.
bool PpVShaped(PpMulti s);
/// The rank of stage |stage| of |ranks| × |per_rank|: loop-style (stage % ranks) or, for ZBV and
/// DualPipeV, V-style (stage r and 2·ranks − 1 − r on rank r), as generate_stage_to_rank_mapping.
int PpRankOfStage(PpMulti s, int ranks, int per_rank, int stage);
/// The stages of |rank|, in the order the rank builds them (torchtitan's stage_ids_this_rank).
std::vector<int> PpStagesOfRank(PpMulti s, int ranks, int per_rank, int rank);

/// The schedule's pipeline_order: each rank's compute actions, None (nullopt) for a bubble.
/// Errors as the constructors raise them (empty string: fine).
std::string PpCheck(PpMulti s, int ranks, int per_rank, int microbatches);
std::vector<std::vector<std::optional<PpAction>>> PpComputeOrder(PpMulti s, int ranks, int per_rank, int microbatches);

/// _prepare_schedule_with_comms(format="compute_only"): _add_unshard_reshard (kept only when
/// |fsdp|: without FSDP its actions do nothing) and _add_reduce_grad per rank, then _add_send_recv
/// over all ranks (pipeline_order_with_comms).
std::vector<std::vector<PpAction>> PpLowerWithComms(PpMulti s, int ranks, int per_rank, int microbatches, bool fsdp = false);

/// A rank's actions as the source prints them, space-separated.
std::string PpFormat(const std::vector<PpAction>& actions);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_PP_ACTIONS_H_
