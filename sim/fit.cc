#include "sim/fit.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "sim/ranks.h"

namespace memsim {
namespace {

using StepFn = std::function<Result<const CompiledStep*>(const RunConfig&)>;

// The largest value of |symbol| in [a, b) whose peak live bytes (from the size schedule) do not
// exceed |capacity|; |a| when none does. A value the schedule does not cover counts as within.
// Live bytes grow with the value, as the search assumes.
int64_t LiveBound(const CompiledStep& cs, const RunConfig& base, const std::string& symbol, int64_t a, int64_t b,
                  int64_t capacity) {
  while (b - a > 1) {
    const int64_t m = a + (b - a) / 2;
    RunConfig c = base;
    c.sim.symbols[symbol] = m;
    std::optional<int64_t> live = ScheduledPeakLive(cs, c);
    (!live || *live <= capacity ? a : b) = m;
  }
  return a;
}

// One search for the largest value that fits, with rows from |step| (Note [Fit search]).
class Search {
 public:
  // |at_top|: a value fits when it fits at the top of the device-used range (the verdict "fits",
  // with the cuDNN workspace bounds simulated as `run` does), else on the point estimate.
  Search(const RunConfig& base, const std::string& symbol, int64_t limit, const CompiledStep& cs, StepFn step,
         bool at_top = false)
      : base_(base), symbol_(symbol), limit_(limit), cs_(cs), step_(std::move(step)), at_top_(at_top) {
    fit_.symbol = symbol;
    hi_ = limit + 1;
    alloc_capacity_ = AllocatorCapacity(cs, base);
  }

  Result<FitResult> Run() {
    const bool scheduled = cs_.schedule && alloc_capacity_ > 0;
    if (scheduled) hi_ = LiveBound(cs_, base_, symbol_, 0, limit_ + 1, alloc_capacity_) + 1;
    // The first value: the live-bytes bound itself (no larger value can fit), else doubling
    // from 1 until a value does not fit.
    if (scheduled && hi_ > 1) MEMSIM_RETURN_IF_ERROR(Fits(hi_ - 1, /*tentative=*/true).status());
    if (!scheduled) {
      for (int64_t v = 1; lo_ == 0 && v < hi_; v = v > limit_ / 2 ? limit_ : v * 2) {
        MEMSIM_ASSIGN_OR_RETURN(bool ok, Fits(v));
        if (!ok || v == limit_) break;
      }
    }
    // Down from the bound in doubling steps: allocators keep only a few percent more than the
    // live bytes, so the answer is usually a step or two below it; then bisection.
    for (int64_t step = 1; scheduled && lo_ == 0 && hi_ - step > 1; step *= 2)
      MEMSIM_RETURN_IF_ERROR(Fits(hi_ - step).status());
    while (hi_ - lo_ > 1) MEMSIM_RETURN_IF_ERROR(Fits(lo_ + (hi_ - lo_) / 2).status());
    // The row above the answer in full (why it does not fit, and what it would need).
    if (hi_ <= limit_ && (!hi_seen_ || hi_row_.oom)) MEMSIM_RETURN_IF_ERROR(Fits(hi_, false, /*full=*/true).status());
    // The answer's row in full too (its verdict with the device-used range, as `run` gives it).
    if (lo_ > 0 && !at_top_) MEMSIM_RETURN_IF_ERROR(Fits(lo_, false, /*full=*/true).status());
    fit_.max_batch = lo_;
    fit_.at_max = lo_row_;
    fit_.above = hi_row_;
    return fit_;
  }

 private:
  // Whether |v| fits. A value the graph refuses counts as not fitting once a smaller one has
  // fitted (or while |tentative|: the first guess).
  // Without |full|, a row that runs out of memory skips what the step would need beyond it.
  Result<bool> Fits(int64_t v, bool tentative = false, bool full = false) {
    RunConfig c = base_;
    c.sim.symbols[symbol_] = v;
    c.need_after_oom = full;
    c.workspace_range = at_top_ || full;  // a row reported in full has run's verdict
    ++fit_.evaluated;
    SweepRow row = LargestRankRow(c, step_);
    if (!row.status.ok() && lo_ == 0 && !tentative) return row.status;
    const bool ok = row.status.ok() && !row.oom && (!at_top_ || row.fits_at_top());
    if (!row.status.ok()) row.oom_message = std::string(row.status.message());
    (ok ? lo_row_ : hi_row_) = std::move(row);
    (ok ? lo_ : hi_) = v;
    hi_seen_ |= !ok;
    return ok;
  }

  const RunConfig& base_;
  const std::string& symbol_;
  const int64_t limit_;
  const CompiledStep& cs_;
  StepFn step_;
  const bool at_top_;
  FitResult fit_;
  int64_t alloc_capacity_ = 0;
  // Invariant: |lo_| fits (or is 0), |hi_| does not fit (or is limit + 1).
  int64_t lo_ = 0, hi_ = 0;
  SweepRow lo_row_, hi_row_;
  bool hi_seen_ = false;
};

// Compiled steps per rank, compiled on first use with |co|.
class RankSteps {
 public:
  RankSteps(const Graph& g, CompileOptions co) : g_(g), co_(std::move(co)) {}
  Result<const CompiledStep*> operator()(const RunConfig& rc) {
    auto& slot = steps_[rc.sim.parallel.rank];
    if (!slot) {
      MEMSIM_ASSIGN_OR_RETURN(slot, CompileStep(g_, rc, co_));
    }
    return slot.get();
  }
  // Engine runs at |c| (every rank whose row LargestRankRow may take) confirming the schedule;
  // false at the first disagreement. Counts the runs in |runs|.
  Result<bool> Confirm(const RunConfig& c, int* runs) {
    const int ranks = RanksMayDiffer(c) ? c.sim.parallel.world : 1;
    for (int r = 0; r < ranks; ++r) {
      RunConfig rc = c;
      if (ranks > 1) rc.sim.parallel.rank = r;
      MEMSIM_ASSIGN_OR_RETURN(const CompiledStep* cs, (*this)(rc));
      if (!cs->schedule) continue;
      ++*runs;
      if (!ConfirmScheduled(*cs, rc)) return false;
    }
    return true;
  }

 private:
  const Graph& g_;
  const CompileOptions co_;
  std::map<int, std::shared_ptr<const CompiledStep>> steps_;
};

}  // namespace

Result<FitResult> FitBatch(const Graph& g, const RunConfig& base, int64_t limit) {
  return FitSymbol(g, base, "batch", limit);
}

namespace {

// Both searches (point estimate, then the top of the range below it) over |cs|'s step.
Result<FitResult> SearchBoth(const RunConfig& base, const std::string& symbol, int64_t limit, const CompiledStep& cs,
                             const StepFn& step) {
  MEMSIM_ASSIGN_OR_RETURN(FitResult fit, Search(base, symbol, limit, cs, step).Run());
  fit.max_batch_at_top = fit.max_batch;
  fit.at_top = fit.at_max;
  if (!cs.overhead || fit.max_batch == 0) return fit;  // no device range: the same answer
  MEMSIM_ASSIGN_OR_RETURN(FitResult top, Search(base, symbol, fit.max_batch, cs, step, /*at_top=*/true).Run());
  fit.max_batch_at_top = top.max_batch;
  fit.at_top = top.at_max;
  fit.evaluated += top.evaluated;
  return fit;
}

}  // namespace

Result<FitResult> FitSymbol(const Graph& g, const RunConfig& base, const std::string& symbol, int64_t limit) {
  if (base.alloc.capacity_bytes <= 0) return Status::InvalidArgument("fit needs a device capacity (--gpu or --capacity)");
  if (g.FindSymbol(symbol) == kNone) return Status::InvalidArgument(g.source + ": the graph has no symbol \"" + symbol + "\"");
  // The search adds 1 to the limit and doubles values below it: 2^40 keeps both far from overflow.
  if (limit < 1 || limit > kMaxFitLimit)
    return Status::InvalidArgument("--max-batch " + std::to_string(limit) + ": the " + symbol + " limit must be 1 to " +
                                   std::to_string(kMaxFitLimit));
  // The search takes a handful of values in [1, limit]: worth an unchecked size schedule, whose
  // answers engine runs then confirm (Note [Fit search]).
  const CompileOptions co{{SymbolValues{symbol, {2, 3, 4, 5, limit}}},
                          static_cast<size_t>(2 * (64 - __builtin_clzll(static_cast<uint64_t>(limit))) + 8),
                          /*checked=*/false};
  RankSteps scheduled(g, co);
  MEMSIM_ASSIGN_OR_RETURN(const CompiledStep* cs, scheduled(base));
  Result<FitResult> searched = SearchBoth(base, symbol, limit, *cs, std::ref(scheduled));
  if (!cs->schedule) return searched;
  // An unchecked schedule can extrapolate a size that is not a polynomial (a CUDA reduction's
  // staging, Note [CUDA reduction staging]) to nonsense far out: a search it fails is no answer.
  // Otherwise confirm both sides of each answer on the exact path; if the schedule was wrong
  // there, search again without it.
  bool agrees = searched.ok();
  FitResult fit = agrees ? *searched : FitResult{};
  const std::set<int64_t> around = {fit.max_batch, fit.max_batch + 1, fit.max_batch_at_top, fit.max_batch_at_top + 1};
  for (int64_t v : around) {
    if (v < 1 || v > limit || !agrees) continue;
    RunConfig c = base;
    c.sim.symbols[symbol] = v;
    MEMSIM_ASSIGN_OR_RETURN(agrees, scheduled.Confirm(c, &fit.confirmed));
  }
  if (agrees) return fit;
  RankSteps exact(g, CompileOptions{});
  MEMSIM_ASSIGN_OR_RETURN(const CompiledStep* plain, exact(base));
  const int evaluated = fit.evaluated, confirmed = fit.confirmed;
  MEMSIM_ASSIGN_OR_RETURN(fit, SearchBoth(base, symbol, limit, *plain, std::ref(exact)));
  fit.evaluated += evaluated;
  fit.confirmed = confirmed;
  return fit;
}

}  // namespace memsim
