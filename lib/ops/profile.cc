#include "lib/ops/profile.h"

#include <charconv>

namespace memsim {

namespace {

// Note [Version profiles] (docs/op-rules.md): a profile is the cuda / 2.13 defaults of Profile's
// fields, then every row whose device and release match, in this order. A row names the field it
// sets and the PyTorch source (or the oracle traces) that decides it.
const std::vector<ProfileRow> kRows = {
    // --- the CPU device, every release -------------------------------------------------------
    {"cuda", "cpu", "", [](Profile& p) { p.cuda = false; }, "no device: host memory, no caching allocator"},
    {"dropout_keeps_noise", "cpu", "", [](Profile& p) { p.dropout_keeps_noise = true; },
     "aten/src/ATen/native/Dropout.cpp: is_fused_kernel_acceptable needs CUDA/XPU, else _dropout: noise.bernoulli_().div_(1-p), input*noise"},
    {"embedding_backward_segments", "cpu", "", [](Profile& p) { p.embedding_backward_segments = false; },
     "aten/src/ATen/native/Embedding.cpp embedding_dense_backward_cpu: index_add_ into the zeros grad; the sort and segment sums are cuda/EmbeddingBackwardKernel.cu's"},
    {"p2p_send_work_holds_tensor", "cpu", "", [](Profile& p) { p.p2p_send_work_holds_tensor = true; },
     "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp: no coalescing, batch_isend_irecv returns one SendWork per op, holding its tensor until wait()"},
    {"optimizer_foreach", "cpu", "", [](Profile& p) { p.optimizer_foreach = false; },
     "torch/optim/optimizer.py _default_to_fused_or_foreach: foreach only when every tensor is on a foreach-supported device (CUDA)"},
    {"onednn_conv_reorders", "cpu", "", [](Profile& p) { p.onednn_conv_reorders = true; },
     "aten/src/ATen/native/mkldnn/Conv.cpp: oneDNN convolution with blocked layouts (docs/research/cpu-1.13-rules.md §2.3; 2.13 traces agree)"},
    {"batch_norm_cpu_kernels", "cpu", "", [](Profile& p) { p.batch_norm_cpu_kernels = true; },
     "aten/src/ATen/native/Normalization.cpp batch_norm_cpu: per-channel temporaries, grad_input allocated twice"},
    {"layer_norm_backward_scratch", "cpu", "", [](Profile& p) { p.layer_norm_backward_scratch = true; },
     "aten/src/ATen/native/cpu/layer_norm_kernel.cpp LayerNormBackwardKernelImplInternal: 2·N fp32 scratch"},
    {"cublas_workspace_bytes", "cpu", "", [](Profile& p) { p.cublas_workspace_bytes = 0; }, "no cuBLAS on the CPU"},
    {"cublaslt_workspace_bytes", "cpu", "", [](Profile& p) { p.cublaslt_workspace_bytes = 0; }, "no cuBLASLt on the CPU"},
    {"checkpoint_rng_state_bytes", "cpu", "", [](Profile& p) { p.checkpoint_rng_state_bytes = 5056; },
     "torch/utils/checkpoint.py preserve_rng_state: torch.get_rng_state() is a 5,056-byte uint8 CPU tensor"},
    {"index_put_sort_buffers", "cpu", "", [](Profile& p) { p.index_put_sort_buffers = 0; },
     "aten/src/ATen/native/TensorAdvancedIndexing.cpp: the CPU index_put_ accumulates without sorting"},
    {"scalar_operand_bytes", "cpu", "", [](Profile& p) { p.scalar_operand_bytes = 8; },
     "wrapped-number tensors are host tensors: device memory on the CPU only; an 8-byte double (scalar_to_tensor)"},
    {"host_collectives", "cpu", "", [](Profile& p) { p.host_collectives = true; },
     "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp: allgather into a flat output copy, reduce_scatter_tensor through an input copy; DeviceMesh's rank tensors are CPU tensors (the FSDP2 traces)"},
    {"zero_whole_parameters", "cpu", "", [](Profile& p) { p.zero_whole_parameters = true; },
     "ZeRO-1 on the CPU is torch.distributed.optim.ZeroRedundancyOptimizer (whole parameters), on CUDA DeepSpeed"},
    {"conv_workspace_policy", "cpu", "", [](Profile& p) { p.conv_workspace_policy = ConvWorkspacePolicy::kNone; },
     "no cuDNN on the CPU"},
    {"autocast_table", "cpu", "", [](Profile& p) { p.autocast_table = AutocastTable::kCpu113; },
     "aten/src/ATen/autocast_mode.cpp AutocastCPU registrations (1.13; the 2.13 bf16 traces match them for the zoo's ops)"},
    {"rms_norm_fused", "cpu", "", [](Profile& p) { p.rms_norm_fused = false; },
     "aten/src/ATen/native/layer_norm.cpp rms_norm_symint: _fused_rms_norm for CUDA inputs, the composite elsewhere (a 2.13 CPU dispatch log and trace)"},
    {"mixed_dtype_input_copies", "cpu", "", [](Profile& p) { p.mixed_dtype_input_copies = true; },
     "the CPU TensorIterator copies the narrower floating input to the common dtype first"},
    {"upsample_channels_last_small", "cpu", "", [](Profile& p) { p.upsample_channels_last_small = true; },
     "aten/src/ATen/native/cpu/UpSampleKernel.cpp _use_vectorized_kernel_cond_2d: channels-last kernel when H_out + W_out <= 128 (2.13 trace)"},
    {"upsample_index_buffers", "cpu", "", [](Profile& p) { p.upsample_index_buffers = true; },
     "aten/src/ATen/native/cpu/UpSampleKernel.cpp upsample_generic_Nd_kernel_impl: HelperInterp*::compute_indices_weights makes interp_size int64 index and weight tensors per spatial dim (1.13 and 2.13 traces); the CUDA kernels compute them inline"},
    {"histc_cpu_buffers", "cpu", "", [](Profile& p) { p.histc_cpu_buffers = true; },
     "aten/src/ATen/native/Histogram.cpp histogram_histc_out: bin_edges (bins + 1) and native/cpu/HistogramKernel.cpp's per-thread histograms at::zeros({threads, bins}) (1.13 and 2.13 CPU measurements); CUDA's _histc_cuda writes the output alone"},
    {"masked_select_count_copy", "cpu", "", [](Profile& p) { p.masked_select_count_copy = true; },
     "aten/src/ATen/native/TensorAdvancedIndexing.cpp masked_select_out_impl_cpu: _mask.sum() of a bool mask, which the CPU sum copies to int64 first (1.13 and 2.13 CPU measurements)"},
    {"log_sigmoid_buffer", "cpu", "", [](Profile& p) { p.log_sigmoid_buffer = true; },
     "aten/src/ATen/native/Activation.cpp log_sigmoid_forward_cpu: buffer = at::empty_like(input); the CUDA kernel returns an empty buffer"},
    {"bnb_update_temporaries", "cpu", "", [](Profile& p) { p.bnb_update_temporaries = true; },
     "bitsandbytes/backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu / _optimizer_update_32bit_cpu: PyTorch ops with fp32 temporaries; CUDA's kernels update in place"},
    {"bnb_paged_managed", "cpu", "", [](Profile& p) { p.bnb_paged_managed = false; },
     "bitsandbytes/optim/optimizer.py get_state_buffer: on a CPU, paged optimizers fall back to torch.zeros_like (a warning)"},
    {"scalar_operand_cast", "cpu", "2.13", [](Profile& p) { p.scalar_operand_cast = true; },
     "2.13 CPU traces of a Python-number operand (h * 2.0, h + 1.0, LoRA's * scaling): 8-byte wrapped number, then a copy in the op's dtype freed after the output"},
    {"scaled_mm_mat2_copy", "cpu", "", [](Profile& p) { p.scaled_mm_mat2_copy = true; },
     "aten/src/ATen/native/Blas.cpp _scaled_mm_out_cpu: mat_b.contiguous() (emulated) / mkldnn_scaled_mm's contiguous mat2 (2.13 CPU traces of torchao float8)"},
    {"scaled_mm_cpu_emulation", "cpu", "", [](Profile& p) { p.scaled_mm_cpu_emulation = true; },
     "aten/src/ATen/native/Blas.cpp _scaled_mm_out_cpu: mkldnn_scaled_mm for same-dtype fp8 on AMX-INT8 hosts, else _scaled_mm_out_cpu_emulated (fp32 upcasts; 2.13 CPU traces of torchao float8)"},
    {"onednn_rnn", "cpu", "2.13", [](Profile& p) { p.onednn_rnn = true; },
     "aten/src/ATen/native/RNN.cpp lstm (2.x): use_mkldnn and no projections -> native/mkldnn/RNN.cpp mkldnn_rnn_layer per layer and direction, oneDNN 3.x's LSTM primitive (1.13 runs the composite; CUDA cuDNN's _cudnn_rnn, not modelled)"},
    // --- PyTorch 1.13, every device ----------------------------------------------------------
    {"cublaslt_workspace_bytes", "", "1.13", [](Profile& p) { p.cublaslt_workspace_bytes = 0; },
     "not modelled for 1.13 (its gemm_and_bias workspace is not in the recordings memsim checks 1.13 against)"},
    {"mean_keeps_input", "", "1.13", [](Profile& p) { p.mean_keeps_input = true; },
     "tools/autograd/derivatives.yaml 1.13: mean.dim's backward reads self; 2.x saves self_sym_sizes only"},
    {"linear_nd_addmm", "", "1.13", [](Profile& p) { p.linear_nd_addmm = false; },
     "aten/src/ATen/native/Linear.cpp 1.13: ≥3-D input goes through matmul + in-place bias add"},
    {"accumulate_inplace", "", "1.13", [](Profile& p) { p.accumulate_inplace = false; },
     "torch/csrc/autograd/input_buffer.cpp v1.13.0: accumulate adds in place only into sparse grads; the dense path (can_accumulate_inplace) came with PR #88339, after 1.13 (1.13 CPU traces: every multi-consumer grad summed)"},
    {"checkpoint_early_stop", "", "1.13", [](Profile& p) { p.checkpoint_early_stop = false; },
     "torch/utils/checkpoint.py 1.13: no early stop, recomputed tensors kept until the region's backward ends (PRs #90105, #96866 came in 2.0/2.1)"},
    {"rms_norm_fused", "", "1.13", [](Profile& p) { p.rms_norm_fused = false; },
     "F.rms_norm came in 2.4 (a 1.13 model writes the composite itself)"},
    {"wrapped_number_skips_hooks", "", "1.13", [](Profile& p) { p.wrapped_number_skips_hooks = false; },
     "1.13 torch/csrc/autograd/saved_variable.cpp: saved-tensor hooks pack a wrapped number too (a 1.13 pack hook sees h * 2.0's float64 scalar, freed at once; 2.13's never sees it)"},
    {"alloc_conf_env", "", "1.13", [](Profile& p) { p.alloc_conf_env = "PYTORCH_CUDA_ALLOC_CONF"; },
     "c10/cuda/CUDAAllocatorConfig: 1.13 reads PYTORCH_CUDA_ALLOC_CONF only; 2.13's libc10 names PYTORCH_ALLOC_CONF too"},
    {"fused_sdpa", "", "1.13", [](Profile& p) { p.fused_sdpa = false; },
     "F.scaled_dot_product_attention and its fused kernels came in 2.0"},
    {"whole_slice_is_self", "", "1.13", [](Profile& p) { p.whole_slice_is_self = false; },
     "ATen/TensorIndexing.h applySlice 1.13 compared stop == length, which Python's ':' (stop INT64_MAX) never meets: a SliceBackward0 (1.13 and 2.13 pp traces)"},
    {"im2col_saves_self", "", "1.13", [](Profile& p) { p.im2col_saves_self = true; },
     "1.13 derivatives.yaml im2col: the formula's self.size(-2) kept `self` (grad_fn._saved_self under 1.13; 2.x saves self_sym_argsize_minus_1/2)"},
    {"upsample_channels_last_small", "", "1.13", [](Profile& p) { p.upsample_channels_last_small = false; },
     "1.13's UpSampleKernel.cpp has no small-output channels-last path (the 1.13 resample_cnn trace: no copies)"},
    {"bce_logits_log_sigmoid", "", "1.13", [](Profile& p) { p.bce_logits_log_sigmoid = false; },
     "aten/src/ATen/native/Loss.cpp 1.13 binary_cross_entropy_with_logits: max_val and exp/log temporaries (a 1.13 CPU trace)"},
    {"soft_margin_log1p", "", "1.13", [](Profile& p) { p.soft_margin_log1p = false; },
     "aten/src/ATen/native/Loss.cpp 1.13 soft_margin_loss_out: neg_out(output, input).mul_(target).exp_().add_(1.).log_() (2.x: .log1p_(); the 1.13 and 2.13 mlp soft_margin traces)"},
    {"prelu_kernel", "", "1.13", [](Profile& p) { p.prelu_kernel = false; },
     "aten/src/ATen/native/Activation.cpp 1.13: prelu / prelu_backward, the weight grad summed inside from an input-sized collector (the 1.13 act_mlp_a trace)"},
    {"trilinear_saves_all", "", "1.13", [](Profile& p) { p.trilinear_saves_all = true; },
     "tools/autograd/derivatives.yaml 1.13 _trilinear: `i1, i2, i3: _trilinear_backward(grad, i1, i2, i3, ...)` (2.x: wrap_opt_if(i1, grad_input_mask[1] || grad_input_mask[2]), ...)"},
    // --- PyTorch 1.13 on the CPU --------------------------------------------------------------
    {"conv_transpose_slow", "cpu", "1.13", [](Profile& p) { p.conv_transpose_slow = true; },
     "aten/src/ATen/native/Convolution.cpp 1.13 ConvParams::use_mkldnn: float CPU input only `!transposed`, so SlowTranspose2d/3d (NaiveConvolutionTranspose2d/3d.cpp; the 1.13 traces of dcgan_gen, deconv1d_net, unet3d)"},
    {"record_function_scratch", "cpu", "1.13", [](Profile& p) { p.record_function_scratch = true; },
     "torch/optim/optimizer.py 1.13: step() and zero_grad() in record_function, a 4-byte zeros and a 288-byte handle; gone in the 2.13 traces"},
};

bool Matches(std::string_view want, std::string_view have) { return want.empty() || want == have; }

}  // namespace

const std::vector<ProfileRow>& ProfileRows() { return kRows; }

std::optional<Profile> FindProfile(std::string_view device, std::string_view torch) {
  if (device != "cuda" && device != "cpu") return std::nullopt;
  bool known = false;
  for (std::string_view r : kTorchReleases) known = known || r == torch;
  if (!known) return std::nullopt;
  Profile p;
  p.name = std::string(device);
  p.torch = std::string(torch);
  for (const ProfileRow& row : kRows)
    if (Matches(row.device, device) && Matches(row.torch, torch)) row.set(p);
  return p;
}

std::optional<std::string> TorchReleaseFor(std::string_view version) {
  int major = 0;
  auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  if (ec != std::errc() || end == version.data() + version.size() || *end != '.') return std::nullopt;
  if (major == 1) return std::string("1.13");
  if (major == 2) return std::string("2.13");
  return std::nullopt;
}

bool ApplyCpuIsa(std::string_view isa, Profile* p) {
  if (isa != "avx2" && isa != "avx512" && isa != "amx") return false;
  p->bf16_conv_onednn = isa != "avx2";
  p->bf16_gemm_amx = isa == "amx" && p->torch != "1.13";
  return true;
}

}  // namespace memsim
