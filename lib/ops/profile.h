// Device profiles: the named, version-specific rules that make memsim follow PyTorch on a given
// device (`cuda`, `cpu`) and release (`--torch 1.13|2.13`). Every difference is a field here, set
// by a row of the profile table (profile.cc: device rows, then release rows, each citing the
// PyTorch source; Note [Version profiles] in docs/op-rules.md), never a special case buried in an
// op rule.
#ifndef MEMSIM_LIB_OPS_PROFILE_H_
#define MEMSIM_LIB_OPS_PROFILE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ops/autocast_lists.h"
#include "lib/ops/conv_workspace.h"
#include "lib/ops/onednn_amx_matmul.h"

namespace memsim {

/// One rank of context parallelism's ring (Note [Context parallel] in docs/parallel.md): the
/// scaled_dot_product_attention ops run as ring attention when world > 1.
struct ContextParallelRank {
  int world = 1;              ///< cp ranks
  int rank = 0;               ///< this rank's cp coordinate
  bool load_balance = false;  ///< head-tail sharding (2·world divides the whole sequence)
};

struct Profile {
  std::string name;          ///< the device: "cuda" or "cpu"
  std::string torch = "2.13";  ///< the PyTorch release whose rules apply: "1.13" or "2.13"
  bool cuda = true;
  /// Dropout in training keeps an input-dtype noise tensor (CPU `_dropout`: bernoulli / (1-p),
  /// then mul) instead of a 1-byte bool mask (CUDA `native_dropout`).
  bool dropout_keeps_noise = false;
  /// CUDA's embedding_dense_backward sorts more than 3072 ids and sums them per segment in fp32
  /// partials (Note [CUDA embedding backward]); the CPU kernel writes the zeros grad alone.
  bool embedding_backward_segments = true;
  /// A pipeline schedule's p2p send Works hold the tensors they send until the schedule waits on
  /// them (gloo's SendWork); NCCL's coalesced send Work releases them once the send completes
  /// (Note [Pipeline sends on CUDA] in docs/parallel.md).
  bool p2p_send_work_holds_tensor = false;
  /// 1.13: the backward of mean (and of adaptive_avg_pool2d to 1×1, which is a mean) keeps its
  /// input alive; 2.x saves only sizes.
  bool mean_keeps_input = false;
  /// 2.x: linear on a ≥3-D contiguous input with bias is flattened to addmm; 1.13 uses matmul
  /// (mm on the folded input) and an in-place bias add. Same saved tensors either way.
  bool linear_nd_addmm = true;
  /// Optimizers use the multi-tensor (`foreach`) implementation: parameter-sized temporary lists.
  bool optimizer_foreach = true;
  /// bitsandbytes' optimizer updates (Note [bitsandbytes optimizers]): on CUDA one fused kernel
  /// per parameter updates the states in place; the CPU backend (backends/cpu/ops.py) runs
  /// PyTorch ops: fp32 dequantized states, an fp32 grad, a denominator, re-quantized outputs.
  bool bnb_update_temporaries = false;
  /// Paged bitsandbytes states of parameters with at least 1e5 elements live in CUDA unified
  /// memory (cudaMallocManaged), outside the caching allocator; a CPU has no paging.
  bool bnb_paged_managed = true;
  /// Optimizers use the fused kernels (`fused=True`: Adam, AdamW, SGD): no temporaries at all.
  /// Off by default on both profiles (PyTorch's default); `--foreach fused` sets it.
  bool optimizer_fused = false;
  /// Non-reentrant checkpoint (2.x, torch/utils/checkpoint.py): recomputation stops as soon as
  /// the last tensor the backward needs is recomputed (set_checkpoint_early_stop, default on),
  /// and each recomputed tensor is cleared when the backward unpacks it. 1.13 recomputes the
  /// whole region and keeps its recomputed tensors until the region's backward ends.
  bool checkpoint_early_stop = true;
  /// 2.x: F.scaled_dot_product_attention dispatches to a fused kernel when its gates hold
  /// (lib/ops/sdpa_backend.h); 1.13 has no fused attention (an sdpa op runs its math form).
  bool fused_sdpa = true;
  /// F.rms_norm runs the fused `_fused_rms_norm` kernel (CUDA, 2.x) rather than its composite of
  /// pow, mean, rsqrt and two muls, each with its autograd node (the CPU; Note [rms_norm]).
  bool rms_norm_fused = true;
  /// The environment variable the caching allocator reads its options from: PYTORCH_ALLOC_CONF
  /// in 2.x releases that know it (2.13's libc10 reads it, and the old name as an alias);
  /// PYTORCH_CUDA_ALLOC_CONF in 1.13.
  std::string alloc_conf_env = "PYTORCH_ALLOC_CONF";
  /// CPU (1.13): optimizer.step() and zero_grad() run inside record_function, which allocates a
  /// 4-byte zeros tensor and a 288-byte profiler handle, both freed at once.
  bool record_function_scratch = false;
  /// Multi-consumer grads: 2.x adds the new grad in place into the InputBuffer's first when that
  /// is a dense tensor, no view, referenced by nobody else (can_accumulate_inplace); 1.13 always
  /// sums out of place into a new buffer (Note [InputBuffer]).
  bool accumulate_inplace = true;
  /// A TorchDispatchMode is active during the step (--dispatch-mode on: a profiler-like mode,
  /// a logging mode, the recording kit's --marks / --check-spy): isTensorSubclassLike holds for
  /// every tensor, so InputBuffer always sums out of place (Note [InputBuffer]).
  bool dispatch_mode = false;
  /// CPU oneDNN (mkldnn) convolution with AVX2 8-channel blocking: blocked copies of the input,
  /// weight and output in forward, and of grads in backward (docs/research/cpu-1.13-rules.md §2.3).
  bool onednn_conv_reorders = false;
  /// CPU (1.13), the machine's ISA (--cpu-isa): PyTorch runs bf16 convolutions and GEMMs through
  /// oneDNN only when mkldnn_bf16_device_check() holds (`avx512`: AVX-512 BW, VL, DQ, and
  /// AVX512_BF16 for the avx512_core_bf16 kernels and their scratchpads, Note [oneDNN bf16
  /// scratchpads]); otherwise (`avx2`) bf16 convolutions run ATen's slow_conv2d, whose im2col
  /// column buffer is allocated around each call (Note [bf16 convolutions on CPU]), and GEMMs stay
  /// in ATen. Only read with onednn_conv_reorders.
  bool bf16_conv_onednn = false;
  /// CPU, 1.13: transposed convolutions run ATen's slow_conv_transpose2d/3d (a column buffer per
  /// call, grouped ones group by group on input copies); 2.x runs oneDNN's deconvolution (Note
  /// [Transposed convolution]). Only read with onednn_conv_reorders.
  bool conv_transpose_slow = false;
  /// The per-core L2 size oneDNN 2.6 believes (its blocking heuristics read it; Note [oneDNN bf16
  /// scratchpads]): xbyak reads no cache levels on AMD CPUs, and oneDNN then assumes 512 KiB.
  int64_t onednn_l2_bytes = int64_t{512} << 10;
  /// CPU 2.x on a host with AMX-BF16 (--cpu-isa amx): oneDNN 3.x runs bf16 GEMMs with its AMX
  /// brgemm matmul, whose scratchpad replaces the avx512_core_bf16 one (Note [oneDNN AMX matmul
  /// scratchpads]); convolutions keep the avx512 model. Only read with bf16_conv_onednn.
  bool bf16_gemm_amx = false;
  /// The AMX host's caches as oneDNN 3.x reads them (cpuid leaf 4; its matmul blocking depends
  /// on them): the recording machine, a Sapphire Rapids guest (48 KiB L1d; 2 MiB L2, 16 ways,
  /// 2,048 sets).
  OneDnnCaches onednn_caches;
  /// CPU 2.x: nn.LSTM (no projections, float32) runs oneDNN 3.x's LSTM primitive through
  /// `mkldnn_rnn_layer`, one op per layer and direction whose workspace, scratchpad and weight
  /// reorders lib/ops/onednn_rnn.h sizes (Note [oneDNN LSTM]). Off: the op has no model (1.13 runs
  /// ATen's composite, which the exporter expands; CUDA runs cuDNN).
  bool onednn_rnn = false;
  /// CPU native_batch_norm: per-channel temporaries in forward, and a backward that allocates
  /// grad_input twice (the first is discarded).
  bool batch_norm_cpu_kernels = false;
  /// CPU layer_norm backward: a 2·normalized_size fp32 scratch buffer.
  bool layer_norm_backward_scratch = false;
  /// mm/bmm backward computes the grad of mat2 before the grad of self (generated code order).
  bool mm_grad_mat2_first = true;
  /// cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG, default :4096:2:16:8 = 8,519,680 B; 32 MiB on
  /// compute capability 9.0+): allocated through the caching allocator inside the first GEMM,
  /// after its output, and never freed. 0 = none (CPU).
  int64_t cublas_workspace_bytes = 8519680;
  /// cuBLASLt workspace: cuBLASLt GEMMs (addmm / linear with a 1-D bias, `gemm_and_bias`) take a
  /// workspace of their own (CUDABlas.cpp getCUDABlasLtWorkspace: CUBLASLT_WORKSPACE_SIZE, 1 MiB
  /// by default), allocated through the caching allocator at the thread's first such GEMM, right
  /// after the cuBLAS one, and kept (H100 snapshots, 2.11). 0 = none (CPU; 1.13 not modelled).
  int64_t cublaslt_workspace_bytes = 1048576;
  /// cuDNN convolution workspace around each call (forward, backward-data, backward-filter):
  /// the policy (lib/ops/conv_workspace.h, --cudnn-workspace), its bytes for kFixed, and the GPU
  /// generation whose algorithm choice `typical` follows (--gpu). CPU: none.
  ConvWorkspacePolicy conv_workspace_policy = ConvWorkspacePolicy::kTypical;
  int64_t conv_workspace_bytes = 0;
  /// torch.utils.checkpoint(preserve_rng_state=True) keeps torch.get_rng_state() — the CPU
  /// generator's state, a 5,056-byte uint8 tensor — per checkpointed call, and saves it again
  /// around each recomputation (fork_rng). On CUDA it lives in host memory: 0 device bytes.
  int64_t checkpoint_rng_state_bytes = 0;
  /// index_backward's index_put_(accumulate=True): CUDA sorts the indices (a linear index and
  /// the sorted and original positions, int64 each: 3 transient buffers); the CPU kernel of
  /// 1.13 accumulates in place without sorting (0).
  int index_put_sort_buffers = 3;
  /// A Python number operand of add/sub/mul/div (`x / math.sqrt(d)`, `att * scale`) runs the
  /// Tensor overload with an 8-byte wrapped-number tensor; MulBackward/DivBackward keep it. On
  /// CUDA that tensor stays on the host (0 device bytes); on CPU it is one more allocation.
  int64_t scalar_operand_bytes = 0;
  /// The wrapped number is the Tensor overload's `other`, kept by MulBackward0 / DivBackward0
  /// when the tensor operand requires grad (1.13 and 2.13: `(h * 2.0).grad_fn._saved_other` is a
  /// 0-dim float64 tensor).
  bool scalar_operand_saved = true;
  /// 2.13 CPU: the kernel also makes a copy of the scalar in the op's dtype, allocated after the
  /// wrapped number and freed once the output is (2.13 traces of `h * 2.0`, `h + 1.0`, LoRA's
  /// `* scaling`: 8 B wrapped, 4 B copy, output, copy freed).
  bool scalar_operand_cast = false;
  /// 2.x: SavedVariable keeps a wrapped number itself, never through saved-tensor hooks (a 2.13
  /// pack hook never sees `h * 2.0`'s), so a node inside a non-reentrant checkpoint keeps it;
  /// 1.13's hooks packed it like any tensor (a 1.13 pack hook sees the float64 scalar).
  bool wrapped_number_skips_hooks = true;
  /// ZeRO's partition of the optimizer state (Note [ZeRO]): on the 1.13 CPU profile ZeRO-1 is
  /// torch.distributed.optim.ZeroRedundancyOptimizer under DDP (whole parameters, assigned
  /// greedily by size); on CUDA it is DeepSpeed (flat partitions of the flattened parameters).
  bool zero_whole_parameters = false;
  /// The device is the host, its process group gloo: gloo's staging copies of a collective
  /// (allgather's flat output, reduce_scatter_tensor's input) and DeviceMesh's CPU rank tensors
  /// are traced (Note [FSDP2]); NCCL collectives on a GPU allocate none through PyTorch.
  bool host_collectives = false;
  std::string gpu_arch = "ampere";
  /// The device's multiProcessorCount and maxThreadsPerMultiProcessor (--gpu; an A100 without
  /// one): a CUDA reduction splits its input across thread blocks by them, and the global-memory
  /// staging it then allocates depends on them (lib/ops/cuda_reduce.h).
  int64_t gpu_sm_count = 108;
  int64_t gpu_max_threads_per_sm = 2048;
  /// --sdpa-backend: the backend every scaled_dot_product_attention op runs on (as
  /// torch.nn.attention.sdpa_kernel(backend) forces it); "" = PyTorch's choice (Note [SDPA backends]).
  std::string sdpa_backend;
  /// torch.backends.cudnn.benchmark in the first step: before each convolution call cuDNN tries
  /// every algorithm once, in one trial workspace as large as the largest requirement (the `max`
  /// policy's bound), allocated and freed before the chosen algorithm's workspace. memsim puts a
  /// trial before every call; repeated shapes reuse the cached trial block, so reserved memory
  /// grows as with PyTorch's once-per-shape cache.
  bool cudnn_benchmark_trials = false;
  /// torch.get_num_threads() on the CPU: kernels with per-thread scratch (the CPU flash
  /// attention) allocate one buffer per thread. The oracle traces run one thread.
  int64_t cpu_threads = 1;
  /// --mesh cp=N: this rank of the ring (set per rank by the pipeline, not a profile row). On the
  /// cpu profile it is the oracle kit's shim: the CUDA flash op on the CPU flash kernel.
  ContextParallelRank cp;
  /// Max-pool indices are int64 on both devices; kept as a rule for future backends.
  int64_t maxpool_index_bytes = 8;
  /// torch.autocast's op lists (lib/ops/autocast_lists.h): PyTorch 2.x CUDA or 1.13 CPU.
  AutocastTable autocast_table = AutocastTable::kCuda2x;
  /// A binary op on two floating dtypes (an fp32 residual plus a bf16 branch under autocast):
  /// the CPU TensorIterator copies the narrower input to the common dtype first (a temporary,
  /// allocated before the output); CUDA kernels cast while they load (Note [Autocast]).
  bool mixed_dtype_input_copies = false;
  /// log_sigmoid_forward's second output, the `buffer` LogSigmoidBackward0 keeps: input-sized on
  /// the CPU (its kernel stores exp(-|x|) terms there), an empty tensor on CUDA.
  bool log_sigmoid_buffer = false;
  /// 2.x: F.prelu runs _prelu_kernel, whose backward returns the weight's grad at the input's
  /// shape (the engine sums it to the weight's); 1.13's prelu_backward sums it inside (an
  /// input-sized collector, freed in the node).
  bool prelu_kernel = true;
  /// 2.x derivatives.yaml `_trilinear` (bilinear) keeps each of i1, i2, i3 only if another input's
  /// grad needs it (wrap_opt_if); 1.13 keeps all three (Note [Bilinear]).
  bool trilinear_saves_all = false;
  /// CPU 2.x: upsample_nearest2d / upsample_bilinear2d of a contiguous input with C > 1 and an
  /// output with H + W <= 128 run the channels-last kernel (an input copy and an output scratch,
  /// Note [Padding and resampling]).
  bool upsample_channels_last_small = false;
  /// CPU: every other upsample runs upsample_generic_Nd_kernel_impl, which makes interp_size
  /// int64 index and weight tensors per spatial dim after the output (Note [Upsample index
  /// buffers]); CUDA's kernels compute them inline.
  bool upsample_index_buffers = false;
  /// histc: the CPU's bin-edges tensor and per-thread histograms around the output (Note [MoE
  /// routing ops]); CUDA's kernel writes the output alone.
  bool histc_cpu_buffers = false;
  /// masked_select counts the mask with a sum whose bool input the CPU reduction first copies to
  /// int64 (Note [Writes into views], masked_scatter's backward).
  bool masked_select_count_copy = false;
  /// 2.x: binary_cross_entropy_with_logits's forward goes through log_sigmoid; 1.13 spells out
  /// the log-sum-exp with max_val and three more input-sized temporaries.
  bool bce_logits_log_sigmoid = true;
  /// 2.x: soft_margin_loss's forward ends `exp_().log1p_()`; 1.13's `exp_().add_(1.).log_()`
  /// runs add_ with a wrapped number (Note [Soft margin loss]).
  bool soft_margin_log1p = true;
  /// 2.x: `x[:, ...]` over a whole dim at step 1 returns `self` (no SliceBackward0, the grad
  /// passes through); 1.13 records a SliceBackward0 and its zero-filled grad (Note [Whole slices]).
  bool whole_slice_is_self = true;
  /// 2.x's Im2ColBackward0 (F.unfold) keeps sizes only; 1.13's keeps `self` (Note [Unfold and fold]).
  bool im2col_saves_self = false;
  /// torch._scaled_mm (torchao float8 linears, Note [FP8 training]): the CPU kernels copy a
  /// column-major mat2 to a contiguous fp8 buffer (mkldnn_scaled_mm, and the emulated kernel's
  /// mat_b.contiguous()); cuBLASLt reads it column-major as it is.
  bool scaled_mm_mat2_copy = false;
  /// The CPU's _scaled_mm with row-wise scales or mixed fp8 dtypes (e5m2 × e4m3) is emulated
  /// (aten/src/ATen/native/Blas.cpp _scaled_mm_out_cpu_emulated): both operands upcast to fp32
  /// and scaled (two operand-sized fp32 buffers each, one freed at once), an fp32 matmul result
  /// and its cast to the output dtype. Tensor-wise e4m3 × e4m3 goes to mkldnn_scaled_mm (a host
  /// with AMX-INT8, as the recording machine; mixed dtypes would need AMX-FP16).
  bool scaled_mm_cpu_emulation = false;
};

/// The PyTorch releases memsim has rules for, oldest first; the last is the default.
inline constexpr std::string_view kTorchReleases[] = {"1.13", "2.13"};
inline constexpr std::string_view kDefaultTorch = "2.13";

/// The profile of |device| ("cuda" or "cpu") under PyTorch |torch| ("1.13" or "2.13"); nullopt
/// for an unknown device or release.
std::optional<Profile> FindProfile(std::string_view device, std::string_view torch = kDefaultTorch);

/// The release memsim's rules follow for a `torch.__version__` ("2.11.0+cu128" -> "2.13", the
/// nearest release not older that has rules; "1.13.1" -> "1.13"); nullopt for one it cannot read.
std::optional<std::string> TorchReleaseFor(std::string_view version);

/// One row of the profile table: where a field differs from the cuda / 2.13 defaults.
struct ProfileRow {
  std::string_view field;   ///< the Profile field it sets
  std::string_view device;  ///< "cpu" or "cuda"; empty: both
  std::string_view torch;   ///< "1.13" or "2.13"; empty: both
  void (*set)(Profile&);
  std::string_view source;  ///< the PyTorch source (or trace) that decides it
};
/// Every row, device rows first (docs/op-rules.md prints them; tests check each).
const std::vector<ProfileRow>& ProfileRows();
/// --cpu-isa avx2|avx512|amx on the cpu profile: sets Profile::bf16_conv_onednn and
/// bf16_gemm_amx (AMX only where oneDNN 3.x runs: not the 1.13 profile, whose oneDNN 2.6 takes
/// the avx512_core_bf16 kernels on an AMX host). False for an unknown ISA.
bool ApplyCpuIsa(std::string_view isa, Profile* p);

}  // namespace memsim

#endif  // MEMSIM_LIB_OPS_PROFILE_H_
