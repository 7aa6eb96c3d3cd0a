#include "lib/autodiff/optimizer_bnb.h"

#include <string>

namespace memsim {
namespace {

constexpr uint32_t kNoGrad = UINT32_MAX;

bool EightBit(const OptimizerRule& r, const OptParam& prm) {
  return r.state_bits == 8 && prm.numel() >= r.min_8bit_size;
}

void CreateStates(const OptimizerRule& r, const Profile& p, const OptParam& prm, Ledger* l,
                  std::vector<Ledger::StorageId>* states) {
  const std::vector<BnbState> st = BnbStateOf(r, p, prm);
  for (size_t k = 0; k < st.size(); ++k) {
    const bool absmax = k >= static_cast<size_t>(r.states);
    const std::string name = prm.name + (absmax ? ".absmax" : ".state") + std::to_string(absmax ? k - r.states + 1 : k + 1);
    states->push_back(st[k].managed ? l->AllocHost(st[k].bytes, name + " (unified memory)")
                                    : l->Alloc(st[k].bytes, name, Category::kOptimizerState));
  }
}

Ledger::StorageId Temp(int64_t bytes, const OptParam& prm, std::string_view what, Ledger* l) {
  return l->AllocJoined(bytes, {prm.name, " ", what}, Category::kTemporary);
}

/// bitsandbytes/backends/cpu/ops.py _optimizer_update_8bit_blockwise_cpu: dequantize every state
/// to fp32, grad = g.float() * gnorm_scale, p_fp32 = p.data.float() (the parameter itself when it
/// is fp32), the update with its temporaries, then quantize_blockwise per state (absmax, then the
/// uint8 output, both copied into the state and freed). The frame's locals go at its return, in
/// the order the function names them: the states, grad, p_fp32, denom / update_dir.
void CpuUpdate8bit(const OptimizerRule& r, const Profile& p, const OptParam& prm, Ledger* l) {
  const int64_t n = prm.numel(), f32 = 4 * n, blocks = (n + kBnbBlock - 1) / kBnbBlock;
  std::vector<Ledger::StorageId> locals;
  for (int k = 0; k < r.states; ++k) locals.push_back(Temp(f32, prm, "dequantized state", l));
  Ledger::StorageId gf = prm.elem != 4 ? Temp(f32, prm, "grad.float()", l) : kNoGrad;
  locals.push_back(AllocWithScalarOperand(p, f32, 4, prm.name + " grad * gnorm_scale", l));
  if (gf != kNoGrad) l->Unref(gf);
  if (prm.elem != 4) locals.push_back(Temp(f32, prm, "param.float()", l));
  if (r.states == 2) {  // adam: denom = (state2.sqrt() / correction2).add_(eps)
    Ledger::StorageId sq = Temp(f32, prm, "state2.sqrt()", l);
    locals.push_back(AllocWithScalarOperand(p, f32, 4, prm.name + " denom", l));
    l->Unref(sq);
  } else {  // lion: update_dir = torch.sign(state1.mul(beta1) + grad.mul(1 - beta1))
    Ledger::StorageId a = AllocWithScalarOperand(p, f32, 4, prm.name + " state1 * beta1", l);
    Ledger::StorageId b = AllocWithScalarOperand(p, f32, 4, prm.name + " grad * (1 - beta1)", l);
    Ledger::StorageId sum = Temp(f32, prm, "sum", l);
    l->Unref(a);
    l->Unref(b);
    locals.push_back(Temp(f32, prm, "update_dir", l));
    l->Unref(sum);
  }
  for (int k = 0; k < r.states; ++k) {  // quantize_blockwise: absmax, then out
    Ledger::StorageId absmax = Temp(4 * blocks, prm, "quantized absmax", l);
    l->Unref(Temp(n, prm, "quantized state", l));
    l->Unref(absmax);
  }
  for (Ledger::StorageId s : locals) l->Unref(s);
}

/// bitsandbytes/backends/cpu/ops.py _optimizer_update_32bit_cpu: g_float = g.float() *
/// gnorm_scale, p_float = p.data.float(), adam's update = state1 / (state2.sqrt() + eps *
/// correction2) (lion's update = state1.mul(beta1).add(g_float), then update.sign()); the locals
/// g_float, p_float and update go at the return.
void CpuUpdate32bit(const OptimizerRule& r, const Profile& p, const OptParam& prm, Ledger* l) {
  const int64_t f32 = 4 * prm.numel();
  std::vector<Ledger::StorageId> locals;
  Ledger::StorageId gf = prm.elem != 4 ? Temp(f32, prm, "grad.float()", l) : kNoGrad;
  locals.push_back(AllocWithScalarOperand(p, f32, 4, prm.name + " grad * gnorm_scale", l));
  if (gf != kNoGrad) l->Unref(gf);
  if (prm.elem != 4) locals.push_back(Temp(f32, prm, "param.float()", l));
  if (r.states == 2) {
    Ledger::StorageId sq = Temp(f32, prm, "state2.sqrt()", l);
    Ledger::StorageId den = AllocWithScalarOperand(p, f32, 4, prm.name + " state2.sqrt() + eps", l);
    l->Unref(sq);
    locals.push_back(Temp(f32, prm, "update", l));
    l->Unref(den);
  } else {
    Ledger::StorageId m = AllocWithScalarOperand(p, f32, 4, prm.name + " state1 * beta1", l);
    locals.push_back(Temp(f32, prm, "update", l));
    l->Unref(m);
    l->Unref(Temp(f32, prm, "update.sign()", l));
  }
  for (Ledger::StorageId s : locals) l->Unref(s);
}

}  // namespace

std::vector<BnbState> BnbStateOf(const OptimizerRule& r, const Profile& p, const OptParam& prm) {
  const int64_t n = prm.numel();
  // get_state_buffer: unified memory for a paged optimizer's large states on CUDA only.
  const bool managed = r.paged && p.bnb_paged_managed && n >= kBnbPagedMinNumel;
  std::vector<BnbState> st;
  const bool q = EightBit(r, prm);
  for (int k = 0; k < r.states; ++k) st.push_back({q ? n : 4 * n, managed});
  if (q)  // absmax: torch.zeros((blocks,), float32) on the parameter's device, never paged
    for (int k = 0; k < r.states; ++k) st.push_back({4 * ((n + kBnbBlock - 1) / kBnbBlock), false});
  return st;
}

void CreateQmaps(Ledger* l, std::vector<Ledger::StorageId>* states) {
  for (std::string_view q : {"bitsandbytes qmap dynamic", "bitsandbytes qmap udynamic"})
    states->push_back(l->Alloc(kBnbQmapBytes, q, Category::kOptimizerState));
}

void CreateBnbResidentState(const OptimizerRule& r, const Profile& p, bool first_step,
                            const std::vector<OptParam>& params, Ledger* l, std::vector<Ledger::StorageId>* states) {
  // Optimizer8bit.__init__: fill_qmap() when optim_bits == 8, host tensors: device memory on the
  // CPU at once, on CUDA from the first 8-bit init_state on (RunBnbStep).
  if (r.state_bits == 8 && (!first_step || !p.cuda)) CreateQmaps(l, states);
  if (first_step) return;
  for (const OptParam& prm : params) CreateStates(r, p, prm, l, states);
}

void RunBnbStep(const OptimizerRule& r, const Profile& p, bool first_step, const std::vector<OptParam>& params,
                Ledger* l, std::vector<Ledger::StorageId>* states) {
  // Optimizer8bit.step: per parameter, init_state when its state is empty, then update_step.
  bool qmaps_on_device = !first_step || !p.cuda;
  for (const OptParam& prm : params) {
    if (prm.grad == kNoGrad) continue;
    if (first_step && EightBit(r, prm) && !qmaps_on_device) {  // name2qmap[...].to(p.device)
      CreateQmaps(l, states);
      qmaps_on_device = true;
    }
    if (first_step) CreateStates(r, p, prm, l, states);
    if (!p.bnb_update_temporaries) continue;  // CUDA: one kernel, in place
    if (EightBit(r, prm)) CpuUpdate8bit(r, p, prm, l);
    else CpuUpdate32bit(r, p, prm, l);
  }
}

}  // namespace memsim
