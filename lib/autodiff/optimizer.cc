#include "lib/autodiff/optimizer.h"

#include "lib/autodiff/optimizer_adafactor.h"
#include "lib/autodiff/optimizer_bnb.h"

namespace memsim {
namespace {

constexpr uint32_t kNoGrad = UINT32_MAX;

constexpr OptimizerRule kOptimizers[] = {
    // name, states, step_tensor, eager, state_is_clone, loop_temps, denom_outlives
    {"recorded", 0, false, false, false, 0, false},
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
    // bitsandbytes (Note [bitsandbytes optimizers]): name, states, ..., state bits, paged
    {"adam8bit", 2, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 8, false},
    {"adamw8bit", 2, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 8, false},
    {"paged_adam8bit", 2, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 8, true},
    {"paged_adamw8bit", 2, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 8, true},
    {"paged_adam", 2, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 32, true},
    {"paged_adamw", 2, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 32, true},
    {"lion8bit", 1, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 8, false},
    {"paged_lion8bit", 1, false, false, false, 0, false, nullptr, OptimizerFamily::kBitsandbytes, 8, true},
    // torch.optim.Adafactor (Note [Adafactor])
    {"adafactor", 0, true, false, false, 0, false, nullptr, OptimizerFamily::kAdafactor},
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

/// |z|'s bytes for a parameter of |param_bytes|, saturating at INT64_MAX instead of wrapping
/// (a multiplier up to 2^40 times a parameter up to 2^50 bytes), so the ledger's byte budget
/// reports the tensor as too large (Note [Recorded optimizers]).
int64_t SizeOf(const OptSize& z, int64_t param_bytes) {
  if (!z.num) return z.bytes;
  int64_t whole = 0, total = 0;
  if (__builtin_mul_overflow(param_bytes / z.den, z.num, &whole)) return INT64_MAX;
  if (__builtin_add_overflow(whole, param_bytes % z.den * z.num / z.den, &total)) return INT64_MAX;
  return total;
}

/// Replays a recorded optimizer's step (Note [Recorded optimizers]): the ops before the loop,
/// the body once per parameter with a grad, the frees after the loop. Resident state of the
/// j-th parameter is (*states)[base + j * R + i], as CreateResidentState made it.
void RunRecorded(const OptimizerRule& r, bool first_step, const std::vector<OptParam>& params, Ledger* l,
                 std::vector<Ledger::StorageId>* states) {
  const OptProgram& pr = first_step ? r.program->first : r.program->steady;
  const std::string& name = r.program->name;
  const size_t R = pr.resident.size();
  const size_t base = states->size() >= params.size() * R ? states->size() - params.size() * R : 0;
  constexpr size_t kNoParam = SIZE_MAX;
  std::vector<Ledger::StorageId> globals, cur, prev;
  size_t cur_j = kNoParam, prev_j = kNoParam;
  auto object = [&](const OptRef& ref) -> Ledger::StorageId {
    if (ref.owner == OptRef::Owner::kGlobal) return globals[ref.index];
    const bool previous = ref.owner == OptRef::Owner::kPrevious;
    const size_t j = previous ? prev_j : cur_j;
    if (j == kNoParam) return kNoGrad;  // the first parameter has no previous one
    if (ref.state) return R && base + j * R + ref.index < states->size() ? (*states)[base + j * R + ref.index] : kNoGrad;
    return (previous ? prev : cur)[ref.index];
  };
  auto run = [&](const std::vector<OptOp>& ops, const OptParam* prm) {
    for (const OptOp& op : ops) {
      if (!op.alloc) {
        if (Ledger::StorageId id = object(op.ref); id != kNoGrad) l->Unref(id);
        continue;
      }
      if (!prm) {
        globals.push_back(l->Alloc(SizeOf(op.size, 0), name + " scalar", Category::kTemporary));
        continue;
      }
      const bool state = pr.survives[cur.size()];
      cur.push_back(l->Alloc(SizeOf(op.size, prm->bytes), prm->name + (state ? "." : " ") + name +
                                 (state ? " state " : " temporary ") + std::to_string(cur.size()),
                             state ? Category::kOptimizerState : Category::kTemporary));
      if (state) states->push_back(cur.back());
    }
  };
  run(pr.before, nullptr);
  const OptParam* last = nullptr;
  for (size_t j = 0; j < params.size(); ++j) {
    if (params[j].grad == kNoGrad) continue;
    prev = std::move(cur);
    cur.clear();
    prev_j = cur_j;
    cur_j = j;
    run(pr.body, &params[j]);
    last = &params[j];
  }
  prev_j = kNoParam;
  if (last) run(pr.end, last);
  else
    for (const OptOp& op : pr.end)
      if (op.ref.owner == OptRef::Owner::kGlobal) l->Unref(globals[op.ref.index]);
}

}  // namespace

std::optional<OptimizerRule> FindOptimizer(std::string_view name) {
  for (const OptimizerRule& r : kOptimizers)
    if (r.name == name) return r;
  return std::nullopt;
}

Ledger::StorageId AllocWithScalarOperand(const Profile& p, int64_t bytes, int64_t elem, std::string_view name,
                                         Ledger* l) {
  Ledger::StorageId w = kNoGrad, cast = kNoGrad;
  if (p.scalar_operand_bytes) w = l->Alloc(p.scalar_operand_bytes, "wrapped scalar", Category::kTemporary);
  if (p.scalar_operand_bytes && p.scalar_operand_cast) cast = l->Alloc(elem, "wrapped scalar, cast", Category::kTemporary);
  Ledger::StorageId out = l->Alloc(bytes, name, Category::kTemporary);
  if (cast != kNoGrad) l->Unref(cast);
  if (w != kNoGrad) l->Unref(w);
  return out;
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
  if (r.program) {  // the state a recorded optimizer holds before this step (its constructor's, for a first one)
    const OptProgram& pr = first_step ? r.program->first : r.program->steady;
    for (const OptParam& prm : params)
      for (size_t i = 0; i < pr.resident.size(); ++i)
        states->push_back(l->Alloc(SizeOf(pr.resident[i], prm.bytes), prm.name + "." + r.program->name + " state " + std::to_string(i),
                                   Category::kOptimizerState));
    return;
  }
  if (r.family == OptimizerFamily::kBitsandbytes) return CreateBnbResidentState(r, p, first_step, params, l, states);
  if (r.family == OptimizerFamily::kAdafactor) return CreateAdafactorResidentState(p, first_step, params, l, states);
  if (first_step && !r.eager) return;
  for (const OptParam& prm : params) CreateState(r, p, prm, l, states);
}

void RunOptimizerStep(const OptimizerRule& r, const Profile& p, bool first_step,
                      const std::vector<OptParam>& params, Ledger* l,
                      std::vector<Ledger::StorageId>* states) {
  if (r.program) return RunRecorded(r, first_step, params, l, states);
  if (r.family == OptimizerFamily::kBitsandbytes) return RunBnbStep(r, p, first_step, params, l, states);
  if (r.family == OptimizerFamily::kAdafactor) return RunAdafactorStep(p, first_step, params, l, states);
  // Lazy state: Adam/RMSprop create every parameter's state before the update loop; SGD's
  // momentum buffer is a clone of the grad made inside the loop.
  bool lazy = first_step && !r.eager;
  if (lazy && !r.state_is_clone)
    for (const OptParam& prm : params)
      if (prm.grad != kNoGrad) CreateState(r, p, prm, l, states);
  if (r.loop_temps == 0 && !(lazy && r.state_is_clone)) return;

  if (p.optimizer_foreach || p.optimizer_fused) {
    // Multi-tensor: clones first (momentum), then one temporary list over all parameters,
    // released together when the list goes out of scope: CPython's list_dealloc drops the items
    // last to first (the order the CUDA caching allocator sees; H100 snapshots, 2.11).
    if (lazy && r.state_is_clone)
      for (const OptParam& prm : params)
        if (prm.grad != kNoGrad) CreateState(r, p, prm, l, states);
    std::vector<Ledger::StorageId> temps;
    for (int t = 0; t < (p.optimizer_fused ? 0 : r.loop_temps); ++t)
      for (const OptParam& prm : params)
        if (prm.grad != kNoGrad) temps.push_back(l->AllocJoined(prm.bytes, {prm.name, " step temporary"}, Category::kTemporary));
    for (auto s = temps.rbegin(); s != temps.rend(); ++s) l->Unref(*s);
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
