#include "lib/autodiff/optimizer.h"

namespace memsim {
namespace {

constexpr uint32_t kNoGrad = UINT32_MAX;

constexpr OptimizerRule kOptimizers[] = {
    // name, states, step_tensor, eager, state_is_clone, loop_temps, denom_outlives
    {"none", 0, false, false, false, 0, false},
    {"sgd", 0, false, false, false, 0, false},
    {"momentum", 1, false, false, true, 0, false},
    {"nesterov", 1, false, false, true, 1, true},
    {"adam", 2, true, false, false, 1, true},
    {"adamw", 2, true, false, false, 1, true},
    {"adam_amsgrad", 3, true, false, false, 1, true},
    {"adamw_amsgrad", 3, true, false, false, 1, true},
    {"adagrad", 1, true, true, false, 1, true},
    {"rmsprop", 1, true, false, false, 1, true},
    {"rmsprop_momentum", 2, true, false, false, 1, true},
    {"rmsprop_centered", 2, true, false, false, 1, true},
};

std::string_view StateName(const OptimizerRule& r, int k) {
  if (r.state_is_clone) return "momentum_buffer";
  if (r.name == "adagrad") return "sum";
  if (r.name.starts_with("rmsprop")) return k == 0 ? "square_avg" : r.name == "rmsprop_centered" ? "grad_avg" : "momentum_buffer";
  static constexpr std::string_view kAdam[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return kAdam[k];
}

/// Per-parameter state, in creation order: step, then the parameter-sized tensors.
void CreateState(const OptimizerRule& r, const Profile& p, const OptParam& prm, Ledger* l,
                 std::vector<Ledger::StorageId>* states) {
  // The step tensor lives in host memory on CUDA (not capturable/fused).
  if (r.step_tensor && !p.cuda) states->push_back(l->AllocJoined(4, {prm.name, ".step"}, Category::kOptimizerState));
  for (int k = 0; k < r.states; ++k)
    states->push_back(l->AllocJoined(prm.bytes, {prm.name, ".", StateName(r, k)}, Category::kOptimizerState));
}

}  // namespace

std::optional<OptimizerRule> FindOptimizer(std::string_view name) {
  for (const OptimizerRule& r : kOptimizers)
    if (r.name == name) return r;
  return std::nullopt;
}

bool HasFusedImplementation(const OptimizerRule& r) {
  return r.name == "sgd" || r.name == "momentum" || r.name == "nesterov" || r.name == "adam" || r.name == "adamw" ||
         r.name == "adam_amsgrad" || r.name == "adamw_amsgrad";
}

std::string OptimizerNames() {
  std::string s;
  for (const OptimizerRule& r : kOptimizers) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

void CreateResidentState(const OptimizerRule& r, const Profile& p, bool first_step,
                         const std::vector<OptParam>& params, Ledger* l,
                         std::vector<Ledger::StorageId>* states) {
  if (first_step && !r.eager) return;
  for (const OptParam& prm : params) CreateState(r, p, prm, l, states);
}

void RunOptimizerStep(const OptimizerRule& r, const Profile& p, bool first_step,
                      const std::vector<OptParam>& params, Ledger* l,
                      std::vector<Ledger::StorageId>* states) {
  // Lazy state: Adam/RMSprop create every parameter's state before the update loop; SGD's
  // momentum buffer is a clone of the grad made inside the loop.
  bool lazy = first_step && !r.eager;
  if (lazy && !r.state_is_clone)
    for (const OptParam& prm : params)
      if (prm.grad != kNoGrad) CreateState(r, p, prm, l, states);
  if (r.loop_temps == 0 && !(lazy && r.state_is_clone)) return;

  if (p.optimizer_foreach || p.optimizer_fused) {
    // Multi-tensor: clones first (momentum), then one temporary list over all parameters,
    // released together when the list goes out of scope.
    if (lazy && r.state_is_clone)
      for (const OptParam& prm : params)
        if (prm.grad != kNoGrad) CreateState(r, p, prm, l, states);
    std::vector<Ledger::StorageId> temps;
    for (int t = 0; t < (p.optimizer_fused ? 0 : r.loop_temps); ++t)
      for (const OptParam& prm : params)
        if (prm.grad != kNoGrad) temps.push_back(l->AllocJoined(prm.bytes, {prm.name, " step temporary"}, Category::kTemporary));
    for (auto s : temps) l->Unref(s);
    return;
  }
  // For-loop: per parameter, e.g. Adam's denom = (exp_avg_sq.sqrt() / c).add_(eps): the sqrt
  // is freed at once, the denom when the next parameter's denom replaces it.
  Ledger::StorageId held = kNoGrad;
  for (const OptParam& prm : params) {
    if (prm.grad == kNoGrad) continue;
    if (r.state_is_clone && r.loop_temps > 0 && held != kNoGrad) {
      l->Unref(held);  // nesterov: d_p rebound at the top of the next iteration
      held = kNoGrad;
    }
    if (lazy && r.state_is_clone) CreateState(r, p, prm, l, states);
    if (r.loop_temps == 0) continue;
    Ledger::StorageId t;
    if (r.state_is_clone) {
      t = l->AllocJoined(prm.bytes, {prm.name, " nesterov d_p"}, Category::kTemporary);
    } else {
      Ledger::StorageId sq = l->AllocJoined(prm.bytes, {prm.name, " sqrt"}, Category::kTemporary);
      t = l->AllocJoined(prm.bytes, {prm.name, " denom"}, Category::kTemporary);
      l->Unref(sq);
    }
    if (held != kNoGrad) l->Unref(held);
    held = t;
  }
  if (held != kNoGrad) l->Unref(held);
}

}  // namespace memsim
