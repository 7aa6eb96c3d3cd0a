#include "sim/device.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

namespace memsim {

extern const std::string_view kCudaContextJson;  // generated from sim/data/cuda_context.json

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::vector<ContextRow> ParseTable() {
  std::vector<ContextRow> rows;
  const auto j = nlohmann::json::parse(kCudaContextJson);
  for (const auto& e : j.at("rows")) {
    ContextRow r;
    r.arch = e.at("arch").get<std::string>();
    r.torch = e.at("torch").get<std::string>();
    r.cuda = e.at("cuda").get<std::string>();
    r.module_loading = e.at("module_loading").get<std::string>();
    r.context_bytes = e.at("context_mib").get<int64_t>() * kMiB;
    r.cudnn_conv_bytes = e.at("cudnn_conv_mib").get<int64_t>() * kMiB;
    r.is_default = e.value("default", false);
    r.source = e.at("source").get<std::string>();
    rows.push_back(std::move(r));
  }
  return rows;
}

bool IsConvKind(OpKind k) { return k == OpKind::kConv1d || k == OpKind::kConv2d || k == OpKind::kConv3d; }

bool UsesCudnnConv(const Graph& g) {
  return std::any_of(g.ops.begin(), g.ops.end(),
                     [](const Op& op) { return IsConvKind(op.kind); });
}

int64_t Total(const ContextRow& r, bool cudnn) { return r.context_bytes + (cudnn ? r.cudnn_conv_bytes : 0); }

}  // namespace

const std::vector<ContextRow>& ContextTable() {
  static const std::vector<ContextRow> table = ParseTable();
  return table;
}

namespace {

Result<DeviceOverhead> EstimateContext(const Graph& g, const ContextOptions& d) {
  DeviceOverhead o;
  o.uses_cudnn_conv = UsesCudnnConv(g);
  if (d.context_bytes) {
    if (*d.context_bytes < 0) return Status::InvalidArgument("--context-bytes must be non-negative");
    o.bytes = o.low = o.high = *d.context_bytes;
    o.source = "--context-bytes";
    return o;
  }
  // The rows of the architecture give the range and its default row the point estimate; an
  // unknown GPU, or an architecture without rows, takes every row and the first default row.
  const auto& table = ContextTable();
  const bool known = std::any_of(table.begin(), table.end(), [&](const ContextRow& r) { return r.arch == d.arch; });
  const ContextRow* point = nullptr;
  bool first = true;
  for (const ContextRow& r : table) {
    if (known && r.arch != d.arch) continue;
    const int64_t t = Total(r, o.uses_cudnn_conv);
    o.low = first ? t : std::min(o.low, t);
    o.high = first ? t : std::max(o.high, t);
    first = false;
    if (r.is_default && !point) point = &r;
  }
  if (!point) return Status::Internal("sim/data/cuda_context.json: no default row");
  o.bytes = Total(*point, o.uses_cudnn_conv);
  o.source = std::string(known ? "" : "no data for this GPU, range over every row; ") + point->arch + ", PyTorch " + point->torch + ", CUDA " + point->cuda + ", " + point->module_loading +
             " module loading";
  return o;
}

}  // namespace

Result<DeviceOverhead> EstimateOverhead(const Graph& g, const ContextOptions& d, const ParallelOptions& parallel) {
  MEMSIM_ASSIGN_OR_RETURN(DeviceOverhead o, EstimateContext(g, d));
  o.nccl = EstimateNcclBuffers(CommunicatorsOf(parallel), d.arch);
  o.bytes += o.nccl.bytes;
  o.low += o.nccl.low;
  o.high += o.nccl.high;
  return o;
}

Result<CudnnWorkspaceChoice> ParseCudnnWorkspace(const std::string& s) {
  CudnnWorkspaceChoice c;
  if (auto p = ParseConvWorkspacePolicy(s)) {
    c.policy = *p;
    return c;
  }
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE)
    return Status::InvalidArgument("--cudnn-workspace \"" + s + "\": expected none, typical, max or a byte count");
  if (v < 0) return Status::InvalidArgument("--cudnn-workspace " + s + ": bytes must be non-negative");
  c.policy = ConvWorkspacePolicy::kFixed;
  c.bytes = v;
  return c;
}

}  // namespace memsim
