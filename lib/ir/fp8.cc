#include "lib/ir/fp8.h"

#include <fnmatch.h>

#include <sstream>

namespace memsim {
namespace {

Status SpecError(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("--fp8 \"" + spec + "\": " + why +
                                 " (expected tensorwise|rowwise[,fsdp_float8_all_gather][,targets=GLOB[,GLOB...]] or "
                                 "te[,amax_history=N][,targets=...])");
}

/// The Linear's (out, in) features when both are known constants.
bool ConstFeatures(const Tensor& w, int64_t* out, int64_t* in) {
  if (w.shape.size() != 2 || !w.shape[0].is_const() || !w.shape[1].is_const()) return false;
  *out = w.shape[0].coeff;
  *in = w.shape[1].coeff;
  return true;
}

/// Appends a buffer (a tensor that exists before the step and is kept) to |out|.
void AddBuffer(Graph* out, std::string name, Dtype dtype, SymShape shape, const std::string& pointer) {
  Tensor t;
  t.name = std::move(name);
  t.role = TensorRole::kBuffer;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.pointer = pointer;
  out->tensors.push_back(std::move(t));
  out->buffers.push_back(static_cast<TensorId>(out->tensors.size() - 1));
}

/// Note [Transformer Engine]: a converted module's persistent state, as buffers of |out| (made
/// by te.Linear's first forward and kept: the float8 weight and its transpose, refreshed in place
/// on each first microbatch; fp8_meta's fp32 amax histories and scales, forward for input, weight
/// and output, backward for the two grads).
void AddTeModuleState(const Graph& g, const Op& op, int64_t history, Graph* out) {
  auto add = [&](const char* suffix, Dtype dtype, SymShape shape) {
    AddBuffer(out, op.module + suffix, dtype, std::move(shape), op.pointer);
  };
  const SymShape& w = g.tensors[op.inputs[1]].shape;
  add(".weight_fp8", Dtype::kUInt8, w);
  add(".weight_t_fp8", Dtype::kUInt8, {w[1], w[0]});
  add(".fp8_meta.scaling_fwd.amax_history", Dtype::kFloat32, {DimExpr::Const(history), DimExpr::Const(3)});
  add(".fp8_meta.scaling_bwd.amax_history", Dtype::kFloat32, {DimExpr::Const(history), DimExpr::Const(2)});
  add(".fp8_meta.scales", Dtype::kFloat32, {DimExpr::Const(10)});  // scale and scale_inv: 3 forward, 2 backward
}

/// TE's get_workspace(): one uint8 cuBLAS workspace for every module, 32 MiB on Hopper
/// (get_cublas_workspace_size_bytes; 4 MiB before sm90), kept for the process.
void AddTeWorkspace(Graph* out) {
  AddBuffer(out, "transformer_engine.cublas_workspace", Dtype::kUInt8, {DimExpr::Const(int64_t{32} << 20)}, "");
}

}  // namespace

std::string Fp8Config::ToString() const {
  std::string s = recipe + (fsdp_float8_all_gather ? ",fsdp_float8_all_gather" : "");
  if (recipe == "te" && amax_history != 1024) s += ",amax_history=" + std::to_string(amax_history);
  for (size_t i = 0; i < targets.size(); ++i) s += (i ? "," : ",targets=") + targets[i];
  return s;
}

Result<Fp8Config> ParseFp8Spec(const std::string& spec) {
  Fp8Config c;
  std::stringstream in(spec);
  bool first = true, in_targets = false;
  for (std::string w; std::getline(in, w, ',');) {
    if (first) {
      if (w != "tensorwise" && w != "rowwise" && w != "te")
        return SpecError(spec, "recipe \"" + w + "\" is not tensorwise, rowwise or te");
      c.recipe = w;
      first = false;
    } else if (w == "fsdp_float8_all_gather") {
      c.fsdp_float8_all_gather = true;
    } else if (w.rfind("amax_history=", 0) == 0 && c.recipe == "te") {
      const std::string v = w.substr(13);
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < 1)
        return SpecError(spec, "amax_history \"" + v + "\": expected a positive row count (DelayedScaling's amax_history_len)");
      c.amax_history = std::stoll(v);
      in_targets = false;
    } else if (w.rfind("targets=", 0) == 0) {
      in_targets = true;
      if (w.size() > 8) c.targets.push_back(w.substr(8));
    } else if (in_targets && w.find('=') == std::string::npos && !w.empty()) {
      c.targets.push_back(w);
    } else {
      return SpecError(spec, "unknown part \"" + w + "\"");
    }
  }
  if (first) return SpecError(spec, "the recipe is missing");
  if (c.fsdp_float8_all_gather && c.recipe == "te")
    return SpecError(spec, "fsdp_float8_all_gather is torchao's; Transformer Engine's te.Linear has no FSDP2 float8 all-gather");
  if (c.fsdp_float8_all_gather && c.recipe != "tensorwise")
    return SpecError(spec, "fsdp_float8_all_gather needs tensorwise scaling (torchao's Float8LinearConfig refuses " + c.recipe + ")");
  return c;
}

Result<Graph> ApplyFp8(const Graph& g, const Fp8Config& c) {
  Graph out = g;
  out.ops.clear();
  size_t converted = 0;
  for (const Op& op : g.ops) {
    const bool linear = op.kind == OpKind::kLinear && op.inputs.size() >= 2 &&
                        g.tensors[op.inputs[1]].role == TensorRole::kParameter;
    bool hit = false;
    int64_t n = 0, k = 0;
    if (linear) {
      const bool fits = ConstFeatures(g.tensors[op.inputs[1]], &n, &k) && n % 16 == 0 && k % 16 == 0;
      if (c.targets.empty()) {
        hit = fits;
      } else {
        for (const std::string& t : c.targets) hit = hit || fnmatch(t.c_str(), op.module.c_str(), 0) == 0;
        if (hit && !fits)
          return Status::InvalidArgument("--fp8 targets: " + op.module + " has features not multiples of 16 (" +
                                         std::to_string(k) + " -> " + std::to_string(n) +
                                         "), which torch._scaled_mm refuses; narrow targets");
      }
    }
    if (!hit) {
      out.ops.push_back(op);
      continue;
    }
    ++converted;
    Op mm = op;
    mm.kind = OpKind::kFp8Linear;
    mm.attrs = Attrs();
    mm.attrs.Set("recipe", c.recipe);
    if (c.fsdp_float8_all_gather) mm.attrs.Set("weight", std::string("float8"));
    if (c.recipe == "te") AddTeModuleState(g, op, c.amax_history, &out);
    if (op.inputs.size() < 3) {
      out.ops.push_back(std::move(mm));
      continue;
    }
    // Float8Linear.forward: output = matmul(...); output = output + self.bias.to(output.dtype)
    Tensor t;
    t.name = g.tensors[op.outputs[0]].name + ".fp8_mm";
    t.role = TensorRole::kActivation;
    t.dtype = g.tensors[op.outputs[0]].dtype;
    t.pointer = op.pointer;
    out.tensors.push_back(std::move(t));
    const TensorId mid = static_cast<TensorId>(out.tensors.size() - 1);
    mm.inputs = {op.inputs[0], op.inputs[1]};
    mm.outputs = {mid};
    mm.name = out.tensors[mid].name;
    mm.keep_alive.clear();
    out.ops.push_back(std::move(mm));
    // self.bias.to(output.dtype): the bias itself, or a copy where autocast made the output bf16
    Tensor bt;
    bt.name = g.tensors[op.inputs[2]].name + ".to_output_dtype";
    bt.role = TensorRole::kActivation;
    bt.dtype = g.tensors[op.inputs[2]].dtype;
    bt.pointer = op.pointer;
    out.tensors.push_back(std::move(bt));
    const TensorId bias = static_cast<TensorId>(out.tensors.size() - 1);
    Op cast;
    cast.kind = OpKind::kToDtype;
    cast.module = op.module;
    cast.inputs = {op.inputs[2], mid};
    cast.outputs = {bias};
    cast.name = out.tensors[bias].name;
    cast.pointer = op.pointer;
    out.ops.push_back(std::move(cast));
    Op add;
    add.kind = OpKind::kAdd;
    add.module = op.module;
    add.inputs = {mid, bias};
    add.outputs = op.outputs;
    add.name = op.name;
    add.pointer = op.pointer;
    add.keep_alive = op.keep_alive;
    add.attrs.Set("inplace", false);
    out.ops.push_back(std::move(add));
  }
  if (converted == 0)
    return Status::InvalidArgument("--fp8: no Linear of " + g.name + " is selected" +
                                   (c.targets.empty() ? " (none has in and out features that are multiples of 16)"
                                                      : " by targets"));
  if (c.recipe == "te") AddTeWorkspace(&out);
  out.fp8 = c.ToString();
  out.fp8_linears = converted;
  out.RelinkProducers();
  return out;
}

}  // namespace memsim
