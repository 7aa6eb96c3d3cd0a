// Advice: single changes to a configuration (in-place activations, expandable segments, half
// the batch with gradient accumulation, checkpointing the repeated blocks, a lighter
// optimizer, freezing, the fine-tuning modes — LoRA adapters, activation offloading —,
// torch.compile on or off and its recorded memory budgets when the export recorded them; with
// several ranks the sharding remedies: ZeRO stages, offload, FSDP), each simulated through the
// run pipeline and ranked by the peak reserved memory it saves (with several ranks: of the
// largest rank); plus the largest batch that fits as configured. Each change carries the
// `memsim run` flags that make it, ready to paste.
#ifndef MEMSIM_SIM_ADVISE_H_
#define MEMSIM_SIM_ADVISE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/fit.h"
#include "sim/sweep.h"

namespace memsim {

/// One candidate change: how it alters a configuration, and whether it changes what is trained
/// (not only how much memory it takes).
struct Change {
  std::string what;  ///< in words, without the flags
  bool changes_training;
  /// Makes the change on |base|: the changed configuration, and in |args| the `memsim run` flags
  /// that make it (one argument each; they replace the same flags of the baseline, and --ddp
  /// for a sharding change). false: not applicable to |base|.
  std::function<bool(const RunConfig& base, RunConfig* changed, std::vector<std::string>* args)> apply;
  /// A rewrite of the graph the change needs (LoRA adapters), or null. An error: not applicable.
  std::function<Result<Graph>(const Graph&)> rewrite = nullptr;
};

/// |args| as one shell line: an argument with characters a shell would read quoted ('…').
std::string ShellJoin(const std::vector<std::string>& args);

/// Globs that select exactly |blocks| (RepeatedBlocks' siblings "P.0" … "P.N"): "P.[0-9]",
/// "P.[0-9][0-9]", … one per number of digits, so that none selects a module nested in a block.
std::vector<std::string> BlockGlobs(const std::vector<std::string>& blocks);

/// The candidate changes for |g|, in table order.
std::vector<Change> CandidateChanges(const Graph& g);

struct AdvisedChange {
  size_t index = 0;  ///< in CandidateChanges
  std::string what;
  std::vector<std::string> args;  ///< Change::apply's flags
  bool changes_training = false;
  SweepRow row;  ///< several ranks: the largest rank's (peak reserved)
  int rank = 0;  ///< the rank |row| is (0 when every rank is alike)
};

struct AdviseReport {
  std::string model;
  std::string gpu;  ///< --gpu's name ("" : none)
  int64_t capacity_bytes = 0;
  SweepRow baseline;      ///< several ranks: the largest rank's
  int baseline_rank = 0;  ///< the rank |baseline| is
  int world = 1;          ///< ranks of the baseline (--ddp, --world, --data-parallel)
  /// Measured against the baseline's peak reserved (what it would need, sim/figures.h): the
  /// changes that fit first, then those that still do not fit; each group largest saving first,
  /// ties in the table's order.
  std::vector<AdvisedChange> changes;
  std::vector<AdvisedChange> left_out;  ///< changes that need more memory than the baseline
  /// Lines about what was not proposed and how to get it (a graph without torch.compile's program).
  std::vector<std::string> notes;
  std::optional<int64_t> max_batch;    ///< with a capacity and a batch symbol
};

/// Simulates |base| and every applicable change. Error: |base| itself is invalid.
Result<AdviseReport> Advise(const Graph& g, const RunConfig& base, int threads, int64_t max_batch);

/// What `fit` proposes when not even a batch of 1 fits: each single change (CandidateChanges)
/// with which batch 1 fits, and the largest batch that then fits, largest first.
struct FitProposal {
  AdvisedChange change;   ///< its row at batch 1
  int64_t max_batch = 0;  ///< the largest batch that fits with the change (FitBatch)
};
Result<std::vector<FitProposal>> ProposeForFit(const Graph& g, const RunConfig& base, int threads, int64_t limit);

/// `fit` as the command and the Python module run it: the search over |symbol| (FitSymbol), and
/// when not even a batch of 1 fits, the proposals (ProposeForFit).
struct FitAnswer {
  FitResult fit;
  std::vector<FitProposal> proposals;
};
Result<FitAnswer> FitWithProposals(const Graph& g, const RunConfig& base, const std::string& symbol, int64_t limit,
                                   int threads);

}  // namespace memsim

#endif  // MEMSIM_SIM_ADVISE_H_
