// The oneDNN transients GEMM op rules add on the cpu profile's avx512 bf16 path (--cpu-isa
// avx512): the scratchpad of each brgemm matmul (lib/ops/onednn_scratchpad.h) and the operand
// copies PyTorch 1.13's mkldnn_matmul makes of 3-D operands. Nothing on other paths. Note
// [oneDNN bf16 scratchpads] in docs/op-rules.md.
#ifndef MEMSIM_LIB_OPS_ONEDNN_PLAN_H_
#define MEMSIM_LIB_OPS_ONEDNN_PLAN_H_

#include <cstdint>

#include "lib/ops/op_rules.h"

namespace memsim {

/// Whether a bf16 tensor |t| of this op runs oneDNN's avx512_core_bf16 kernels: the cpu profile
/// with --cpu-isa avx512 (Profile::bf16_conv_onednn).
bool OneDnnBf16Path(const RuleCtx& c, const TensorMeta& t);

/// linear's GEMMs: the forward x·Wᵀ, grad_input = grad·W, grad_weight = gradᵀ·x (A transposed).
enum class LinearGemm { kForward, kGradInput, kGradWeight };
/// The scratchpad bytes of one of linear's GEMMs (0 off the path).
int64_t LinearScratch(const RuleCtx& c, LinearGemm gemm);

/// One GEMM of a matmul / mm / bmm / baddbmm: the operand copies a bmm makes and the scratchpad,
/// in bytes (all 0 off the path).
struct OneDnnGemm {
  int64_t copy_a = 0, copy_b = 0, scratch = 0;
};
/// Operands |ia|, |ib|; |grad| = -1 for the forward product, otherwise the operand whose grad is
/// computed: grad·bᵀ, or aᵀ·grad.
OneDnnGemm MatmulGemm(const RuleCtx& c, int ia, int ib, int grad);
bool HasTransients(const OneDnnGemm& g);

/// A GEMM's scratchpad allocated and freed (after its result) in forward / backward.
void GemmScratch(FwdPlan* p, int64_t bytes);
void GemmScratch(BwdPlan* p, int64_t bytes);
/// A GEMM's transients after its result: the operand copies, the scratchpad, then the copies go.
void GemmTransients(FwdPlan* p, const OneDnnGemm& g);
void GemmTransients(BwdPlan* p, const OneDnnGemm& g);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_ONEDNN_PLAN_H_
