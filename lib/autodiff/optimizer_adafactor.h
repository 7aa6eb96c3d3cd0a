// torch.optim.Adafactor (for-loop implementation, its default): factored second moments (a row
// and a column vector for a parameter of two or more dimensions, a full variance for a vector)
// and the update's temporaries, some held by the loop's Python names until the next parameter
// rebinds them. See Note [Adafactor] in docs/op-rules.md.
#ifndef MEMSIM_LIB_AUTODIFF_OPTIMIZER_ADAFACTOR_H_
#define MEMSIM_LIB_AUTODIFF_OPTIMIZER_ADAFACTOR_H_

#include <vector>

#include "lib/autodiff/optimizer.h"

namespace memsim {

/// A parameter's state bytes in creation order, after its 0-dim step: row_var (sizes with the
/// last dimension 1) and col_var (the second-to-last 1) for ≥2-D, else variance (its own size).
std::vector<int64_t> AdafactorStateBytes(const OptParam& prm);

/// The state that exists before a steady step (Adafactor creates it lazily, in the first step).
void CreateAdafactorResidentState(const Profile& p, bool first_step, const std::vector<OptParam>& params, Ledger* l,
                                  std::vector<Ledger::StorageId>* states);

/// optimizer.step(): _init_group's state for every parameter (first step), then
/// _single_tensor_adafactor's loop.
void RunAdafactorStep(const Profile& p, bool first_step, const std::vector<OptParam>& params, Ledger* l,
                      std::vector<Ledger::StorageId>* states);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_OPTIMIZER_ADAFACTOR_H_
