#include "lib/ops/profile.h"

namespace memsim {

std::optional<Profile> FindProfile(std::string_view name) {
  Profile p;
  p.name = std::string(name);
  if (name == "cuda") return p;
  if (name == "cpu") {
    p.cuda = false;
    p.dropout_keeps_noise = true;
    p.mean_keeps_input = true;
    p.linear_nd_addmm = false;
    p.optimizer_foreach = false;
    p.record_function_scratch = true;
    p.accumulate_inplace = false;
    p.onednn_conv_reorders = true;
    p.batch_norm_cpu_kernels = true;
    p.layer_norm_backward_scratch = true;
    p.cublas_workspace_bytes = 0;
    p.checkpoint_rng_state_bytes = 5056;
    p.index_put_sort_buffers = 0;
    p.scalar_operand_bytes = 8;
    p.zero_whole_parameters = true;
    p.conv_workspace_policy = ConvWorkspacePolicy::kNone;
    p.autocast_table = AutocastTable::kCpu113;
    p.mixed_dtype_input_copies = true;
    return p;
  }
  return std::nullopt;
}

std::optional<bool> Bf16ConvOnednnForIsa(std::string_view isa) {
  if (isa == "avx512") return true;
  if (isa == "avx2") return false;
  return std::nullopt;
}

}  // namespace memsim
