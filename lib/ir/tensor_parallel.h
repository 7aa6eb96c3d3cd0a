// Tensor (+ sequence) parallelism as a graph rewrite: the per-rank graph that
// torch.distributed.tensor.parallel.parallelize_module leaves (Note [Tensor parallel] in
// docs/parallel.md). ColwiseParallel Linears keep out_features/tp rows of the weight, their input
// passes through grad_all_reduce (the grad all-reduced in backward); RowwiseParallel Linears keep
// in_features/tp columns and their output is all-reduced (sequence parallel: reduce-scattered on
// the sequence dim, and the colwise blocks' input all-gathered). View sizes between them that
// name the head count are divided.
#ifndef MEMSIM_LIB_IR_TENSOR_PARALLEL_H_
#define MEMSIM_LIB_IR_TENSOR_PARALLEL_H_

#include <string>

#include "lib/ir/graph.h"
#include "lib/util/status.h"

namespace memsim {

struct TensorParallelConfig {
  int degree = 1;                  ///< the tp dimension of the mesh
  std::string plan = "layers";     ///< --tp-plan: layers
  bool sequence_parallel = false;  ///< --sequence-parallel on
  bool loss_parallel = false;      ///< --loss-parallel on: the logits stay sharded into the loss
};

/// The ColwiseParallel / RowwiseParallel style of a Linear's module path under |plan| ("" = none):
/// "layers" shards the attention's q/k/v (colwise) and output (rowwise) projections and the
/// MLP's gate/up (colwise) and down (rowwise) projections, named as Hugging Face (q_proj, k_proj,
/// v_proj, o_proj, gate_proj, up_proj, down_proj) or torchtitan (wq, wk, wv, wo, w1, w3, w2) name them.
std::string TpStyleOf(const std::string& plan, const std::string& module);

/// |g| as one rank of |c|.degree runs it. Errors (one line, naming the op or parameter and the
/// fix): an unknown plan; no Linear selected; a sharded size not divisible by the degree; a
/// RowwiseParallel Linear with a bias; a view in the sharded region whose sizes name no
/// divisible head count; sequence parallel (not simulated yet).
Result<Graph> ApplyTensorParallel(const Graph& g, const TensorParallelConfig& c);

}  // namespace memsim

#endif  // MEMSIM_LIB_IR_TENSOR_PARALLEL_H_
