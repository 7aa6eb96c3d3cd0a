// Pipeline parallelism as torch.distributed.pipelining runs a rank's stages (Note [Pipeline
// parallel] in docs/parallel.md): the stages' slices of the graph (PipelineStagePlan, made by
// PlanPipelineStage in lib/autodiff/setups/pipeline.h) and the schedule the step engine
// interprets microbatch by microbatch on them (lib/autodiff/pipeline.cc): each microbatch's
// forward on a stage keeps its own autograd graph until its backward, the p2p buffers and the
// Python names holding send/recv work keep what the schedule's source keeps.
#ifndef MEMSIM_LIB_AUTODIFF_PIPELINE_H_
#define MEMSIM_LIB_AUTODIFF_PIPELINE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/autodiff/pp_actions.h"
#include "lib/ir/graph.h"

namespace memsim {

/// The schedules of torch/distributed/pipelining/schedules.py memsim interprets: the
/// single-stage ones and the multi-stage _PipelineScheduleRuntime ones (lib/autodiff/pp_actions.h).
enum class PpSchedule : uint8_t { kGPipe, k1F1B, kInterleaved1F1B, kInterleavedZeroBubble, kZBVZeroBubble, kDualPipeV };

/// torchtitan's names, case-insensitive ("gpipe", "1f1b", "interleaved1f1b", "interleavedzerobubble",
/// "zbvzerobubble", "dualpipev"; the recording kit's "interleavedzb", "zbv"); nullopt for others.
std::optional<PpSchedule> ParsePpSchedule(std::string_view name);
std::string_view PpScheduleName(PpSchedule s);
/// The multi-stage schedule's kind (nullopt: GPipe / 1F1B, one stage per rank).
std::optional<PpMulti> MultiStage(PpSchedule s);

/// One stage of a pipeline: its ops and the boundary activations it receives and sends.
struct PpStage {
  int index = 0;                 ///< stage_index, 0 .. PipelineStagePlan::stages − 1
  OpId begin = 0, end = 0;       ///< [begin, end): the stage's ops (the last stage's include the loss)
  /// Ops of an earlier stage this one runs first, in order: what its ops read that is made from
  /// buffers and tensor factories alone (a Hugging Face decoder's rotary cos/sin, which every
  /// torchtitan stage makes from its own freqs_cis buffer).
  std::vector<OpId> prologue;
  TensorId recv = kNone;         ///< the activation received from the previous stage (kNone: first)
  TensorId send = kNone;         ///< the activation sent to the next stage (kNone: last)
};

/// One rank of a pipeline: its stages, and which parameters and inputs are its.
struct PipelineStagePlan {
  int rank = 0, ranks = 1;       ///< the pp mesh coordinate and degree
  int stages = 1;                ///< stages in all: ranks × stages per rank
  int microbatches = 1;
  PpSchedule schedule = PpSchedule::k1F1B;
  std::vector<PpStage> local;    ///< this rank's stages, in the order it builds them
  std::vector<bool> params;      ///< per Graph::parameters: this rank's stages'
  std::vector<int> param_stage;  ///< per Graph::parameters: the first local stage whose ops read it (-1: none)
  std::vector<bool> buffers;     ///< per tensor: a buffer this rank's ops read
  std::vector<bool> inputs;      ///< per tensor: a graph input this rank holds (the whole batch)
  std::vector<int> blocks;       ///< repeated blocks per stage (the split)
  bool fsdp = false;             ///< the stage modules are fully_shard'ed (dp_shard): UNSHARD / RESHARD actions
  bool IsFirst(const PpStage& s) const { return s.index == 0; }
  bool IsLast(const PpStage& s) const { return s.index == stages - 1; }
};

/// A tensor a stage sends: microbatch |mb|'s output activation, or (|grad|) its input's grad;
/// |stage| indexes PipelineStagePlan::local.
struct PpSend {
  bool grad = false;
  int mb = 0;
  int stage = 0;
  bool operator==(const PpSend&) const = default;
};

/// What a schedule does on one stage, step by step, as its _step_microbatches is written: the
/// interpreter runs it on the engine, tests record it.
class PpRuntime {
 public:
  virtual ~PpRuntime() = default;
  /// Local stage |stage|'s forward_one_chunk(mb) (its recv waited before), and on the last
  /// stage the loss; |label| names the action ("F0", or the source's "2F0" for a multi-stage one).
  virtual void Forward(int stage, int mb, const std::string& label) = 0;
  /// backward_one_chunk(mb): the microbatch's graph runs backward and dies; its input grad is
  /// taken from the recv buffer's .grad (stage_backward sets it to None) into bwd_cache.
  virtual void Backward(int stage, int mb, const std::string& label) = 0;
  /// The zero-bubble schedules' split backward: backward_one_chunk(full_backward=False) (I), the
  /// input grads only, and backward_weight_one_chunk (W), the weight grads.
  virtual void BackwardInput(int stage, int mb, const std::string& label) { Backward(stage, mb, label); }
  virtual void BackwardWeight(int stage, int mb, const std::string& label) { (void)stage, (void)mb, (void)label; }
  /// The V's same-rank hand-over ([Note: V-schedule special case]): set_local_fwd_input makes
  /// local stage |next|'s recv buffer for |mb| local stage |stage|'s output; set_local_bwd_input
  /// makes local stage |prev|'s grad recv buffer |stage|'s input grad, popped from its bwd_cache.
  virtual void PassForward(int stage, int next, int mb) { (void)stage, (void)next, (void)mb; }
  virtual void PassBackward(int stage, int prev, int mb) { (void)stage, (void)prev, (void)mb; }
  /// _update_losses: the last stage's _internal_losses are let go (the single-stage schedules
  /// call it before perform_reduce_grad; the runtime at its end).
  virtual void UpdateLosses() {}
  /// perform_reduce_grad(M) of local stage |stage|: the grads scaled in place, and with FSDP2
  /// its post_backward with gradient sync (REDUCE_GRAD in the multi-stage action lists).
  virtual void ReduceGrad(int stage) { (void)stage; }
  /// The runtime's FSDP actions on local stage |stage|: UNSHARD (every FSDP module's
  /// unshard(async_op=True)), the wait before its next computation (_assert_unsharded), RESHARD.
  virtual void Unshard(int stage) { (void)stage; }
  virtual void WaitUnshard(int stage) { (void)stage; }
  virtual void Reshard(int stage) { (void)stage; }
  /// A Python name of the schedule (a list of P2POps or of the Works they returned, which hold
  /// their tensors) is bound to |sends|, dropping what it held. kSendOps: the runtime's send_ops.
  enum Name : uint8_t { kFwdSends, kBwdSends, kSendWork, kFwdSendsToWait, kBwdSendsToWait, kSendOps, kNames };
  virtual void Bind(Name name, std::vector<PpSend> sends) = 0;
  /// Appends to a list name (GPipe's *_sends_to_wait).
  virtual void Append(Name name, PpSend send) = 0;
};

/// Runs |schedule| for rank |rank| of |ranks| (|per_rank| stages each) over |microbatches| on
/// |rt|, as ScheduleGPipe / Schedule1F1B / _PipelineScheduleRuntime._step_microbatches do
/// (torch 2.13); every name is unbound at the end.
/// With |fsdp| the multi-stage action lists hold UNSHARD / RESHARD.
void RunSchedule(PpSchedule schedule, int ranks, int per_rank, int rank, int microbatches, PpRuntime* rt, bool fsdp = false);

/// The compute actions of one rank in order ("F0 F1 B0 ...", or "0F0 2F0 ..." multi-stage).
std::string ScheduleOrder(PpSchedule schedule, int ranks, int per_rank, int rank, int microbatches);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_PIPELINE_H_
