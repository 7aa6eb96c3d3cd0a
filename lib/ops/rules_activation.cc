// Activations whose forward or backward is more than one kernel: abs, clamp, log_sigmoid, glu and
// prelu; and sign, whose backward is zeros. What each saves follows tools/autograd/derivatives.yaml; the backward temporaries follow
// torch/csrc/autograd/FunctionsManual.cpp (Note [More activations] in docs/op-rules.md).
#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

Status InferSame(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  if (c.inplace()) o->Alias(x, 0);
  else o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  return Status::OK();
}

void SaveSelf(const RuleCtx& c, FwdPlan* p) { p->Save(SavedRef::kInput, 0); }

// abs: self: grad * self.sgn(); the sign is a temporary of the product.
void BwdAbs(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  int sgn = p->Temp(Bytes(*c.in[0]), "self.sgn()");
  p->GradNew(0);
  p->FreeTemp(sgn);
}

// clamp(self, min, max) with Scalar bounds: self saved. clamp_backward: a 0-dim zero, the bool
// masks (self >= min) and (self <= max) (logical_and_ in place), then where(mask, grad, zero).
Status InferClamp(const RuleCtx& c, InferOut* o) {
  if (!c.op.attrs.Has("min") && !c.op.attrs.Has("max")) return RuleError(c, "needs \"min\" or \"max\"");
  return InferSame(c, o);
}

void FwdClamp(const RuleCtx& c, FwdPlan* p) {
  if (c.inplace()) p->Save(SavedRef::kExtra, p->AddExtra(Bytes(*c.in[0]), "pre-inplace clone"));
  else p->Save(SavedRef::kInput, 0);
}

void BwdClamp(const RuleCtx& c, BwdPlan* p) {
  if (!c.rg_in(0)) return;
  std::vector<int> temps = {p->Temp(ElementSize(c.in[0]->dtype), "zero")};
  for (std::string_view bound : {"min", "max"})
    if (c.op.attrs.Has(bound)) temps.push_back(p->Temp(c.in[0]->numel(), "bound mask"));
  p->GradNew(0);
  for (int t : temps) p->FreeTemp(t);
}

// log_sigmoid: log_sigmoid_forward returns the output and a buffer; self and buffer saved
// (Profile::log_sigmoid_buffer: input-sized on the CPU, empty on CUDA).
void FwdLogSigmoid(const RuleCtx& c, FwdPlan* p) {
  p->AllocOutput(0);
  p->Save(SavedRef::kInput, 0);
  if (c.profile.log_sigmoid_buffer) p->Save(SavedRef::kExtra, p->AddExtra(Bytes(*c.in[0]), "log_sigmoid buffer"));
}

// glu(self, dim): the first half times sigmoid of the second; self saved, one grad (glu_backward).
Status InferGlu(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  auto d = WrapDim(c.op.attrs.GetInt("dim", c.bindings).value_or(-1), x.dim());
  if (!d || x.sizes[*d] % 2 != 0) return RuleError(c, "glu halves an even-sized dim; got " + x.ShapeString());
  std::vector<int64_t> sizes = x.sizes;
  sizes[*d] /= 2;
  o->Fresh(TensorMeta::Contiguous(x.dtype, sizes));
  return Status::OK();
}

// prelu(self, weight [C] or [1]): self and weight saved. 2.x (_prelu_kernel_backward): grad_input
// and the weight's grad at the input's shape, which the engine sums to the weight's; 1.13
// (prelu_backward): the weight's grad summed inside from an input-sized collector.
Status InferPrelu(const RuleCtx& c, InferOut* o) {
  const TensorMeta& x = *c.in[0];
  const int64_t w = c.in[1]->numel(), ch = x.dim() >= 2 ? x.sizes[1] : 1;
  if (w != 1 && w != ch)
    return RuleError(c, "weight has " + std::to_string(w) + " elements; expected 1 or " + std::to_string(ch));
  o->Fresh(TensorMeta::Contiguous(x.dtype, x.sizes));
  return Status::OK();
}

void FwdPrelu(const RuleCtx& c, FwdPlan* p) {
  p->Save(SavedRef::kInput, 0);
  p->Save(SavedRef::kInput, 1);
}

void BwdPrelu(const RuleCtx& c, BwdPlan* p) {
  const TensorMeta& x = *c.in[0];
  if (c.profile.prelu_kernel) {
    p->GradNew(0);  // both outputs of the kernel, whichever input needs them
    if (c.rg_in(1)) p->GradNewLike(1, *TensorMeta::Contiguous(c.in[1]->dtype, x.sizes));
    else p->Temp(Bytes(x), "weight grad (unused)");  // dropped with the node's outputs
    return;
  }
  if (c.rg_in(0)) p->GradNew(0);
  if (!c.rg_in(1)) return;
  int collector = p->Temp(Bytes(x), "weight grad collector");
  p->GradNew(1);
  p->FreeTemp(collector);
}

// sign (torch.sign, F.lp_pool's `sign(out) * relu(abs(out))`, Note [LPPool]): derivatives.yaml
// `self: zeros_like(grad)`: nothing kept, a new zero grad.
void BwdSign(const RuleCtx& c, BwdPlan* p) {
  if (c.rg_in(0)) p->GradNew(0);
}

constexpr uint32_t kFirst = 1u;

}  // namespace

const std::vector<OpRule> kActivationRules = {
    {OpKind::kAbs, 1, 1, kFirst, InferSame, SaveSelf, BwdAbs},
    {OpKind::kClamp, 1, 1, kFirst, InferClamp, FwdClamp, BwdClamp},
    {OpKind::kLogSigmoid, 1, 1, kFirst, InferSame, FwdLogSigmoid, nullptr},
    {OpKind::kGlu, 1, 1, kFirst, InferGlu, SaveSelf, nullptr},
    {OpKind::kPrelu, 2, 2, 3u, InferPrelu, FwdPrelu, BwdPrelu},
    {OpKind::kSign, 1, 1, kFirst, InferSame, nullptr, BwdSign},
};

}  // namespace memsim
