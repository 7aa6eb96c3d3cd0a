#include "lib/autodiff/optimizer_adafactor.h"

#include <string>

namespace memsim {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

bool Factored(const OptParam& prm) { return prm.sizes.size() >= 2; }

/// |bytes| divided by the product of |dims| (0 for an empty parameter).
int64_t Reduced(int64_t bytes, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d == 0) return 0;
  for (int64_t d : dims) bytes /= d;
  return bytes;
}

void CreateState(const Profile& p, const OptParam& prm, Ledger* l, std::vector<Ledger::StorageId>* states) {
  // state["step"] = torch.tensor(0.0): a host tensor (not capturable), device memory on the CPU only.
  if (!p.cuda) states->push_back(l->AllocJoined(4, {prm.name, ".step"}, Category::kOptimizerState));
  const std::vector<int64_t> b = AdafactorStateBytes(prm);
  static constexpr std::string_view kFactored[] = {".row_var", ".col_var"};
  for (size_t k = 0; k < b.size(); ++k)
    states->push_back(l->AllocJoined(b[k], {prm.name, Factored(prm) ? kFactored[k] : ".variance"},
                                     Category::kOptimizerState));
}

Ledger::StorageId Temp(int64_t bytes, const OptParam& prm, std::string_view what, Ledger* l) {
  return l->AllocJoined(bytes, {prm.name, " ", what}, Category::kTemporary);
}

/// A name of the loop rebound to |now|: the tensor it held goes (after |now| is made).
void Rebind(Ledger::StorageId* held, Ledger::StorageId now, Ledger* l) {
  if (*held != kNone) l->Unref(*held);
  *held = now;
}

/// The Python names of _single_tensor_adafactor's loop that outlive an iteration: row_mean and
/// col_mean until the next ≥2-D parameter's, grad_squared until the next vector's, var_estimate
/// (also `update`) until the next parameter's.
struct Held {
  Ledger::StorageId row_mean = kNone, col_mean = kNone, grad_squared = kNone, update = kNone;
};

void UpdateOne(const Profile& p, const OptParam& prm, Held* h, Ledger* l) {
  // alpha = max(eps2, param.norm(2).item() / ...): a 0-dim norm, freed at once.
  l->Unref(Temp(prm.elem, prm, "param.norm()", l));
  if (Factored(prm)) {
    const int64_t last = prm.sizes.back(), second = prm.sizes[prm.sizes.size() - 2];
    Rebind(&h->row_mean, Temp(Reduced(prm.bytes, {last}), prm, "row_mean", l), l);
    Rebind(&h->col_mean, Temp(Reduced(prm.bytes, {second}), prm, "col_mean", l), l);
    Ledger::StorageId est = Temp(prm.bytes, prm, "var_estimate (row_var @ col_var)", l);
    // row_var.mean(dim=-2, keepdim=True): the CPU mean_out is a sum, then div_ by a Python number.
    Ledger::StorageId mean = Temp(Reduced(prm.bytes, {last, second}), prm, "row_var.mean()", l);
    if (p.scalar_operand_bytes) {
      Ledger::StorageId w = l->Alloc(p.scalar_operand_bytes, "wrapped scalar", Category::kTemporary);
      if (p.scalar_operand_cast) l->Unref(l->Alloc(prm.elem, "wrapped scalar, cast", Category::kTemporary));
      l->Unref(w);
    }
    l->Unref(mean);
    Rebind(&h->update, est, l);
  } else {
    Rebind(&h->grad_squared, Temp(prm.bytes, prm, "grad * grad", l), l);
    Rebind(&h->update, Temp(prm.bytes, prm, "variance.clone()", l), l);
  }
  l->Unref(Temp(prm.elem, prm, "update.norm()", l));
}

}  // namespace

std::vector<int64_t> AdafactorStateBytes(const OptParam& prm) {
  if (!Factored(prm)) return {prm.bytes};
  const int64_t last = prm.sizes.back(), second = prm.sizes[prm.sizes.size() - 2];
  return {Reduced(prm.bytes, {last}), Reduced(prm.bytes, {second})};
}

void CreateAdafactorResidentState(const Profile& p, bool first_step, const std::vector<OptParam>& params, Ledger* l,
                                  std::vector<Ledger::StorageId>* states) {
  if (first_step) return;
  for (const OptParam& prm : params) CreateState(p, prm, l, states);
}

void RunAdafactorStep(const Profile& p, bool first_step, const std::vector<OptParam>& params, Ledger* l,
                      std::vector<Ledger::StorageId>* states) {
  if (first_step)  // _init_group: every parameter's state before the update loop
    for (const OptParam& prm : params)
      if (prm.grad != kNone) CreateState(p, prm, l, states);
  Held h;
  for (const OptParam& prm : params)
    if (prm.grad != kNone) UpdateOne(p, prm, &h, l);
  // The frame's locals at the return, in the order the function names them.
  for (Ledger::StorageId s : {h.row_mean, h.col_mean, h.grad_squared, h.update})
    if (s != kNone) l->Unref(s);
}

}  // namespace memsim
