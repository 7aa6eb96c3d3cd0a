// A torch.compile region (Note [Compiled regions] in docs/op-rules.md): one autograd node
// (AOTAutograd's CompiledFunction) whose forward and backward replay the buffer programs of
// Inductor's generated wrappers, as the exporter read them (tools/memsim_export/compiled.py).
// Attributes: fwd_bytes / bwd_bytes (bytes of each buffer), fwd_program / bwd_program (tokens:
// A<k> allocates buffer k, F<k> frees it; in the backward R<k> drops saved tensor k's last name
// and G the incoming grad's), fwd_outputs (the buffer of each output), saved (the partitioner's
// saved set in the order the backward takes it: i<k> input k, o<k> output k, b<k> forward buffer
// k), bwd_grads (the backward buffer returned as each input's grad, -1: none), input_bytes (the
// sizes the region was compiled for), out<j>_shape / out<j>_dtype, fwd_names / bwd_names,
// grad<i>_strides (input i's grad is not row-major).
#include <algorithm>
#include <charconv>
#include <sstream>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

struct Token {
  char kind;
  int index;  ///< -1 for G
};

/// The tokens of a program attribute ("A0 A1 F0 R2 G"); malformed tokens are skipped (Infer
/// refuses them first).
std::vector<Token> Tokens(const Op& op, std::string_view key) {
  std::vector<Token> out;
  std::istringstream in(op.attrs.GetString(key, ""));
  std::string w;
  while (in >> w) {
    Token t{w[0], -1};
    if (w.size() > 1) {
      auto [p, ec] = std::from_chars(w.data() + 1, w.data() + w.size(), t.index);
      if (ec != std::errc() || p != w.data() + w.size()) continue;
    }
    out.push_back(t);
  }
  return out;
}

/// The label of buffer |k| (its first name in the wrapper), a view of the graph's attribute.
std::string_view BufferName(const Op& op, std::string_view key, int k) {
  const AttrValue* v = op.attrs.Find(key);
  if (!v || !std::holds_alternative<std::string>(*v)) return "buffer";
  std::string_view s = std::get<std::string>(*v);
  for (int i = 0; i < k; ++i) {
    size_t sp = s.find(' ');
    if (sp == std::string_view::npos) return "buffer";
    s.remove_prefix(sp + 1);
  }
  return s.substr(0, s.find(' '));
}

Status CheckProgram(const RuleCtx& c, std::string_view key, const std::string& kinds, size_t buffers, size_t saved) {
  std::istringstream in(c.op.attrs.GetString(std::string(key), ""));
  std::string w;
  while (in >> w) {
    const bool bare = w == "G" && kinds.find('G') != std::string::npos;
    int k = -1;
    if (!bare) {
      auto [p, ec] = std::from_chars(w.data() + 1, w.data() + w.size(), k);
      if (w.size() < 2 || kinds.find(w[0]) == std::string::npos || ec != std::errc() || p != w.data() + w.size() ||
          k < 0 || static_cast<size_t>(k) >= (w[0] == 'R' ? saved : buffers))
        return RuleError(c, "attribute " + std::string(key) + ": bad token \"" + w + "\" (re-export with --compile)");
    }
  }
  return Status::OK();
}

Status InferCompiled(const RuleCtx& c, InferOut* o) {
  const Op& op = c.op;
  auto in_bytes = op.attrs.GetInts("input_bytes", c.bindings);
  if (!in_bytes || in_bytes->size() != c.in.size())
    return RuleError(c, "attribute input_bytes must list one size per input (re-export with --compile)");
  for (size_t i = 0; i < c.in.size(); ++i)
    if (Bytes(*c.in[i]) != (*in_bytes)[i])
      return RuleError(c, "the compiled region was exported for other sizes (input " + std::to_string(i) + ": " +
                              std::to_string((*in_bytes)[i]) + " bytes at export, " + std::to_string(Bytes(*c.in[i])) +
                              " here): re-export with --compile at these sizes (--set batch=N)");
  auto fwd = op.attrs.GetInts("fwd_bytes", c.bindings);
  auto bwd = op.attrs.GetInts("bwd_bytes", c.bindings);
  auto outs = op.attrs.GetInts("fwd_outputs", c.bindings);
  auto grads = op.attrs.GetInts("bwd_grads", c.bindings);
  if (!fwd || !bwd || !outs || !grads || grads->size() != c.in.size())
    return RuleError(c, "a compiled region needs fwd_bytes, bwd_bytes, fwd_outputs and bwd_grads (one per input)");
  const size_t saved = Tokens(op, "saved").size();
  MEMSIM_RETURN_IF_ERROR(CheckProgram(c, "fwd_program", "AF", fwd->size(), 0));
  MEMSIM_RETURN_IF_ERROR(CheckProgram(c, "bwd_program", "AFRG", bwd->size(), saved));
  MEMSIM_RETURN_IF_ERROR(CheckProgram(c, "saved", "iob", std::max({fwd->size(), c.in.size(), outs->size()}), 0));
  for (size_t j = 0; j < outs->size(); ++j) {
    auto shape = op.attrs.GetInts("out" + std::to_string(j) + "_shape", c.bindings);
    auto dtype = ParseDtype(op.attrs.GetString("out" + std::to_string(j) + "_dtype", ""));
    if (!shape || !dtype || (*outs)[j] < 0 || static_cast<size_t>((*outs)[j]) >= fwd->size())
      return RuleError(c, "output " + std::to_string(j) + " needs out" + std::to_string(j) + "_shape, _dtype and a buffer");
    o->Fresh(TensorMeta::Contiguous(*dtype, *shape));
  }
  return Status::OK();
}

void FwdCompiled(const RuleCtx& c, FwdPlan* p) {
  const Op& op = c.op;
  const auto bytes = *op.attrs.GetInts("fwd_bytes", c.bindings);
  const auto outs = *op.attrs.GetInts("fwd_outputs", c.bindings);
  std::vector<int> extra(bytes.size(), -1), output(bytes.size(), -1);
  for (size_t j = 0; j < outs.size(); ++j) output[outs[j]] = static_cast<int>(j);
  for (const Token& t : Tokens(op, "fwd_program")) {
    if (t.kind == 'A' && output[t.index] >= 0) {
      p->AllocOutput(output[t.index], bytes[t.index]);
    } else if (t.kind == 'A') {
      extra[t.index] = p->AddExtra(bytes[t.index], BufferName(op, "fwd_names", t.index));
    } else if (t.kind == 'F' && extra[t.index] >= 0) {
      p->FreeExtra(extra[t.index]);
    }
  }
  for (const Token& t : Tokens(op, "saved")) {
    if (t.kind == 'i') p->Save(SavedRef::kInput, t.index);
    if (t.kind == 'o') p->Save(SavedRef::kOutput, t.index);
    if (t.kind == 'b') p->Save(SavedRef::kExtra, extra[t.index]);
  }
}

/// Input |i|'s grad buffer: row-major, or laid out as `grad<i>_strides` (a transposed weight grad,
/// which AccumulateGrad copies into the parameter's layout: Note [Compiled regions]).
void GradOf(const RuleCtx& c, int i, BwdPlan* p) {
  auto strides = c.op.attrs.GetInts("grad" + std::to_string(i) + "_strides", c.bindings);
  if (!strides || strides->size() != c.in[i]->sizes.size()) return p->GradNew(i);
  TensorMeta layout = *c.in[i];
  layout.strides = *strides;
  p->GradNewLike(i, std::move(layout));
}

void BwdCompiled(const RuleCtx& c, BwdPlan* p) {
  const Op& op = c.op;
  const auto bytes = *op.attrs.GetInts("bwd_bytes", c.bindings);
  const auto grads = *op.attrs.GetInts("bwd_grads", c.bindings);
  std::vector<int> grad_of(bytes.size(), -1), temp(bytes.size(), -1);
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i] >= 0 && c.rg_in(i)) grad_of[grads[i]] = static_cast<int>(i);
  for (const Token& t : Tokens(op, "bwd_program")) {
    switch (t.kind) {
      case 'A':
        if (grad_of[t.index] >= 0) GradOf(c, grad_of[t.index], p);
        else temp[t.index] = p->Temp(bytes[t.index], BufferName(op, "bwd_names", t.index));
        break;
      case 'F':
        if (temp[t.index] >= 0) p->FreeTemp(temp[t.index]);
        break;
      case 'R': p->ReleaseSaved(t.index); break;
      case 'G': p->ReleaseGradOut(); break;
    }
  }
}

}  // namespace

const std::vector<OpRule> kCompiledRules = {
    {OpKind::kCompiled, 1, 1 << 20, ~0u, InferCompiled, FwdCompiled, BwdCompiled},
};

}  // namespace memsim
