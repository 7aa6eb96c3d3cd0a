// Selective activation checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts,
// Note [Selective activation checkpointing] in docs/op-rules.md): inside a checkpointed region,
// the ops a policy saves keep their outputs from the forward for the recomputation, which then
// takes them instead of running those ops again. A policy is data: the ATen ops it saves, and
// whether every other mm of a region call is recomputed instead (torchtitan's default), or the
// decisions a user's policy_fn made, recorded call by call (memsim_export.record_sac_policy).
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_SAC_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_SAC_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lib/ops/op_rules.h"
#include "lib/util/status.h"

namespace memsim {

struct SacPolicy {
  /// Per ATen op (overload-free name), whether its 1st, 2nd, ... call within one call of the
  /// checkpointed module was saved; an op not named was recomputed every time.
  using CallDecisions = std::map<std::string, std::vector<bool>>;

  std::vector<std::string> save;  ///< ATen op names (overload-free: "mm", "_scaled_dot_product_flash_attention")
  bool every_other_mm = false;    ///< the 2nd, 4th, ... mm of each region call is recomputed
  /// A recorded policy: per checkpointed module path, its calls in order (instead of |save|).
  std::map<std::string, std::vector<CallDecisions>> recorded;

  bool enabled() const { return !save.empty() || !recorded.empty(); }
  /// Whether the |occurrence|-th (from 0) call of ATen op |aten| within the |call|-th call (from
  /// 0) of checkpointed module |module| keeps its outputs.
  bool Saves(const std::string& module, size_t call, const std::string& aten, size_t occurrence) const;
};

/// --sac POLICY: "torchtitan" (torchtitan's op-level AC: mm, the fused SDPA kernels and max saved,
/// every other mm recomputed), "ops:NAME,NAME,..." (those ATen ops saved, every one), or a JSON
/// file: {"save": [NAME, ...], "every_other_mm": bool}, or a policy recorded from a policy_fn,
/// {"recorded": {MODULE: [{NAME: [bool, ...], ...}, ...]}} (Note [Selective activation checkpointing]).
Result<SacPolicy> ParseSacPolicy(const std::string& spec);

/// The ATen op memsim's op runs as, in the names SAC policies use ("mm" for a linear without bias,
/// "addmm" with one, "bmm", the SDPA kernel of the chosen backend); the op kind's name otherwise,
/// and "" for a composite whose inner ops memsim does not split (the math SDPA).
std::string AtenOpOf(const RuleCtx& c);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_SAC_H_
