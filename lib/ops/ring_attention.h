// Context parallelism's ring attention (Note [Context parallel] in docs/parallel.md): one rank of
// torch.distributed.tensor.experimental.context_parallel runs each scaled_dot_product_attention
// as cp kernel calls over the K/V chunks of the ring (_templated_ring_attention and its backward
// in torch/distributed/tensor/experimental/_context_parallel/_attention.py, torch 2.13). These
// plans replace the fused backends' single kernel when Profile::cp has more than one rank.
#ifndef MEMSIM_LIB_OPS_RING_ATTENTION_H_
#define MEMSIM_LIB_OPS_RING_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "lib/ops/op_rules.h"
#include "lib/ops/sdpa_backend.h"
#include "lib/ops/tensor_meta.h"

namespace memsim {

/// What one ring step computes on this rank (_templated_ring_attention's branches): the query
/// rows and key rows of its kernel call, in halves of the local chunk (2 = all of it), and
/// whether it merges into the second half only (`partial`).
struct RingStep {
  int q_halves = 2, kv_halves = 2;
  bool partial = false;
  bool skip = false;  ///< causal without load balancing, a chunk from a later rank: no kernel
};

/// The steps of rank |rank| of |world| (i = 0 .. world-1), from _is_causal_behavior and the
/// load-balanced branches (head-tail sharding: the step-i chunk comes from rank (rank − i) mod world).
std::vector<RingStep> RingSteps(int world, int rank, bool causal, bool load_balance);

/// Shared with the fused backends' rules (rules_attention.cc): the CPU flash kernel's tiles
/// (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp: query rows and key rows per block) and a
/// dense tensor laid out in |t|'s stride order (outermost first; ties keep the dim order), what
/// `t * scalar` returns (Note [Elementwise output layout]) and `zeros_like(t)` makes of a dense view.
int64_t FlashCpuQSplit(int64_t s_q);
int64_t FlashCpuKvSplit(int64_t s_k);
TensorMeta DenseInOrderOf(Dtype dt, const TensorMeta& t);

/// The forward and backward plans of one ring attention call (the op's q, k, v at s/cp).
void FwdRingAttention(const RuleCtx& c, SdpaBackend backend, FwdPlan* p);
void BwdRingAttention(const RuleCtx& c, SdpaBackend backend, BwdPlan* p);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_RING_ATTENTION_H_
