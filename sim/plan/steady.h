// Long gradient accumulation in a few passes (Note [Steady accumulation] in docs/plan.md): a
// step of K forward+backward passes is simulated with m < K passes when the m-pass run proves
// that every pass from the second on repeats — the engine emits the same events in passes 2..m
// (the same kinds, phases, ops and sizes; the buffers made in a pass are freed in it) and the
// caching allocator is in the same state at the start of two consecutive of them — so that the
// K-pass step's figures are the m-pass step's. Otherwise the K passes are simulated. Every row is
// simulated through the engine and the allocator either way.
#ifndef MEMSIM_SIM_PLAN_STEADY_H_
#define MEMSIM_SIM_PLAN_STEADY_H_

#include <cstddef>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/stream/events.h"
#include "sim/allocator/simulate.h"
#include "sim/sweep.h"

namespace memsim {

/// The index of the first event of every pass after the first (the forward that follows a
/// backward, within the one step), and of the optimizer's first event (events.size() if none).
struct PassMarks {
  std::vector<size_t> pass_starts;
  size_t optimizer_start = 0;
};
PassMarks PassMarksOf(const EventStream& es);

/// Whether the events of [a, b) and [b, c) are the same modulo the buffers made in each: same
/// kind, phase, op, and per buffer the same bytes and category, buffers made before |a| the same
/// ids, and every buffer made in a range freed in it.
bool SamePass(const EventStream& es, size_t a, size_t b, size_t c);

/// The caching allocator's state after the first |marks[i]| events of |es| under |options| (its
/// capacity the allocator's), for every mark (ascending): its segments and blocks, its device
/// call counts, and the block address of every live buffer; empty from an OOM on. Only the
/// plain caching model (no alloc_conf) has a state that this describes completely; for others
/// every state is empty. |oom_event|: the event the allocator could not serve (-1: none).
std::vector<std::vector<int64_t>> AllocatorStatesAt(const EventStream& es, const AllocatorOptions& options,
                                                    const std::vector<size_t>& marks, int64_t* oom_event = nullptr);

/// The passes a shortened run has: passes 2, 3 and 4 are compared whole (the 5th starts after
/// the 4th ends), and the allocator's states at the starts of passes 2 to 5 (in the models
/// memsim simulates the caching allocator settles by the 3rd pass: the 2nd still creates
/// segments that the first pass's activations and the new grads need together). Longer
/// accumulations are tried with these.
inline constexpr int kSteadyPasses = 5;

/// RunOne(g, c), from fewer passes when that is proven the same (|shortened|: whether it was).
SweepRow SteadyRow(const Graph& g, const RunConfig& c, bool* shortened = nullptr);

}  // namespace memsim

#endif  // MEMSIM_SIM_PLAN_STEADY_H_
