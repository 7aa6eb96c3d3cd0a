// bitsandbytes' optimizers (Adam8bit, AdamW8bit, Lion8bit, their paged variants, PagedAdam(W)):
// per-parameter states quantized block-wise to uint8 with an fp32 absmax per block, fp32 states
// below min_8bit_size, paged states in CUDA unified memory, and what one update allocates on each
// backend. See Note [bitsandbytes optimizers] in docs/op-rules.md.
#ifndef MEMSIM_LIB_AUTODIFF_OPTIMIZER_BNB_H_
#define MEMSIM_LIB_AUTODIFF_OPTIMIZER_BNB_H_

#include <vector>

#include "lib/autodiff/optimizer.h"

namespace memsim {

/// The block size of the 8-bit states (bitsandbytes/optim/optimizer.py init_state: blocksize = 256).
inline constexpr int64_t kBnbBlock = 256;
/// get_state_buffer pages a state only when its parameter has at least this many elements.
inline constexpr int64_t kBnbPagedMinNumel = 100000;
/// The two quantization maps (create_dynamic_map signed and unsigned, 256 fp32 each) every 8-bit
/// optimizer makes once in its constructor and shares between all parameters.
inline constexpr int64_t kBnbQmapBytes = 256 * 4;

/// One state tensor of a parameter: its bytes, and whether it is paged (unified memory).
struct BnbState {
  int64_t bytes;
  bool managed;
};

/// A parameter's state tensors in creation order: state1[, state2] (uint8, one byte per element,
/// or fp32 below min_8bit_size), then absmax1[, absmax2] (fp32, one per 256-element block).
std::vector<BnbState> BnbStateOf(const OptimizerRule& r, const Profile& p, const OptParam& prm);

/// The state that exists before a step: the quantization maps (constructor), and for a steady
/// step every parameter's states.
void CreateBnbResidentState(const OptimizerRule& r, const Profile& p, bool first_step,
                            const std::vector<OptParam>& params, Ledger* l, std::vector<Ledger::StorageId>* states);

/// optimizer.step(): per parameter with a grad, its states at the first step (init_state), then
/// the update's temporaries (Profile::bnb_update_temporaries).
void RunBnbStep(const OptimizerRule& r, const Profile& p, bool first_step, const std::vector<OptParam>& params,
                Ledger* l, std::vector<Ledger::StorageId>* states);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_OPTIMIZER_BNB_H_
