#include "sim/advise.h"

#include <algorithm>

namespace memsim {

std::vector<Change> CandidateChanges(const Graph& g) {
  std::vector<Change> c;
  c.push_back({"in-place activations (--inplace-activations on)", false, [](const RunConfig& b, RunConfig* v) {
                 if (b.sim.inplace == std::optional<bool>(true)) return false;
                 v->sim.inplace = true;
                 return true;
               }});
  c.push_back({"expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)", false,
               [](const RunConfig& b, RunConfig* v) {
                 if (b.alloc.alloc_conf.find("expandable_segments:True") != std::string::npos) return false;
                 v->alloc.alloc_conf = b.alloc.alloc_conf.empty() ? "expandable_segments:True"
                                                                  : b.alloc.alloc_conf + ",expandable_segments:True";
                 return true;
               }});
  c.push_back({"halve the batch (gradient accumulation over 2 micro-batches)", false,
               [](const RunConfig& b, RunConfig* v) {
                 auto it = b.sim.symbols.find("batch");
                 if (it == b.sim.symbols.end() || it->second < 2) return false;
                 v->sim.symbols["batch"] = it->second / 2;
                 return true;
               }});
  c.push_back({"SGD with momentum instead of an Adam-family optimizer", true, [](const RunConfig& b, RunConfig* v) {
                 if (!b.sim.optimizer.starts_with("adam")) return false;
                 v->sim.optimizer = "momentum";
                 return true;
               }});
  size_t half = g.parameters.size() / 2;
  c.push_back({"freeze the first half of the parameter tensors (--freeze-params " + std::to_string(half) + ")", true,
               [half](const RunConfig& b, RunConfig* v) {
                 if (half == 0 || b.sim.freeze_params >= static_cast<int64_t>(half)) return false;
                 v->sim.freeze_params = static_cast<int64_t>(half);
                 return true;
               }});
  return c;
}

Result<AdviseReport> Advise(const Graph& g, const RunConfig& base, int threads, int64_t max_batch) {
  std::vector<Change> changes = CandidateChanges(g);
  std::vector<RunConfig> configs = {base};
  std::vector<size_t> which;
  for (size_t i = 0; i < changes.size(); ++i) {
    RunConfig v = base;
    if (changes[i].apply(base, &v)) {
      configs.push_back(v);
      which.push_back(i);
    }
  }
  std::vector<SweepRow> rows = RunSweep(g, configs, threads);
  if (!rows[0].status.ok()) return rows[0].status;
  AdviseReport rep;
  rep.model = g.name;
  rep.capacity_bytes = base.alloc.capacity_bytes;
  rep.baseline = rows[0];
  for (size_t k = 0; k < which.size(); ++k)
    rep.changes.push_back({changes[which[k]].what, changes[which[k]].changes_training, rows[k + 1]});
  std::stable_sort(rep.changes.begin(), rep.changes.end(), [](const AdvisedChange& x, const AdvisedChange& y) {
    return x.row.peak_reserved_bytes < y.row.peak_reserved_bytes;
  });
  if (rep.capacity_bytes > 0 && g.FindSymbol("batch") != kNone) {
    auto fit = FitBatch(g, base, max_batch);
    if (fit.ok()) rep.max_batch = fit->max_batch;
  }
  return rep;
}

}  // namespace memsim
