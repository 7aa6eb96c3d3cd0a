// Pipeline parallelism as torch.distributed.pipelining runs one stage (Note [Pipeline parallel] in
// docs/parallel.md): the stage's slice of the graph (PipelineStagePlan, made by
// PlanPipelineStage in lib/autodiff/setups/pipeline.h) and the schedule the step engine
// interprets microbatch by microbatch on it (lib/autodiff/pipeline.cc): each microbatch's forward
// keeps its own autograd graph until its backward, the p2p buffers and the Python names holding
// send/recv work keep what the schedule's source keeps.
#ifndef MEMSIM_LIB_AUTODIFF_PIPELINE_H_
#define MEMSIM_LIB_AUTODIFF_PIPELINE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ir/graph.h"

namespace memsim {

/// The single-stage schedules of torch/distributed/pipelining/schedules.py memsim interprets.
enum class PpSchedule : uint8_t { kGPipe, k1F1B };

/// "gpipe" / "1f1b" (case-insensitive); nullopt for any other name.
std::optional<PpSchedule> ParsePpSchedule(std::string_view name);
std::string_view PpScheduleName(PpSchedule s);

/// One stage rank of a pipeline: which ops, parameters and inputs are its, and the boundary
/// activations it receives and sends.
struct PipelineStagePlan {
  int stage = 0, stages = 1;
  int microbatches = 1;
  PpSchedule schedule = PpSchedule::k1F1B;
  OpId begin = 0, end = 0;       ///< [begin, end): the stage's ops (the last stage's include the loss)
  TensorId recv = kNone;         ///< the activation received from the previous stage (kNone: first)
  TensorId send = kNone;         ///< the activation sent to the next stage (kNone: last)
  std::vector<bool> params;      ///< per Graph::parameters: this stage's
  std::vector<bool> buffers;     ///< per tensor: a buffer this stage's ops read
  std::vector<bool> inputs;      ///< per tensor: a graph input this rank holds (the whole batch)
  std::vector<int> blocks;       ///< repeated blocks per stage (the split)
  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
};

/// A tensor a stage sends: microbatch |mb|'s output activation, or (|grad|) its input's grad.
struct PpSend {
  bool grad = false;
  int mb = 0;
  bool operator==(const PpSend&) const = default;
};

/// What a schedule does on one stage, step by step, as its _step_microbatches is written: the
/// interpreter runs it on the engine, tests record it.
class PpRuntime {
 public:
  virtual ~PpRuntime() = default;
  /// forward_one_chunk(mb) (its recv waited before), and on the last stage the loss.
  virtual void Forward(int mb) = 0;
  /// backward_one_chunk(mb): the microbatch's graph runs backward and dies; its input grad is
  /// taken from the recv buffer's .grad (stage_backward sets it to None) into bwd_cache.
  virtual void Backward(int mb) = 0;
  /// A Python name of the schedule (a list of P2POps or of the Works they returned, which hold
  /// their tensors) is bound to |sends|, dropping what it held.
  enum Name : uint8_t { kFwdSends, kBwdSends, kSendWork, kFwdSendsToWait, kBwdSendsToWait, kNames };
  virtual void Bind(Name name, std::vector<PpSend> sends) = 0;
  /// Appends to a list name (GPipe's *_sends_to_wait).
  virtual void Append(Name name, PpSend send) = 0;
};

/// Runs |schedule| for stage |stage| of |stages| over |microbatches| on |rt|, as
/// ScheduleGPipe / Schedule1F1B._step_microbatches do (torch 2.13); every name is unbound at the end.
void RunSchedule(PpSchedule schedule, int stages, int stage, int microbatches, PpRuntime* rt);

/// The forward (true) / backward order of microbatches on one stage ("F0 F1 B0 ...").
std::string ScheduleOrder(PpSchedule schedule, int stages, int stage, int microbatches);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_PIPELINE_H_
