// memsim sweep: the cartesian product of configuration lists, simulated in parallel.
// memsim fit: the largest batch that fits a device.
#include <cstdio>
#include <iostream>
#include <algorithm>
#include <functional>
#include <memory>

#include "sim/gpus.h"
#include "sim/report.h"
#include "sim/sweep.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

/// Options shared by sweep and fit, each a list for sweep.
struct SweepArgs {
  std::string graph;
  std::vector<int64_t> batches;
  std::vector<std::string> sets;  ///< SYM=V1,V2,...
  std::vector<std::string> optimizers = {"sgd"};
  std::vector<std::string> steps = {"first"};
  std::vector<std::string> profiles = {"cuda"};
  std::vector<std::string> inplace = {"keep"};
  std::vector<int64_t> freeze_params = {0};
  std::vector<std::string> freeze;
  std::vector<std::string> allocators = {"caching"};
  std::vector<std::string> alloc_confs = {""};
  std::string gpu;
  int64_t capacity = 0;
  int threads = 0;
  int64_t max_batch = 65536;
  bool json = false;
  bool csv = false;
};

/// One axis of the product: its values and how each sets a configuration.
struct Axis {
  std::string name;
  std::vector<std::string> labels;
  std::function<void(size_t, SweepConfig*)> apply;
  bool numeric = false;  ///< labels are integers (JSON writes numbers)
};

std::vector<Axis> Axes(const SweepArgs& a) {
  std::vector<Axis> axes;
  auto strings = [&](const std::string& name, const std::vector<std::string>& v,
                     std::function<void(const std::string&, SweepConfig*)> f) {
    axes.push_back({name, v, [v, f](size_t i, SweepConfig* c) { f(v[i], c); }});
  };
  if (!a.batches.empty()) {
    std::vector<std::string> l;
    for (int64_t b : a.batches) l.push_back(std::to_string(b));
    auto v = a.batches;
    axes.push_back({"batch", l, [v](size_t i, SweepConfig* c) { c->sim.symbols["batch"] = v[i]; }, true});
  }
  for (const std::string& s : a.sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) Fail(Status::InvalidArgument("--set \"" + s + "\": expected SYMBOL=V1,V2,..."));
    std::string sym = s.substr(0, eq);
    std::vector<int64_t> vals;
    std::vector<std::string> labels;
    size_t pos = eq + 1;
    while (pos <= s.size()) {
      size_t comma = s.find(',', pos);
      std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      char* end = nullptr;
      long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < 0) Fail(Status::InvalidArgument("--set \"" + s + "\": \"" + item + "\" is not a non-negative integer"));
      vals.push_back(v);
      labels.push_back(item);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    axes.push_back({sym, labels, [sym, vals](size_t i, SweepConfig* c) { c->sim.symbols[sym] = vals[i]; }, true});
  }
  strings("optimizer", a.optimizers, [](const std::string& v, SweepConfig* c) { c->sim.optimizer = v; });
  strings("step", a.steps, [](const std::string& v, SweepConfig* c) { c->sim.first_step = v == "first"; });
  strings("profile", a.profiles, [](const std::string& v, SweepConfig* c) { c->sim.profile = v; });
  strings("inplace", a.inplace, [](const std::string& v, SweepConfig* c) {
    if (v != "keep") c->sim.inplace = v == "on";
  });
  {
    std::vector<std::string> l;
    for (int64_t k : a.freeze_params) l.push_back(std::to_string(k));
    auto v = a.freeze_params;
    axes.push_back({"freeze_params", l, [v](size_t i, SweepConfig* c) { c->sim.freeze_params = v[i]; }, true});
  }
  strings("allocator", a.allocators, [](const std::string& v, SweepConfig* c) {
    auto m = ParseAllocatorModel(v);
    if (!m.ok()) Fail(m.status());
    c->alloc.model = *m;
  });
  strings("alloc_conf", a.alloc_confs, [](const std::string& v, SweepConfig* c) { c->alloc.alloc_conf = v; });
  return axes;
}

SweepConfig Base(const SweepArgs& a) {
  SweepConfig base;
  base.sim.freeze_globs = a.freeze;
  base.alloc.capacity_bytes = a.capacity;
  if (!a.gpu.empty()) {
    GpuSpec gpu = GpuOrFail(a.gpu);
    if (a.capacity == 0) base.alloc.capacity_bytes = gpu.memory_bytes;
    base.sim.cublas_workspace_bytes = gpu.cublas_workspace_bytes;
  }
  return base;
}

nlohmann::ordered_json RowJson(const SweepRow& r) {
  nlohmann::ordered_json j;
  if (!r.status.ok()) {
    j["error"] = r.status.message();
    return j;
  }
  j["peak_live_bytes"] = r.peak_live_bytes;
  j["peak_phase"] = PhaseName(r.peak_phase);
  j["peak_allocated_bytes"] = r.peak_allocated_bytes;
  j["peak_reserved_bytes"] = r.peak_reserved_bytes;
  j["oom"] = r.oom ? nlohmann::ordered_json(r.oom_message) : nlohmann::ordered_json();
  return j;
}

void Sweep(const SweepArgs& a) {
  Graph g = LoadOrFail(a.graph);
  std::vector<Axis> axes = Axes(a);
  SweepConfig base = Base(a);
  // Cartesian product, first axis slowest.
  size_t n = 1;
  for (const Axis& ax : axes) n *= ax.labels.size();
  if (n > 1000000) Fail(Status::InvalidArgument("the sweep has " + std::to_string(n) + " configurations (at most 1,000,000)"));
  std::vector<SweepConfig> configs(n, base);
  std::vector<std::vector<size_t>> picks(n);
  for (size_t i = 0; i < n; ++i) {
    size_t rest = i;
    picks[i].resize(axes.size());
    for (size_t k = axes.size(); k-- > 0;) {
      picks[i][k] = rest % axes[k].labels.size();
      rest /= axes[k].labels.size();
    }
    for (size_t k = 0; k < axes.size(); ++k) axes[k].apply(picks[i][k], &configs[i]);
  }
  std::vector<SweepRow> rows = RunSweep(g, configs, a.threads);
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = g.name;
    j["capacity_bytes"] = base.alloc.capacity_bytes;
    j["configurations"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) {
      nlohmann::ordered_json row;
      for (size_t k = 0; k < axes.size(); ++k) {
        const std::string& label = axes[k].labels[picks[i][k]];
        if (axes[k].numeric) row[axes[k].name] = std::stoll(label);
        else row[axes[k].name] = label;
      }
      nlohmann::ordered_json result = RowJson(rows[i]);
      for (auto& [key, v] : result.items()) row[key] = v;
      j["configurations"].push_back(row);
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  // Text and CSV show the axes that vary (and the batch); JSON shows every axis.
  std::vector<size_t> shown;
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k].labels.size() > 1 || axes[k].name == "batch") shown.push_back(k);
  const char* sep = a.csv ? "," : "  ";
  for (size_t k : shown) std::cout << axes[k].name << sep;
  std::cout << "peak_live" << sep << "peak_allocated" << sep << "peak_reserved" << sep << "fits\n";
  for (size_t i = 0; i < n; ++i) {
    for (size_t k : shown) std::cout << (axes[k].labels[picks[i][k]].empty() ? "-" : axes[k].labels[picks[i][k]]) << sep;
    const SweepRow& r = rows[i];
    if (!r.status.ok()) {
      std::cout << "error: " << r.status.message() << "\n";
      continue;
    }
    auto bytes = [&](int64_t b) { return a.csv ? std::to_string(b) : HumanBytes(b); };
    std::cout << bytes(r.peak_live_bytes) << sep << bytes(r.peak_allocated_bytes) << sep << bytes(r.peak_reserved_bytes)
              << sep << (base.alloc.capacity_bytes == 0 ? "-" : r.oom ? "no" : "yes") << "\n";
  }
}

/// The one configuration that fit and advise take (every option must have a single value).
SweepConfig SingleConfig(const SweepArgs& a, const std::string& command) {
  SweepConfig base = Base(a);
  for (const Axis& ax : Axes(a)) {
    if (ax.labels.size() != 1)
      Fail(Status::InvalidArgument(command + " takes one value per option (\"" + ax.name + "\" has several)"));
    ax.apply(0, &base);
  }
  return base;
}

void Fit(const SweepArgs& a) {
  Graph g = LoadOrFail(a.graph);
  SweepConfig base = SingleConfig(a, "fit");
  auto fit = FitBatch(g, base, a.max_batch);
  if (!fit.ok()) Fail(fit.status());
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = g.name;
    j["capacity_bytes"] = base.alloc.capacity_bytes;
    j["max_batch"] = fit->max_batch;
    j["at_max"] = fit->max_batch > 0 ? RowJson(fit->at_max) : nlohmann::ordered_json();
    j["next"] = fit->above.oom ? RowJson(fit->above) : nlohmann::ordered_json();
    j["evaluated"] = fit->evaluated;
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (fit->max_batch == 0) {
    std::cout << g.name << ": batch 1 does not fit in " << HumanBytes(base.alloc.capacity_bytes) << ": "
              << fit->above.oom_message << "\n";
    return;
  }
  std::cout << g.name << ": largest batch that fits in " << HumanBytes(base.alloc.capacity_bytes) << ": "
            << fit->max_batch << " (peak reserved " << HumanBytes(fit->at_max.peak_reserved_bytes) << ", allocated "
            << HumanBytes(fit->at_max.peak_allocated_bytes) << ")\n";
  if (fit->above.oom)
    std::cout << "batch " << fit->max_batch + 1 << ": " << fit->above.oom_message << "\n";
  else
    std::cout << "(the search stopped at --max-batch " << a.max_batch << ")\n";
}

void AddCommon(CLI::App* cmd, SweepArgs* a, bool lists) {
  cmd->add_option("graph", a->graph, "graph file")->required();
  auto* b = cmd->add_option("--batch", a->batches, lists ? "batch sizes: --batch 8,16,32" : "batch size");
  b->delimiter(',');
  cmd->add_option("--set", a->sets, "symbol values: --set seq=128,512 (repeatable)");
  cmd->add_option("--optimizer", a->optimizers, "optimizer(s)")->delimiter(',');
  cmd->add_option("--step", a->steps, "first and/or steady")->delimiter(',')->check(CLI::IsMember({"first", "steady"}));
  cmd->add_option("--profile", a->profiles, "cuda and/or cpu")->delimiter(',')->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--inplace-activations", a->inplace, "on, off, keep")->delimiter(',')->check(CLI::IsMember({"on", "off", "keep"}));
  cmd->add_option("--freeze-params", a->freeze_params, "freeze the first K parameter tensors")->delimiter(',');
  cmd->add_option("--freeze", a->freeze, "freeze parameters matching this glob (all configurations)");
  cmd->add_option("--allocator", a->allocators, "caching, expandable, ideal")->delimiter(',')->check(CLI::IsMember({"caching", "expandable", "ideal"}));
  cmd->add_option("--alloc-conf", a->alloc_confs, "PYTORCH_CUDA_ALLOC_CONF string (repeat the option for several)");
  cmd->add_option("--gpu", a->gpu, "device whose memory is the capacity");
  cmd->add_option("--capacity", a->capacity, "device capacity in bytes");
  cmd->add_flag("--json", a->json, "JSON output");
}

/// One candidate change for `advise`: how it alters the configuration, and whether it changes
/// what is trained (not only how much memory it takes).
struct Change {
  std::string what;
  bool changes_training;
  std::function<bool(const SweepConfig&, SweepConfig*)> apply;  ///< false: not applicable
};

std::vector<Change> Changes(const Graph& g) {
  std::vector<Change> c;
  c.push_back({"in-place activations (--inplace-activations on)", false, [](const SweepConfig& b, SweepConfig* v) {
                 if (b.sim.inplace == std::optional<bool>(true)) return false;
                 v->sim.inplace = true;
                 return true;
               }});
  c.push_back({"expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)", false,
               [](const SweepConfig& b, SweepConfig* v) {
                 if (b.alloc.alloc_conf.find("expandable_segments:True") != std::string::npos) return false;
                 v->alloc.alloc_conf = b.alloc.alloc_conf.empty() ? "expandable_segments:True"
                                                                  : b.alloc.alloc_conf + ",expandable_segments:True";
                 return true;
               }});
  c.push_back({"halve the batch (gradient accumulation over 2 micro-batches)", false,
               [](const SweepConfig& b, SweepConfig* v) {
                 auto it = b.sim.symbols.find("batch");
                 if (it == b.sim.symbols.end() || it->second < 2) return false;
                 v->sim.symbols["batch"] = it->second / 2;
                 return true;
               }});
  c.push_back({"SGD with momentum instead of an Adam-family optimizer", true, [](const SweepConfig& b, SweepConfig* v) {
                 if (!b.sim.optimizer.starts_with("adam")) return false;
                 v->sim.optimizer = "momentum";
                 return true;
               }});
  size_t half = g.parameters.size() / 2;
  c.push_back({"freeze the first half of the parameter tensors (--freeze-params " + std::to_string(half) + ")", true,
               [half](const SweepConfig& b, SweepConfig* v) {
                 if (half == 0 || b.sim.freeze_params >= static_cast<int64_t>(half)) return false;
                 v->sim.freeze_params = static_cast<int64_t>(half);
                 return true;
               }});
  return c;
}

void Advise(const SweepArgs& a) {
  Graph g = LoadOrFail(a.graph);
  SweepConfig base = SingleConfig(a, "advise");
  std::vector<Change> changes = Changes(g);
  std::vector<SweepConfig> configs = {base};
  std::vector<size_t> which;
  for (size_t i = 0; i < changes.size(); ++i) {
    SweepConfig v = base;
    if (changes[i].apply(base, &v)) {
      configs.push_back(v);
      which.push_back(i);
    }
  }
  std::vector<SweepRow> rows = RunSweep(g, configs, a.threads);
  if (!rows[0].status.ok()) Fail(rows[0].status);
  const SweepRow& b = rows[0];
  // Largest savings first; ties keep the table's order.
  std::vector<size_t> order(which.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return rows[x + 1].peak_reserved_bytes < rows[y + 1].peak_reserved_bytes;
  });
  bool cap = base.alloc.capacity_bytes > 0;
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = g.name;
    j["baseline"] = RowJson(b);
    j["capacity_bytes"] = base.alloc.capacity_bytes;
    j["changes"] = nlohmann::ordered_json::array();
    for (size_t k : order) {
      const SweepRow& r = rows[k + 1];
      nlohmann::ordered_json c = RowJson(r);
      c["change"] = changes[which[k]].what;
      c["changes_training"] = changes[which[k]].changes_training;
      c["saves_reserved_bytes"] = b.peak_reserved_bytes - r.peak_reserved_bytes;
      j["changes"].push_back(c);
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << g.name << ": peak reserved " << HumanBytes(b.peak_reserved_bytes) << " (allocated "
            << HumanBytes(b.peak_allocated_bytes) << ")";
  if (cap) std::cout << (b.oom ? ", does NOT fit in " : ", fits in ") << HumanBytes(base.alloc.capacity_bytes);
  std::cout << "\n\nsingle changes, largest saving first:\n";
  for (size_t k : order) {
    const SweepRow& r = rows[k + 1];
    if (!r.status.ok()) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%+.1f %%", 100.0 * (r.peak_reserved_bytes - b.peak_reserved_bytes) /
                                                    std::max<int64_t>(b.peak_reserved_bytes, 1));
    std::cout << "  " << HumanBytes(r.peak_reserved_bytes) << "  (" << buf << ")  " << changes[which[k]].what;
    if (changes[which[k]].changes_training) std::cout << "  [changes training]";
    if (cap) std::cout << (r.oom ? "  - still does not fit" : "  - fits");
    std::cout << "\n";
  }
  if (cap) {
    auto fit = FitBatch(g, base, a.max_batch);
    if (fit.ok() && g.FindSymbol("batch") != kNone)
      std::cout << "\nlargest batch that fits as configured: " << fit->max_batch << "\n";
  }
}

}  // namespace

void RegisterAdviseCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("advise", "which single change (in-place, expandable segments, batch, ...) saves the most memory");
  AddCommon(cmd, args.get(), false);
  cmd->add_option("--max-batch", args->max_batch, "upper end of the fit search")->capture_default_str();
  cmd->callback([args] { Advise(*args); });
}

void RegisterSweepCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "simulate every combination of the given options, in parallel");
  AddCommon(cmd, args.get(), true);
  cmd->add_flag("--csv", args->csv, "CSV output (bytes as integers)");
  cmd->add_option("--threads", args->threads, "worker threads (0 = all cores); output does not depend on it");
  cmd->callback([args] { Sweep(*args); });
}

void RegisterFitCommand(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("fit", "the largest batch that fits a device (--gpu or --capacity)");
  AddCommon(cmd, args.get(), false);
  cmd->add_option("--max-batch", args->max_batch, "upper end of the search")->capture_default_str();
  cmd->callback([args] { Fit(*args); });
}

}  // namespace memsim::cli
