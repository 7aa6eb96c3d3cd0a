#include "sim/schedule.h"

#include <algorithm>

namespace memsim {
namespace {

constexpr int kMaxDegree = 3;
constexpr size_t kMaxSymbols = 3;
constexpr size_t kChecksPerSymbol = 3;
// Offsets from the first probe beyond which C(t, 3) could leave __int128 with a coefficient.
constexpr int64_t kMaxOffset = int64_t{1} << 40;

// One varying symbol: its probe window and the values checked beyond it.
struct AxisPlan {
  int64_t start = 0;
  int degree = 0;
  std::vector<int64_t> checks;  // values beyond the window, largest first
  std::vector<int64_t> low;     // values below the window (1, 0), checked one by one
};

std::vector<int64_t> Distinct(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The window starts above 1 when larger values exist: a size-1 dimension has strides of its own
// (PyTorch's views, contiguity and matmul folding can differ at 1), so the order at 1 may differ
// from the rest. 0 and 1 are then checked on their own (|low|).
AxisPlan PlanAxis(const SymbolValues& s) {
  std::vector<int64_t> v = Distinct(s.values);
  AxisPlan a;
  if (v.empty()) return a;
  auto above = std::upper_bound(v.begin(), v.end(), int64_t{1});
  if (above != v.end()) {
    a.low.assign(std::make_reverse_iterator(above), v.rend());  // 1, then 0
    v.erase(v.begin(), above);
  }
  a.start = v.front();
  a.degree = static_cast<int>(std::min<int64_t>(kMaxDegree, v.back() - v.front()));
  std::vector<int64_t> beyond;
  for (int64_t x : v)
    if (x > a.start + a.degree) beyond.push_back(x);
  if (beyond.empty()) return a;
  // The largest (a cap or a staircase shows there), the median, the nearest to the window.
  for (int64_t x : {beyond.back(), beyond[beyond.size() / 2], beyond.front()})
    if (std::find(a.checks.begin(), a.checks.end(), x) == a.checks.end() && a.checks.size() < kChecksPerSymbol)
      a.checks.push_back(x);
  return a;
}

// All points of the product of |sets| (first axis slowest).
std::vector<std::vector<int64_t>> Product(const std::vector<std::vector<int64_t>>& sets) {
  std::vector<std::vector<int64_t>> out{{}};
  for (const auto& s : sets) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& p : out)
      for (int64_t x : s) {
        next.push_back(p);
        next.back().push_back(x);
      }
    out = std::move(next);
  }
  return out;
}

// The probe grid (start + j per axis) and the check points (start or a check value per axis,
// not all start).
std::pair<std::vector<std::vector<int64_t>>, std::vector<std::vector<int64_t>>> Points(const std::vector<AxisPlan>& plan) {
  std::vector<std::vector<int64_t>> grid, check;
  for (const AxisPlan& a : plan) {
    grid.emplace_back();
    for (int j = 0; j <= a.degree; ++j) grid.back().push_back(a.start + j);
    check.push_back({a.start});
    check.back().insert(check.back().end(), a.checks.begin(), a.checks.end());
  }
  auto checks = Product(check);
  checks.erase(checks.begin());  // all at start: the first probe
  return {Product(grid), checks};
}

// Whether y[0], y[1], y[2] (sizes at three consecutive values) have no second difference.
bool NoSecondDifference(const std::vector<std::vector<int64_t>>& y) {
  for (size_t b = 0; b < y[0].size(); ++b) {
    // y0 - 2 y1 + y2 == 0, in 128 bits (no overflow).
    const __int128 d2 = static_cast<__int128>(y[0][b]) - 2 * static_cast<__int128>(y[1][b]) + y[2][b];
    if (d2 != 0) return false;
  }
  return true;
}

}  // namespace

bool SameOrder(const EventStream& a, const EventStream& b) {
  if (a.events.size() != b.events.size() || a.buffers.size() != b.buffers.size() || a.step_starts != b.step_starts)
    return false;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const MemEvent &x = a.events[i], &y = b.events[i];
    if (x.kind != y.kind || x.phase != y.phase || x.buffer != y.buffer || x.op != y.op) return false;
  }
  for (size_t i = 0; i < a.buffers.size(); ++i)
    if (a.buffers[i].category != b.buffers[i].category || a.buffers[i].op != b.buffers[i].op) return false;
  return true;
}

size_t SizeSchedule::RunsNeeded(const std::vector<SymbolValues>& vary, bool checked) {
  if (vary.empty() || vary.size() > kMaxSymbols) return 0;
  std::vector<AxisPlan> plan;
  for (const SymbolValues& s : vary) {
    if (s.values.empty()) return 0;
    plan.push_back(PlanAxis(s));
  }
  auto [grid, checks] = Points(plan);
  if (!checked) return grid.size();
  size_t runs = grid.size() + checks.size();
  for (const AxisPlan& a : plan) runs += a.low.size();
  return runs;
}

size_t SizeSchedule::BasisSize() const {
  size_t n = 1;
  for (const Axis& a : axes_) n *= static_cast<size_t>(a.degree) + 1;
  return n;
}

std::optional<SizeSchedule> SizeSchedule::Build(const std::vector<SymbolValues>& vary, const Probe& probe,
                                                size_t max_runs, std::string* why, bool checked) {
  const size_t needed = RunsNeeded(vary, checked);
  if (needed == 0 || needed > max_runs) {
    *why = needed == 0 ? "no symbol to vary, or more than 3" : "more probe runs than configurations to evaluate";
    return std::nullopt;
  }
  std::vector<AxisPlan> plan;
  SizeSchedule s;
  for (const SymbolValues& v : vary) {
    plan.push_back(PlanAxis(v));
    s.symbols_.push_back(v.symbol);
    s.axes_.push_back(Axis{plan.back().start, plan.back().degree, plan.back().start, plan.back().start + plan.back().degree});
  }
  auto [grid, checks] = Points(plan);
  // Probe the grid: the same order everywhere, every size recorded.
  std::vector<std::vector<int64_t>> y;  // [grid point][buffer, then host bytes]
  for (const auto& p : grid) {
    auto es = probe(p);
    ++s.runs_;
    if (!es.ok()) {
      *why = "a probe failed: " + std::string(es.status().message());
      return std::nullopt;
    }
    if (y.empty()) {
      s.order_ = std::move(*es);
    } else if (!SameOrder(s.order_, *es)) {
      *why = "the order of the events changes with the symbol values";
      // One symbol: a threshold between two probes (CUDA's embedding backward sorts more than
      // 3072 ids) - the schedule covers the values from the one that changed the order up; those
      // below take the exact path.
      if (vary.size() != 1 || !checked || s.runs_ >= max_runs) return std::nullopt;
      SymbolValues above{vary[0].symbol, {}};
      for (int64_t x : vary[0].values)
        if (x >= p[0]) above.values.push_back(x);
      auto rest = Build({above}, probe, max_runs - s.runs_, why, checked);
      if (rest) rest->runs_ += s.runs_;
      return rest;
    }
    const EventStream& got = y.empty() ? s.order_ : *es;
    y.emplace_back();
    for (const Buffer& b : got.buffers) y.back().push_back(b.bytes);
    y.back().push_back(got.host_bytes);
    // One symbol: when three probes show no second difference anywhere, the sizes are linear
    // there and the fourth probe is skipped (degree 2 with a zero term). The checks, or fit's
    // confirmation, verify it like any other degree.
    if (plan.size() == 1 && plan[0].degree == kMaxDegree && y.size() == 3 && NoSecondDifference(y)) {
      plan[0].degree = s.axes_[0].degree = 2;
      s.axes_[0].hi = s.axes_[0].start + 2;
      break;
    }
  }
  if (!s.SetTerms(std::move(y), why)) return std::nullopt;
  if (!checked) {
    s.checked_ = false;
    for (size_t k = 0; k < plan.size(); ++k) s.axes_[k].hi = std::max(s.axes_[k].hi, Distinct(vary[k].values).back());
    return s;
  }
  // Below the window, axis by axis (the others at their start): the range reaches down to each
  // value that agrees, 1 then 0; one that does not takes the exact path.
  for (size_t k = 0; k < plan.size(); ++k)
    for (int64_t x : plan[k].low) {
      std::vector<int64_t> p;
      for (const Axis& a : s.axes_) p.push_back(a.start);
      p[k] = x;
      if (s.Check(p, probe, why) != CheckResult::kAgrees) break;
      s.axes_[k].lo = x;
    }
  // Beyond the window; the ranges grow to what was checked. With one symbol, a value the engine
  // refuses (a sequence beyond a position table) or that disagrees (a cap reached) ends the range
  // below it.
  for (const auto& p : checks) {
    const CheckResult r = s.Check(p, probe, why);
    if (r != CheckResult::kAgrees && s.axes_.size() == 1) continue;  // checks go from the largest down
    if (r != CheckResult::kAgrees) return std::nullopt;
    for (size_t k = 0; k < p.size(); ++k) s.axes_[k].hi = std::max(s.axes_[k].hi, p[k]);
  }
  return s;
}

bool SizeSchedule::SetTerms(std::vector<std::vector<int64_t>> y, std::string* why) {
  // Forward differences along each axis, in place: y[e] = Δ^e f(start), the coefficients of
  // f(x) = Σ_e y[e] Π_k C(x_k - start_k, e_k) (Newton's forward formula).
  const size_t nvalues = order_.buffers.size() + 1;
  std::vector<size_t> stride(axes_.size(), 1);
  for (size_t k = axes_.size(); k-- > 1;) stride[k - 1] = stride[k] * (static_cast<size_t>(axes_[k].degree) + 1);
  for (size_t k = 0; k < axes_.size(); ++k) {
    const int deg = axes_[k].degree;
    for (size_t g = 0; g < y.size(); ++g) {
      if ((g / stride[k]) % (deg + 1) != 0) continue;  // the first point of each line along k
      for (int level = 1; level <= deg; ++level)
        for (int j = deg; j >= level; --j)
          for (size_t b = 0; b < nvalues; ++b) {
            int64_t& hi = y[g + j * stride[k]][b];
            if (__builtin_sub_overflow(hi, y[g + (j - 1) * stride[k]][b], &hi)) {
              *why = "a size difference overflows";
              return false;
            }
          }
    }
  }
  for (size_t b = 0; b < nvalues; ++b) {
    term_begin_.push_back(static_cast<uint32_t>(term_basis_.size()));
    bool varies = false;
    for (size_t e = 0; e < y.size(); ++e)
      if (y[e][b] != 0) {
        term_basis_.push_back(static_cast<uint32_t>(e));
        term_coeff_.push_back(y[e][b]);
        varies |= e != 0;
      }
    if (varies && b + 1 < nvalues) varying_.push_back(static_cast<uint32_t>(b));
  }
  term_begin_.push_back(static_cast<uint32_t>(term_basis_.size()));
  std::vector<bool> varies(order_.buffers.size(), false);
  for (uint32_t b : varying_) varies[b] = true;
  fixed_prefix_ = 0;
  while (fixed_prefix_ < order_.events.size() && !varies[order_.events[fixed_prefix_].buffer]) ++fixed_prefix_;
  return true;
}

SizeSchedule::CheckResult SizeSchedule::Check(const std::vector<int64_t>& p, const Probe& probe, std::string* why) {
  ++runs_;
  return Compare(p, probe, why);
}

bool SizeSchedule::Confirm(const std::vector<int64_t>& point, const Probe& probe) const {
  std::string why;
  return Compare(point, probe, &why) == CheckResult::kAgrees;
}

SizeSchedule::CheckResult SizeSchedule::Compare(const std::vector<int64_t>& p, const Probe& probe, std::string* why) const {
  auto es = probe(p);
  if (!es.ok()) {
    *why = "a probe failed: " + std::string(es.status().message());
    return CheckResult::kRefused;
  }
  EventStream at = order_;
  bool same = SameOrder(order_, *es) && Evaluate(p, &at) && at.host_bytes == es->host_bytes;
  for (size_t b = 0; same && b < at.buffers.size(); ++b) same = at.buffers[b].bytes == es->buffers[b].bytes;
  if (!same) *why = "a size is not a polynomial of degree <= 3 in the symbols, or the order of the events changes";
  return same ? CheckResult::kAgrees : CheckResult::kDiffers;
}

bool SizeSchedule::Covers(const std::vector<int64_t>& point) const {
  if (point.size() != axes_.size()) return false;
  for (size_t k = 0; k < point.size(); ++k)
    if (point[k] < axes_[k].lo || point[k] > axes_[k].hi) return false;
  return true;
}

bool SizeSchedule::BasisAt(const std::vector<int64_t>& point, std::vector<__int128>* basis) const {
  basis->assign(BasisSize(), 1);
  size_t stride = basis->size();
  for (size_t k = 0; k < axes_.size(); ++k) {
    const __int128 t = point[k] - axes_[k].start;
    if (t < -kMaxOffset || t > kMaxOffset) return false;
    const __int128 binom[kMaxDegree + 1] = {1, t, t * (t - 1) / 2, t * (t - 1) * (t - 2) / 6};
    const size_t n = static_cast<size_t>(axes_[k].degree) + 1;
    stride /= n;
    for (size_t e = 0; e < basis->size(); ++e)
      if (__builtin_mul_overflow((*basis)[e], binom[(e / stride) % n], &(*basis)[e])) return false;
  }
  return true;
}

bool SizeSchedule::Value(size_t b, const std::vector<__int128>& basis, int64_t* out) const {
  __int128 sum = 0;
  for (uint32_t t = term_begin_[b]; t < term_begin_[b + 1]; ++t) {
    __int128 term;
    if (__builtin_mul_overflow(basis[term_basis_[t]], static_cast<__int128>(term_coeff_[t]), &term) ||
        __builtin_add_overflow(sum, term, &sum))
      return false;
  }
  if (sum < 0 || sum > INT64_MAX) return false;
  *out = static_cast<int64_t>(sum);
  return true;
}

bool SizeSchedule::Evaluate(const std::vector<int64_t>& point, EventStream* out) const {
  thread_local std::vector<__int128> basis;
  if (point.size() != axes_.size() || !BasisAt(point, &basis)) return false;
  const size_t n = order_.buffers.size();
  if (out->buffers.size() != n) return false;
  // |out| is a copy of order_: the sizes that do not vary are right already.
  for (uint32_t b : varying_)
    if (!Value(b, basis, &out->buffers[b].bytes)) return false;
  return Value(n, basis, &out->host_bytes);
}

std::unique_ptr<EventStream> StreamPool::Take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      auto s = std::move(free_.back());
      free_.pop_back();
      return s;
    }
  }
  return std::make_unique<EventStream>(*order_);
}

void StreamPool::Give(std::unique_ptr<EventStream> s) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(s));
}

}  // namespace memsim
