// A recorded op (Note [Recorded rules] in docs/op-rules.md): an op memsim has no rule for, whose
// autograd behaviour the exporter measured on small CPU tensors (tools/memsim_export/recorded.py).
// The forward and backward replay the measured buffer programs, each buffer sized from the op's
// own tensors where the measurement matched one, else with the fixed bytes the export measured.
// Attributes: target (what ran), out<j>_shape / out<j>_dtype, out<j>_alias (input whose storage
// output j shares), fwd_bytes / fwd_like / fwd_program / fwd_outputs, saved, bwd_bytes / bwd_like
// / bwd_program / bwd_grads (docs/graph-format.md).
#include <algorithm>
#include <charconv>
#include <sstream>

#include "lib/ops/op_rules.h"

namespace memsim {
namespace {

/// One token "<letter><index>" of a program or saved list ("A0", "F3", "R1", "i0", "o2", "b4").
struct Token {
  char kind;
  int index;
};

std::vector<std::string> Words(const Op& op, std::string_view key) {
  std::vector<std::string> out;
  std::istringstream in(op.attrs.GetString(key, ""));
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::optional<int> Index(std::string_view digits) {
  int k = -1;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || k < 0) return std::nullopt;
  return k;
}

std::vector<Token> Tokens(const Op& op, std::string_view key) {
  std::vector<Token> out;
  for (const std::string& w : Words(op, key))
    if (auto k = Index(std::string_view(w).substr(1))) out.push_back({w[0], *k});
  return out;
}

/// Bytes of one buffer: its `like` token ("i<k>"/"o<k>": the bytes of input/output k;
/// "i<k>x<b>"/"o<k>x<b>": its elements times b bytes) evaluated on this op's tensors, or "-": the
/// measured bytes (fixed, or a product of symbols). nullopt: a malformed token.
std::optional<int64_t> SizeOf(const RuleCtx& c, std::string_view like, int64_t measured) {
  if (like == "-") return measured;
  if (like.size() < 2 || (like[0] != 'i' && like[0] != 'o')) return std::nullopt;
  const auto& metas = like[0] == 'i' ? c.in : c.out;
  size_t x = like.find('x');
  auto k = Index(like.substr(1, x == std::string_view::npos ? std::string_view::npos : x - 1));
  if (!k || static_cast<size_t>(*k) >= metas.size()) return std::nullopt;
  if (x == std::string_view::npos) return Bytes(*metas[*k]);
  auto per = Index(like.substr(x + 1));
  if (!per) return std::nullopt;
  return metas[*k]->numel() * *per;
}

/// The sizes of the buffers of one side (prefix "fwd" or "bwd"); nullopt on a malformed attribute.
std::optional<std::vector<int64_t>> Sizes(const RuleCtx& c, const std::string& side) {
  auto bytes = c.op.attrs.GetInts(side + "_bytes", c.bindings);
  std::vector<std::string> like = Words(c.op, side + "_like");
  if (!bytes || like.size() != bytes->size()) return std::nullopt;
  std::vector<int64_t> out;
  for (size_t k = 0; k < like.size(); ++k) {
    auto b = SizeOf(c, like[k], (*bytes)[k]);
    if (!b) return std::nullopt;
    out.push_back(*b);
  }
  return out;
}

/// Refuses a like token that names no input/output of the op or is malformed.
Status CheckLike(const RuleCtx& c, const std::string& side, size_t outputs) {
  for (const std::string& w : Words(c.op, side + "_like")) {
    if (w == "-") continue;
    std::string_view v = w;
    size_t x = v.find('x');
    auto k = Index(v.substr(1, x == std::string_view::npos ? std::string_view::npos : x - 1));
    const size_t n = v[0] == 'i' ? c.in.size() : v[0] == 'o' ? outputs : 0;
    if (!k || static_cast<size_t>(*k) >= n || (x != std::string_view::npos && !Index(v.substr(x + 1))))
      return RuleError(c, "attribute " + side + "_like: bad token \"" + w + "\" (re-export the model)");
  }
  return Status::OK();
}

Status CheckTokens(const RuleCtx& c, std::string_view key, std::string_view kinds, size_t buffers, size_t saved) {
  for (const std::string& w : Words(c.op, key)) {
    auto k = Index(std::string_view(w).substr(1));
    if (kinds.find(w[0]) == std::string_view::npos || !k ||
        static_cast<size_t>(*k) >= (w[0] == 'R' ? saved : w[0] == 'i' ? c.in.size() : buffers))
      return RuleError(c, "attribute " + std::string(key) + ": bad token \"" + w + "\" (re-export the model)");
  }
  return Status::OK();
}

Status InferRecorded(const RuleCtx& c, InferOut* o) {
  const Op& op = c.op;
  auto outs = op.attrs.GetInts("fwd_outputs", c.bindings);
  auto grads = op.attrs.GetInts("bwd_grads", c.bindings);
  auto fwd = op.attrs.GetInts("fwd_bytes", c.bindings);
  auto bwd = op.attrs.GetInts("bwd_bytes", c.bindings);
  if (!outs || !grads || !fwd || !bwd || grads->size() != c.in.size() ||
      Words(op, "fwd_like").size() != fwd->size() || Words(op, "bwd_like").size() != bwd->size())
    return RuleError(c, "a recorded op needs fwd_bytes/fwd_like, bwd_bytes/bwd_like (one each per buffer), "
                        "fwd_outputs and bwd_grads (one per input): re-export the model");
  MEMSIM_RETURN_IF_ERROR(CheckLike(c, "fwd", outs->size()));
  MEMSIM_RETURN_IF_ERROR(CheckLike(c, "bwd", outs->size()));
  MEMSIM_RETURN_IF_ERROR(CheckTokens(c, "fwd_program", "AF", fwd->size(), 0));
  MEMSIM_RETURN_IF_ERROR(CheckTokens(c, "saved", "iob", std::max(fwd->size(), outs->size()), 0));
  MEMSIM_RETURN_IF_ERROR(CheckTokens(c, "bwd_program", "AFR", bwd->size(), Words(op, "saved").size()));
  for (size_t j = 0; j < outs->size(); ++j) {
    const std::string key = "out" + std::to_string(j);
    auto shape = op.attrs.GetInts(key + "_shape", c.bindings);
    auto dtype = ParseDtype(op.attrs.GetString(key + "_dtype", ""));
    if (!shape || !dtype || (*outs)[j] >= static_cast<int64_t>(fwd->size()))
      return RuleError(c, "output " + std::to_string(j) + " needs " + key + "_shape, " + key + "_dtype and a buffer");
    auto alias = op.attrs.GetInt(key + "_alias", c.bindings);
    if (alias && *alias >= 0 && static_cast<size_t>(*alias) < c.in.size()) {
      TensorMeta m = TensorMeta::Contiguous(*dtype, *shape).value_or(TensorMeta{});
      o->Alias(std::move(m), static_cast<int>(*alias));
    } else {
      o->Fresh(TensorMeta::Contiguous(*dtype, *shape));
    }
  }
  return Status::OK();
}

void FwdRecorded(const RuleCtx& c, FwdPlan* p) {
  auto sizes = Sizes(c, "fwd");
  if (!sizes) return;  // Infer refused it; unreachable for a bound graph
  const auto outs = *c.op.attrs.GetInts("fwd_outputs", c.bindings);
  std::vector<int> extra(sizes->size(), -1), output(sizes->size(), -1);
  for (size_t j = 0; j < outs.size(); ++j)
    if (outs[j] >= 0) output[outs[j]] = static_cast<int>(j);
  for (const Token& t : Tokens(c.op, "fwd_program")) {
    if (t.kind == 'A' && output[t.index] >= 0) p->AllocOutput(output[t.index], (*sizes)[t.index]);
    else if (t.kind == 'A') extra[t.index] = p->AddExtra((*sizes)[t.index], "recorded buffer");
    else if (t.kind == 'F' && extra[t.index] >= 0) p->FreeExtra(extra[t.index]);
  }
  for (const Token& t : Tokens(c.op, "saved")) {
    if (t.kind == 'i') p->Save(SavedRef::kInput, t.index);
    if (t.kind == 'o') p->Save(SavedRef::kOutput, t.index);
    if (t.kind == 'b' && output[t.index] >= 0) p->Save(SavedRef::kOutput, output[t.index]);
    else if (t.kind == 'b' && extra[t.index] >= 0) p->Save(SavedRef::kExtra, extra[t.index]);
  }
}

// The backward program: A<k> allocates buffer k (an input's grad where bwd_grads names it and the
// input requires grad, else a temporary), F<k> frees a temporary, R<k> drops saved tensor k;
// bwd_grads -2: the input's grad is the incoming grad passed through.
void BwdRecorded(const RuleCtx& c, BwdPlan* p) {
  auto sizes = Sizes(c, "bwd");
  if (!sizes) return;
  const auto grads = *c.op.attrs.GetInts("bwd_grads", c.bindings);
  std::vector<int> grad_of(sizes->size(), -1), temp(sizes->size(), -1);
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i] >= 0 && c.rg_in(i)) grad_of[grads[i]] = static_cast<int>(i);
    else if (grads[i] == -2 && c.rg_in(i)) p->GradAlias(static_cast<int>(i));  // the incoming grad itself
  for (const Token& t : Tokens(c.op, "bwd_program")) {
    if (t.kind == 'A' && grad_of[t.index] >= 0) p->GradNew(grad_of[t.index]);
    else if (t.kind == 'A') temp[t.index] = p->Temp((*sizes)[t.index], "recorded backward buffer");
    else if (t.kind == 'F' && temp[t.index] >= 0) p->FreeTemp(temp[t.index]);
    else if (t.kind == 'R') p->ReleaseSaved(t.index);
  }
}

}  // namespace

const std::vector<OpRule> kRecordedRules = {
    {OpKind::kRecorded, 0, 1 << 20, ~0u, InferRecorded, FwdRecorded, BwdRecorded},
};

}  // namespace memsim
