#include "lib/ops/conv_workspace.h"

#include <algorithm>

namespace memsim {
namespace {

// The algorithms cuDNN's heuristics pick for fp32 training, per GPU generation. Measured from
// the public recording in tests/data/gpu/ (torchvision resnet18, batch 8, late-2022 PyTorch,
// `python -m torch.cuda._memory_viz trace_plot`): every 3×3 stride-1 convolution allocates
// Cout·Cin·25·4 B (+ a per-channel vector) in forward and backward-data — the filter in 5×5
// Winograd tiles — and (N·Cin·T + N·Cout·T + Cout·Cin)·36·4 B in backward-filter, T the 4×4
// output tiles — the three transforms of non-fused Winograd F(4×4, 3×3) (e.g. layer4:
// 2·8·512·4·144 + 512·512·144 = 42,467,328 B, the 40.5 MiB block at the recorded peak). Strided
// and 1×1 convolutions allocate about their weight's bytes (implicit precomputed GEMM) in
// forward and backward-filter, none in backward-data. The recording does not name its GPU;
// generations without a recording of their own take the same algorithms (sources below).
constexpr ConvAlgoRow kRows[] = {
    {"ampere", 5, 4, "resnet18 alloc_data recording (late-2022 PyTorch); cuDNN 8 heuristics"},
    {"volta", 5, 4, "as ampere: same cuDNN 8 Winograd kernels for sm_70 (no recording of its own)"},
    {"turing", 5, 4, "as ampere: same cuDNN 8 Winograd kernels for sm_75 (no recording of its own)"},
    {"ada", 5, 4, "as ampere: sm_89 runs the sm_86 kernels (no recording of its own)"},
    {"hopper", 5, 4, "as ampere (no public recording; use --cudnn-workspace max for a bound)"},
};

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

bool AllOnes(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
}

int64_t WeightBytes(const ConvCall& c) {
  return c.out_channels * (c.in_channels / std::max<int64_t>(c.groups, 1)) * Product(c.kernel) * c.element_size;
}

bool WinogradEligible(const ConvCall& c) {
  return c.groups == 1 && c.kernel.size() == 2 && c.kernel[0] == 3 && c.kernel[1] == 3 && AllOnes(c.stride) &&
         AllOnes(c.dilation);
}

int64_t Typical(const ConvAlgoRow& row, const ConvCall& c, ConvPass pass) {
  const int64_t es = c.element_size, pairs = c.out_channels * c.in_channels;
  const bool wino = WinogradEligible(c);
  switch (pass) {
    case ConvPass::kForward:
      if (wino && row.winograd_fwd_tile > 0)
        return pairs * row.winograd_fwd_tile * row.winograd_fwd_tile * es + 2 * c.out_channels * es;
      return WeightBytes(c);
    case ConvPass::kBackwardData:
      if (wino && row.winograd_fwd_tile > 0)
        return pairs * row.winograd_fwd_tile * row.winograd_fwd_tile * es + c.in_channels * es;
      return 0;
    case ConvPass::kBackwardFilter: {
      const int64_t m = row.winograd_bwd_filter_out_tile;
      if (!wino || m <= 0) return WeightBytes(c);
      int64_t tiles = 1;
      for (int64_t o : c.out_spatial) tiles *= (o + m - 1) / m;
      return ((c.batch * c.in_channels + c.batch * c.out_channels) * tiles + pairs) * (m + 2) * (m + 2) * es;
    }
  }
  return 0;
}

/// FFT: input, grad/output and filter in the padded frequency domain (complex fp32; the last
/// dimension halved by the real-to-complex transform).
int64_t Fft(const ConvCall& c) {
  if (c.in_spatial.empty()) return 0;
  int64_t elems = 1;
  for (size_t i = 0; i < c.in_spatial.size(); ++i) {
    int64_t n = c.in_spatial[i] + (i < c.kernel.size() ? c.kernel[i] : 1) - 1;
    elems *= i + 1 == c.in_spatial.size() ? n / 2 + 1 : n;
  }
  const int64_t planes = c.batch * c.in_channels + c.batch * c.out_channels +
                         c.out_channels * (c.in_channels / std::max<int64_t>(c.groups, 1));
  return planes * elems * 8;
}

}  // namespace

std::optional<ConvWorkspacePolicy> ParseConvWorkspacePolicy(std::string_view s) {
  if (s == "none") return ConvWorkspacePolicy::kNone;
  if (s == "typical") return ConvWorkspacePolicy::kTypical;
  if (s == "max") return ConvWorkspacePolicy::kMax;
  return std::nullopt;
}

std::string_view ConvWorkspacePolicyName(ConvWorkspacePolicy p) {
  switch (p) {
    case ConvWorkspacePolicy::kNone: return "none";
    case ConvWorkspacePolicy::kFixed: return "fixed";
    case ConvWorkspacePolicy::kTypical: return "typical";
    case ConvWorkspacePolicy::kMax: return "max";
  }
  return "?";
}

const ConvAlgoRow& ConvAlgoFor(std::string_view arch) {
  for (const ConvAlgoRow& r : kRows)
    if (r.arch == arch) return r;
  return kRows[0];
}

std::string_view ConvAlgoArchs() { return "ampere, volta, turing, ada, hopper"; }

int64_t ConvWorkspaceBytes(ConvWorkspacePolicy policy, int64_t fixed_bytes, std::string_view arch,
                           const ConvCall& call, ConvPass pass) {
  switch (policy) {
    case ConvWorkspacePolicy::kNone: return 0;
    case ConvWorkspacePolicy::kFixed: return fixed_bytes;
    case ConvWorkspacePolicy::kTypical: return Typical(ConvAlgoFor(arch), call, pass);
    case ConvWorkspacePolicy::kMax: return std::max(Typical(ConvAlgoFor(arch), call, pass), Fft(call));
  }
  return 0;
}

}  // namespace memsim
