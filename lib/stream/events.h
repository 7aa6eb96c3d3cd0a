// The memory event stream: the ordered allocate/free events of one training step, as PyTorch's
// autograd would issue them. It is the product of the graph half (lib/) and the input of every
// allocator model and report (sim/). Plain data; safe to share read-only across threads.
#ifndef MEMSIM_LIB_STREAM_EVENTS_H_
#define MEMSIM_LIB_STREAM_EVENTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memsim {

/// Where in the step an event happens. kSetup: parameters, buffers and inputs that exist before
/// the step (model.to(device), the batch); kOptimizer covers optimizer.step() and zero_grad().
enum class Phase : uint8_t { kSetup, kForward, kBackward, kOptimizer };
inline constexpr int kNumPhases = 4;

/// What a buffer holds.
enum class Category : uint8_t {
  kParameter, kGradient, kOptimizerState, kActivation, kTemporary, kWorkspace, kInput
};
inline constexpr int kNumCategories = 7;

std::string_view PhaseName(Phase p);
std::string_view CategoryName(Category c);

inline constexpr uint32_t kNoOp = UINT32_MAX;

/// One storage allocated during the step.
struct Buffer {
  std::string name;    ///< tensor name, e.g. "layer1.0.conv1:out", "fc.weight.grad"
  int64_t bytes = 0;   ///< exact requested bytes (no allocator rounding)
  Category category = Category::kActivation;
  uint32_t op = kNoOp;        ///< index of the forward op that created it, or kNoOp
  std::string module;         ///< module path of that op ("" if none)
  /// The CUDA stream it is allocated on (the caching allocator keeps a pool per stream): 0 the
  /// current stream; a side stream of a training setup otherwise (kFsdp2AllGatherStream, ...).
  uint8_t stream = 0;
};

/// The side streams the step allocates on (Note [Side streams] in docs/allocator.md).
inline constexpr uint8_t kFsdp2AllGatherStream = 1;      ///< FSDP2's all_gather_copy_in / all_gather stream
inline constexpr uint8_t kFsdp2ReduceScatterStream = 2;  ///< FSDP2's reduce_scatter stream

enum class EventKind : uint8_t { kAlloc, kFree };

struct MemEvent {
  EventKind kind;
  Phase phase;
  uint32_t buffer;     ///< index into EventStream::buffers
  uint32_t op;         ///< index of the forward op being run (its backward in kBackward), or kNoOp
};

/// The stream. Every buffer is allocated exactly once and freed at most once; a buffer that is
/// never freed is alive at the end of the step (parameters, optimizer state, ...).
struct EventStream {
  std::vector<Buffer> buffers;
  std::vector<MemEvent> events;
  /// Host (CPU) memory the step keeps outside the device stream: state offloaded by the
  /// training setups (--offload), at its largest.
  int64_t host_bytes = 0;
  /// With several training steps (--steps N): the index of the first event of each step
  /// (after the setup); empty for a single step.
  std::vector<size_t> step_starts;
  /// A pipeline stage's schedule (Note [Pipeline parallel]): each action ("F0", "B0", ...) with
  /// the index of its first event; empty without one.
  struct Action {
    size_t event;
    std::string label;
  };
  std::vector<Action> actions;
  int64_t bytes(const MemEvent& e) const { return buffers[e.buffer].bytes; }
};

}  // namespace memsim

#endif  // MEMSIM_LIB_STREAM_EVENTS_H_
