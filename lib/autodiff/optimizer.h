// Optimizers: which per-parameter state each keeps, when it is created (lazily at the first
// step(), or eagerly in the constructor), and what one step() allocates temporarily, for the
// for-loop (PyTorch 1.13 default, CPU) and the multi-tensor `foreach` (2.x default on CUDA)
// implementations. See Note [Optimizer state] in docs/op-rules.md.
#ifndef MEMSIM_LIB_AUTODIFF_OPTIMIZER_H_
#define MEMSIM_LIB_AUTODIFF_OPTIMIZER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ir/optimizer_program.h"
#include "lib/stream/ledger.h"
#include "lib/ops/profile.h"

namespace memsim {

/// Which implementation runs the step: torch.optim's (the counts below), bitsandbytes'
/// (optimizer_bnb.h) or torch.optim.Adafactor's (optimizer_adafactor.h).
enum class OptimizerFamily { kTorch, kBitsandbytes, kAdafactor };

struct OptimizerRule {
  std::string_view name;
  int states;           ///< parameter-sized state tensors per parameter
  bool step_tensor;     ///< a 0-dim fp32 `step` tensor per parameter (host memory on CUDA)
  bool eager;           ///< state created in the constructor (Adagrad), not at the first step
  bool state_is_clone;  ///< the first state is a clone of the grad, made inside the update loop
  int loop_temps;       ///< parameter-sized temporaries per parameter in the update
  bool denom_outlives;  ///< the for-loop's temporary lives until the next parameter's is made
  /// "recorded": the graph's own optimizer program (Note [Recorded optimizers]); not owned.
  const OptimizerProgram* program = nullptr;
  OptimizerFamily family = OptimizerFamily::kTorch;
  int state_bits = 32;           ///< bitsandbytes: 8 (block-wise uint8 states) or 32 (fp32 states)
  bool paged = false;            ///< bitsandbytes paged: large states in CUDA unified memory
  int64_t min_8bit_size = 4096;  ///< bitsandbytes: parameters with fewer elements keep fp32 states
};

/// The optimizer named |name| (recorded — the graph's own, see Note [Recorded optimizers] —, none, sgd, momentum, nesterov, adam, adamw, adam_amsgrad,
/// adamw_amsgrad, adagrad, rmsprop, rmsprop_momentum, rmsprop_centered; bitsandbytes' adam8bit, adamw8bit,
/// paged_adam8bit, paged_adamw8bit, paged_adam, paged_adamw, lion8bit; adafactor).
std::optional<OptimizerRule> FindOptimizer(std::string_view name);
/// All accepted names, comma-separated, for help and error messages.
std::string OptimizerNames();
/// PyTorch has a fused (single-kernel, `fused=True`) implementation of it: SGD and Adam(W).
bool HasFusedImplementation(const OptimizerRule& r);

/// One trainable parameter as the optimizer sees it.
struct OptParam {
  std::string name;
  int64_t bytes;
  Ledger::StorageId grad;  ///< its .grad, or UINT32_MAX if it got none this step
  std::vector<int64_t> sizes = {};  ///< its shape; empty for a flat buffer (ZeRO, FSDP): 1-D
  int64_t elem = 4;                 ///< bytes per element

  int64_t numel() const { return bytes / elem; }
};

/// An optimizer's out-of-place op with a Python-number operand (`g.float() * gnorm_scale`): the
/// wrapped number and, where the profile makes one, its copy in the op's dtype (|elem| bytes)
/// live while the |bytes| output is allocated (Profile::scalar_operand_bytes, _cast). Returns
/// the output, a temporary named |name|.
Ledger::StorageId AllocWithScalarOperand(const Profile& p, int64_t bytes, int64_t elem, std::string_view name,
                                         Ledger* l);

/// Creates the state that exists before a step: all of it for a steady step, the eager part
/// for a first step. Appends the state storages to |states|.
void CreateResidentState(const OptimizerRule& r, const Profile& p, bool first_step,
                         const std::vector<OptParam>& params, Ledger* ledger,
                         std::vector<Ledger::StorageId>* states);

/// Runs optimizer.step(): lazy state creation (first step) and the update's temporaries.
void RunOptimizerStep(const OptimizerRule& r, const Profile& p, bool first_step,
                      const std::vector<OptParam>& params, Ledger* ledger,
                      std::vector<Ledger::StorageId>* states);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_OPTIMIZER_H_
