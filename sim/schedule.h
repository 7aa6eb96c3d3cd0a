// Size schedules (Note [Size schedule] in docs/sweeps.md): the event order of one compiled step
// with every buffer's bytes a polynomial in the symbols a sweep varies. The step engine runs at a
// few probe values of those symbols; the order (every event, buffer and category) must come out
// the same each time, and each buffer's bytes are interpolated exactly (integer forward
// differences, degree up to 3 per symbol) and then checked against more engine runs at values
// the sweep takes, the largest among them. A configuration inside the checked ranges is then a
// few integer multiply-adds per buffer instead of binding and running the step engine; any other
// (or any size that does not come out as an exact 64-bit integer) takes the exact path.
#ifndef MEMSIM_SIM_SCHEDULE_H_
#define MEMSIM_SIM_SCHEDULE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lib/stream/events.h"
#include "lib/util/status.h"

namespace memsim {

/// A symbol a sweep (or a fit) varies and the values it will take.
struct SymbolValues {
  std::string symbol;
  std::vector<int64_t> values;  ///< any order; duplicates allowed
};

class SizeSchedule {
 public:
  /// Runs the step engine (buffer names off) with the varying symbols at |point| (one value per
  /// SymbolValues, in order).
  using Probe = std::function<Result<EventStream>(const std::vector<int64_t>& point)>;

  /// Builds the schedule of |vary| (at most 3 symbols) with at most |max_runs| probe runs.
  /// nullopt with the reason in |why| when the order changes with the values (with one checked
  /// symbol, the window first starts again at the value that changed it, within |max_runs|), a
  /// size is not a polynomial of degree <= 3 in them, a probe fails, or more runs would be needed.
  static std::optional<SizeSchedule> Build(const std::vector<SymbolValues>& vary, const Probe& probe,
                                           size_t max_runs, std::string* why, bool checked = true);
  // |checked| = false skips the check runs: the schedule then covers the probe window up to the
  // largest value unverified, and its user must confirm every answer it keeps (Confirm; `fit`
  // does, Note [Size schedule]).

  /// Probe runs the build needs for |vary| (0: no schedule can be built for it).
  static size_t RunsNeeded(const std::vector<SymbolValues>& vary, bool checked = true);

  const std::vector<std::string>& symbols() const { return symbols_; }
  /// Whether |point| lies inside the ranges the schedule was checked on.
  bool Covers(const std::vector<int64_t>& point) const;
  /// Writes the bytes of every buffer and the host bytes of |out| (a copy of order()) for
  /// |point|. false: a size is negative or not a 64-bit integer there (take the exact path).
  bool Evaluate(const std::vector<int64_t>& point, EventStream* out) const;
  /// The stream of the first probe: the order every configuration shares.
  const EventStream& order() const { return order_; }
  /// How many leading events of order() touch only buffers whose size never varies: every
  /// configuration's stream starts with the same events of the same sizes (the parameters,
  /// typically), so an allocator's state after them is shared (sim/allocator/simulate.h).
  size_t fixed_prefix() const { return fixed_prefix_; }
  /// Engine runs the build made (probes and checks).
  size_t runs() const { return runs_; }
  /// Whether the covered ranges were checked by engine runs (Build's |checked|).
  bool checked() const { return checked_; }
  /// One engine run at |point|: whether it gives exactly the schedule's order and sizes there.
  bool Confirm(const std::vector<int64_t>& point, const Probe& probe) const;

 private:
  struct Axis {
    int64_t start = 0;  // probes at start, start + 1, ..., start + degree
    int degree = 0;
    int64_t lo = 0, hi = 0;  // the checked range
  };
  std::vector<std::string> symbols_;
  std::vector<Axis> axes_;
  EventStream order_;
  size_t runs_ = 0;
  bool checked_ = true;
  // Per buffer, then the host bytes (index = buffers.size()): its non-zero forward differences,
  // terms [term_begin_[b], term_begin_[b + 1]) as (basis index, coefficient).
  std::vector<uint32_t> term_begin_;
  std::vector<uint32_t> term_basis_;
  std::vector<int64_t> term_coeff_;
  std::vector<uint32_t> varying_;  // the buffers whose size is not the same at every probe
  size_t fixed_prefix_ = 0;

  // The coefficients from the sizes |y| at the probe grid ([point][buffer, then host bytes]).
  bool SetTerms(std::vector<std::vector<int64_t>> y, std::string* why);
  enum class CheckResult { kAgrees, kDiffers, kRefused };
  // One more engine run at |p|, compared with the schedule's sizes there.
  CheckResult Check(const std::vector<int64_t>& p, const Probe& probe, std::string* why);
  CheckResult Compare(const std::vector<int64_t>& p, const Probe& probe, std::string* why) const;
  size_t BasisSize() const;
  bool Value(size_t b, const std::vector<__int128>& basis, int64_t* out) const;
  bool BasisAt(const std::vector<int64_t>& point, std::vector<__int128>* basis) const;
};

/// Event streams to evaluate a schedule into, one per concurrent evaluation, reused.
class StreamPool {
 public:
  explicit StreamPool(const EventStream* order) : order_(order) {}
  std::unique_ptr<EventStream> Take();
  void Give(std::unique_ptr<EventStream> s);

 private:
  const EventStream* order_;
  std::mutex mu_;
  std::vector<std::unique_ptr<EventStream>> free_;
};

/// Whether |a| and |b| have the same events, buffers (category, op) and step boundaries.
bool SameOrder(const EventStream& a, const EventStream& b);

}  // namespace memsim

#endif  // MEMSIM_SIM_SCHEDULE_H_
