#include "sim/report/run_report.h"

#include "lib/ir/fp8.h"
#include "sim/report/setup_summary.h"

#include <algorithm>

#include <cstdio>
#include <sstream>

#include "sim/report/figures_report.h"
#include "sim/report/format.h"
#include "lib/ir/fp8.h"
#include "sim/report/setup_summary.h"

namespace memsim {
namespace {

std::string OpLabel(const Graph& g, uint32_t op) {
  if (op == kNoOp || op >= g.ops.size()) return "";
  return g.ops[op].name;
}

std::vector<TensorAtPeak> TopTensors(const Graph& g, const RunResult& r, int top) {
  std::vector<TensorAtPeak> tops;
  const SimResult& s = r.sim;
  for (size_t i = 0; i < s.peak.live_at_peak.size() && static_cast<int>(i) < top; ++i) {
    uint32_t id = s.peak.live_at_peak[i];
    const Buffer& b = s.events.buffers[id];
    TensorAtPeak t{b.name, b.bytes, b.category, OpLabel(g, b.op), b.module, {}, false};
    for (const Retention& ret : s.at_peak)
      if (ret.buffer == id) {
        t.held_by = ret.held_by;
        t.explained = true;
      }
    tops.push_back(std::move(t));
  }
  return tops;
}

/// The allocator's report; its capacity is the allocator's (the device's less the context).
nlohmann::ordered_json AllocatorJson(const RunReport& r) {
  nlohmann::ordered_json a = AllocatorReportToJson(r.allocator), j;
  for (auto& [k, v] : a.items()) {
    if (k == "oom") continue;  // oom_detail
    j[k == "capacity_bytes" ? "allocator_capacity_bytes" : k] = v;
  }
  return j;
}

/// The allocator's OOM record with its tensor named (null without an OOM).
nlohmann::ordered_json OomDetailJson(const RunReport& r) {
  nlohmann::ordered_json a = AllocatorReportToJson(r.allocator);
  if (!r.oom || !a.contains("oom") || a["oom"].is_null()) return nullptr;
  nlohmann::ordered_json j = a["oom"];
  j["op"] = r.oom->op;
  j["tensor"] = r.oom->tensor;
  j["category"] = r.oom->category;
  j["module"] = r.oom->module;
  j["phase"] = r.oom->phase;
  return j;
}

std::string AllocatorText(const RunReport& r) {
  const AllocatorReport& a = r.allocator;
  const MemoryFigures& f = r.figures;
  const std::string need = f.oom ? "would need " : "";
  std::ostringstream o;
  o << "allocator (" << AllocatorModelName(a.model)
    << (a.alloc_conf.empty() ? "" : ", " + r.alloc_conf_env + "=" + a.alloc_conf)
    << (f.oom ? ", without the capacity limit" : "") << "):\n"
    << "  peak allocated  " << need << HumanBytes(f.peak_allocated_bytes) << "  (torch.cuda.max_memory_allocated)\n"
    << "  peak reserved   " << need << HumanBytes(f.peak_reserved_bytes) << "  (torch.cuda.max_memory_reserved)\n";
  if (a.ideal_peak_bytes > 0)
    o << "  ideal packing   " << HumanBytes(a.ideal_peak_bytes)
      << "  (best-fit offsets in one arena, no caching; live peak: " + HumanBytes(a.peak_requested_bytes) + ")\n";
  if (a.capacity_bytes > 0)
    o << "  capacity        " << HumanBytes(a.capacity_bytes)
      << (!r.device.modelled                           ? ""
          : r.device.overhead.nccl.communicators.empty() ? "  (the device's, less the CUDA context and libraries)"
                                                         : "  (the device's, less the CUDA context, libraries and NCCL buffers)")
      << "\n";
  if (a.oom && r.oom) {
    o << "\nOUT OF MEMORY at op " << (r.oom->op.empty() ? "(none)" : r.oom->op) << " in " << r.oom->phase
      << ", allocating " << r.oom->tensor << " (" << r.oom->category << "); PyTorch would say:\n  "
      << a.oom->info.message << "\n";
  } else if (a.capacity_bytes > 0 && !r.device.modelled) {
    o << "  fits: " << HumanBytes(a.capacity_bytes - f.peak_reserved_bytes) << " to spare\n";
  }
  return o.str();
}

std::string DeviceText(const DeviceLevel& d, bool oom) {
  std::ostringstream o;
  const NcclBuffers& nccl = d.overhead.nccl;
  o << "device (what nvidia-smi shows; docs/device-memory.md):\n"
    << "  peak device used " << (oom ? "would need " : "") << HumanBytes(d.peak_device_bytes)
    << "  (peak reserved + " << HumanBytes(d.overhead.bytes - nccl.bytes)
    << " CUDA context and libraries" << (d.overhead.uses_cudnn_conv ? ", cuDNN convolutions included" : "")
    << (nccl.communicators.empty() ? "" : " + " + HumanBytes(nccl.bytes) + " NCCL buffers") << ")\n"
    << "  range            " << HumanBytes(d.low_bytes) << " - " << HumanBytes(d.high_bytes) << "\n"
    << "  context from     " << d.overhead.source << "\n";
  if (!nccl.communicators.empty()) {
    o << "  NCCL buffers     " << HumanBytes(nccl.bytes) << " (range " << HumanBytes(nccl.low) << " - "
      << HumanBytes(nccl.high) << "):";
    for (size_t i = 0; i < nccl.communicators.size(); ++i) {
      const NcclCommunicator& c = nccl.communicators[i];
      o << (i ? "," : "") << " " << c.name << " (" << c.ranks << " ranks, " << c.kind << ") " << HumanBytes(c.bytes);
    }
    o << "\n  NCCL from        " << nccl.source << "\n";
  }
  o << "  cuDNN workspaces " << d.workspace_policy << "\n";
  if (d.capacity_bytes <= 0) return o.str();
  o << "  capacity         " << HumanBytes(d.capacity_bytes) << "\n";
  switch (d.verdict) {
    case Verdict::kFits:
      o << "  verdict: fits (" << HumanBytes(d.capacity_bytes - d.high_bytes) << " to spare at the top of the range)\n";
      break;
    case Verdict::kDoesNotFit:
      o << "  verdict: does not fit (even the bottom of the range is over the capacity)\n";
      break;
    case Verdict::kUncertain:
      o << "  verdict: within the uncertainty (the capacity lies inside the range)\n";
      break;
    case Verdict::kNoCapacity:
      break;
  }
  return o.str();
}

nlohmann::ordered_json DeviceJson(const DeviceLevel& d) {
  nlohmann::ordered_json j;
  j["peak_device_used_bytes"] = d.peak_device_bytes;
  j["range_bytes"] = {d.low_bytes, d.high_bytes};
  const NcclBuffers& nccl = d.overhead.nccl;
  j["context_bytes"] = d.overhead.bytes - nccl.bytes;
  j["context_range_bytes"] = {d.overhead.low - nccl.low, d.overhead.high - nccl.high};
  j["context_source"] = d.overhead.source;
  if (!nccl.communicators.empty()) {  // Note [NCCL buffers]
    j["nccl_bytes"] = nccl.bytes;
    j["nccl_range_bytes"] = {nccl.low, nccl.high};
    nlohmann::ordered_json comms = nlohmann::ordered_json::array();
    for (const NcclCommunicator& c : nccl.communicators)
      comms.push_back({{"name", c.name}, {"ranks", c.ranks}, {"kind", c.kind}, {"peers", c.peers}, {"bytes", c.bytes},
                       {"range_bytes", {c.low, c.high}}});
    j["nccl_communicators"] = comms;
    j["nccl_source"] = nccl.source;
  }
  j["cudnn_convolutions"] = d.overhead.uses_cudnn_conv;
  j["cudnn_workspace"] = d.workspace_policy;
  j["capacity_bytes"] = d.capacity_bytes > 0 ? nlohmann::ordered_json(d.capacity_bytes) : nlohmann::ordered_json();
  j["verdict"] = d.capacity_bytes > 0 ? nlohmann::ordered_json(VerdictName(d.verdict)) : nlohmann::ordered_json();
  return j;
}

}  // namespace

namespace {

/// --dtype on a graph exported in another float dtype whose forward casts dtypes: the casts that
/// were no-ops at export (transformers' `.to(input_dtype)` after an fp32 upcast, RoPE's
/// `cos.to(x.dtype)`) left no op, so tensors they would cast keep the export's dtype.
std::string CastWarning(const Graph& g, const std::string& dtype) {
  auto floating = std::find_if(g.parameters.begin(), g.parameters.end(), [&](TensorId t) {
    const Dtype d = g.tensors[t].dtype;
    return d == Dtype::kFloat32 || d == Dtype::kFloat16 || d == Dtype::kBFloat16;
  });
  if (dtype.empty() || floating == g.parameters.end()) return "";
  const Dtype exported = g.recorded_dtype.value_or(g.tensors[*floating].dtype);
  const Dtype wanted = dtype == "bf16" ? Dtype::kBFloat16 : dtype == "fp16" ? Dtype::kFloat16 : Dtype::kFloat32;
  if (exported == wanted) return "";
  const bool casts = std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == OpKind::kToDtype; });
  if (!casts) return "";
  return "--dtype " + dtype + " on a graph exported in " + std::string(DtypeName(exported)) +
         " that casts dtypes: casts that were no-ops at export (e.g. .to(input_dtype) after an upcast) are not in "
         "it, so some tensors keep " + std::string(DtypeName(exported)) +
         ": export the model in that dtype (export_torch.py hf:...,dtype=" + dtype + ", or model.to(dtype) in your builder)";
}

/// DeepSpeed's ipg buffers when they hold a quarter or more of the peak (Note [ZeRO]): their
/// size is reduce_bucket_size, not the model's, so on a small model ZeRO-2 can need more than DDP.
std::string IpgBucketWarning(const SimResult& s, const ParallelOptions& p) {
  if (p.zero_stage < 2 || s.peak.peak_live_bytes <= 0) return "";
  int64_t ipg = 0;
  for (uint32_t b : s.peak.live_at_peak)
    if (s.events.buffers[b].name.rfind("ZeRO reduce bucket (ipg", 0) == 0) ipg += s.events.buffers[b].bytes;
  if (ipg * 4 < s.peak.peak_live_bytes) return "";
  return "DeepSpeed's reduce bucket (ipg) is " + HumanBytes(ipg) + ", " +
         std::to_string(static_cast<int>(100.0 * ipg / s.peak.peak_live_bytes)) + " % of the peak: it has reduce_bucket_size = " +
         std::to_string(p.zero_bucket_elements) + " elements whatever the model's size; a smaller --zero-bucket-size "
         "(e.g. 50000000) lowers the peak";
}

}  // namespace

RunReport MakeRunReport(const Graph& g, const RunConfig& c, const RunResult& r, int top) {
  const SimOptions& opt = c.sim;
  const SimResult& s = r.sim;
  RunReport rep;
  rep.model = g.name;
  rep.symbols = opt.symbols;
  // --batch is accepted for a graph without a batch symbol (sweeps over several graphs), but
  // does not apply: said, and not shown as a setting (one meaning per number).
  if (rep.symbols.count("batch") && g.FindSymbol("batch") == kNone) {
    rep.warnings.push_back("--batch " + std::to_string(rep.symbols.at("batch")) + " does not apply: " + g.name +
                           " has no batch symbol (its sizes were fixed at export, e.g. exported by running on the "
                           "CPU); re-export it at that batch (tools/export_torch.py --set batch=N)");
    rep.symbols.erase("batch");
  }
  rep.optimizer = opt.optimizer == "recorded" && g.optimizer ? "recorded (" + g.optimizer->name + ")" : opt.optimizer;
  rep.step = opt.first_step ? "first" : "steady";
  rep.profile = s.profile.name;
  rep.torch = s.profile.torch;
  rep.alloc_conf_env = s.profile.alloc_conf_env;
  if (auto exported = TorchReleaseFor(g.torch_version); exported && *exported != rep.torch)
    rep.warnings.push_back("the graph was exported under torch " + g.torch_version + " (rules of " + *exported +
                           ") and is simulated with --torch " + rep.torch +
                           ": re-export it under that release, or pass --torch " + *exported);
  if (std::string cast = CastWarning(g, opt.dtype); !cast.empty()) rep.warnings.push_back(cast);
  rep.inplace_activations = opt.inplace ? (*opt.inplace ? "on" : "off") : "keep";
  int64_t frozen = 0, trainable = 0;
  for (size_t k = 0; k < g.parameters.size(); ++k) {
    const TensorMeta& m = s.bound.metas[g.parameters[k]];
    rep.parameter_bytes += m.bytes();
    (s.frozen[k] ? frozen : trainable) += m.numel();
  }
  rep.frozen_parameters = frozen;
  rep.parameter_count = frozen + trainable;
  rep.trainable_parameters = trainable;
  rep.gpu = c.device.gpu;
  rep.figures = FiguresOf(g, r, c.alloc.capacity_bytes);
  rep.peak_op = OpLabel(g, s.peak.peak_op);
  rep.setup_bytes = s.peak.setup_bytes;
  rep.final_bytes = s.peak.final_bytes;
  rep.host_bytes = s.events.host_bytes;
  rep.phase_peaks = s.peak.phase_peaks;
  rep.breakdown_at_peak = s.peak.breakdown_at_peak;
  rep.top_tensors_at_peak = TopTensors(g, r, top);
  if (opt.explain)
    for (const Op& op : g.ops)
      if (auto b = RecomputedBuffers(op); !b.empty()) rep.recomputed.push_back({op.name, std::move(b)});
  rep.tensors_alive_at_peak = s.peak.live_at_peak.size();
  rep.recorded_rules = MakeRecordedRulesReport(g, s);
  if (std::string w = IpgBucketWarning(s, c.sim.parallel); !w.empty()) rep.warnings.push_back(w);
  rep.step_peaks = s.peak.step_peaks;
  rep.step_end_bytes = s.peak.step_end_bytes;
  rep.amp = c.sim.amp;
  rep.setup = NonDefaultSetup(c.sim);
  rep.steps = c.sim.steps;
  rep.dtype = c.sim.dtype;
  if (g.lora) rep.lora = g.lora->ToString();
  rep.lora_adapters = g.lora_adapters;
  if (g.quantized_base) rep.quantized_base = g.quantized_base->ToString();
  rep.fp8 = g.fp8;
  rep.fp8_linears = g.fp8_linears;
  rep.quantized_linears = g.quantized_linears;
  rep.allocator = r.alloc;
  rep.device = r.device;
  if (r.alloc.oom) {
    const Buffer& b = s.events.buffers[r.alloc.oom->buffer];
    rep.oom = OomReport{b.name, std::string(CategoryName(b.category)), OpLabel(g, r.alloc.oom->op), b.module,
                        std::string(PhaseName(r.alloc.oom->phase))};
  }
  return rep;
}

nlohmann::ordered_json ToJson(const RunReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  nlohmann::ordered_json cfg;
  for (const auto& [k, v] : r.symbols) cfg["symbols"][k] = v;
  cfg["optimizer"] = r.optimizer;
  cfg["step"] = r.step;
  cfg["profile"] = r.profile;
  cfg["torch"] = r.torch;
  cfg["inplace_activations"] = r.inplace_activations;
  cfg["frozen_parameters"] = r.frozen_parameters;
  if (!r.amp.empty()) cfg["amp"] = r.amp;
  if (!r.dtype.empty()) cfg["dtype"] = r.dtype;
  if (!r.lora.empty()) cfg["lora"] = {{"spec", r.lora}, {"adapters", r.lora_adapters}};
  if (!r.fp8.empty()) cfg["fp8"] = {{"spec", r.fp8}, {"linears", r.fp8_linears}};
  if (!r.quantized_base.empty())
    cfg["quantized_base"] = {{"spec", r.quantized_base}, {"linears", r.quantized_linears}};
  if (!r.setup.empty()) {
    nlohmann::ordered_json setup;
    for (const auto& [k, v] : r.setup) setup[k] = v;
    cfg["setup"] = setup;
  }
  j["config"] = cfg;
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  j["parameters"] = {{"count", r.parameter_count}, {"trainable", r.trainable_parameters}, {"bytes", r.parameter_bytes}};
  const nlohmann::ordered_json figures = FiguresJson(r.figures);  // named: items() refers to it
  for (auto& [k, v] : figures.items()) j[k] = v;
  j["peak_op"] = r.peak_op;
  j["setup_bytes"] = r.setup_bytes;
  j["final_bytes"] = r.final_bytes;
  if (r.host_bytes) j["host_bytes"] = r.host_bytes;
  j["phase_peaks"] = {{"forward", r.phase_peaks[int(Phase::kForward)]},
                      {"backward", r.phase_peaks[int(Phase::kBackward)]},
                      {"optimizer", r.phase_peaks[int(Phase::kOptimizer)]}};
  if (!r.step_peaks.empty()) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (size_t k = 0; k < r.step_peaks.size(); ++k)
      steps.push_back({{"step", k + 1}, {"peak_live_bytes", r.step_peaks[k]}, {"end_bytes", r.step_end_bytes[k]}});
    j["steps"] = steps;
  }
  nlohmann::ordered_json bd;
  for (int c = 0; c < kNumCategories; ++c) bd[std::string(CategoryName(Category(c)))] = r.breakdown_at_peak[c];
  j["breakdown_at_peak"] = bd;
  nlohmann::ordered_json tops = nlohmann::ordered_json::array();
  for (const TensorAtPeak& t : r.top_tensors_at_peak) {
    nlohmann::ordered_json tj = {{"name", t.name}, {"bytes", t.bytes}, {"category", CategoryName(t.category)},
                                 {"op", t.op}, {"module", t.module}};
    if (t.explained) tj["held_by"] = t.held_by;
    tops.push_back(tj);
  }
  j["top_tensors_at_peak"] = tops;
  if (!r.recomputed.empty()) {
    nlohmann::ordered_json rc = nlohmann::ordered_json::array();
    for (const RecomputedInRegion& region : r.recomputed)
      for (const RecomputedBuffer& b : region.buffers)
        rc.push_back({{"region", region.region}, {"buffer", b.buffer}, {"bytes", b.bytes}, {"nodes", b.nodes}});
    j["recomputed_in_backward"] = rc;
  }
  j["tensors_alive_at_peak"] = r.tensors_alive_at_peak;
  if (r.recorded_rules) j["recorded_rules"] = ToJson(*r.recorded_rules);
  nlohmann::ordered_json aj = AllocatorJson(r);
  j["fragmentation"] = aj["fragmentation"];
  j["oom_detail"] = OomDetailJson(r);
  j["allocator"] = aj;
  if (r.device.modelled) j["device"] = DeviceJson(r.device);
  if (r.ranks) {
    j["world"] = r.ranks->world;
    j["parallel"] = r.ranks->scheme;
    j["ranks"] = ToJson(*r.ranks);
  }
  return j;
}

std::string ToText(const RunReport& r) {
  std::ostringstream o;
  if (std::string v = VerdictLine(r.figures, r.gpu); !v.empty()) o << v << "\n";
  for (const std::string& w : r.warnings) o << "warning: " << w << "\n";
  o << "memsim: " << r.model << "  (profile " << r.profile << ", torch " << r.torch << ", optimizer " << r.optimizer << ", "
    << (r.steps > 1 ? std::to_string(r.steps) + " steps from the " + r.step : r.step + " step");
  for (const auto& [k, v] : r.symbols) o << ", " << k << "=" << v;
  o << ")\n";
  if (!r.setup.empty()) {
    o << "setup:";
    for (const auto& [k, v] : r.setup) o << " " << k << "=" << v;
    o << "\n";
  }
  o << "parameters: " << r.parameter_count << " (" << r.trainable_parameters << " trainable), "
    << HumanBytes(r.parameter_bytes) << "\n";
  if (!r.lora.empty()) o << "lora: " << r.lora << " (" << r.lora_adapters << " adapted Linear modules, base model frozen)\n";
  if (!r.fp8.empty())
    o << "float8: " << r.fp8 << " (" << r.fp8_linears << " Linear modules as "
      << (IsTransformerEngine(r.fp8) ? "Transformer Engine te.Linear, modelled from its source" : "torchao Float8Linear") << ")\n";
  if (!r.quantized_base.empty())
    o << "quantized base: " << r.quantized_base << " (" << r.quantized_linears << " quantized Linear weights, frozen)\n";
  o << "\n";
  const int64_t live = r.figures.peak_live_bytes;
  o << "peak live memory: " << HumanBytes(live) << " (" << live << " bytes) in " << PhaseName(r.figures.peak_phase);
  if (!r.peak_op.empty()) o << " at " << r.peak_op;
  o << "\n  forward peak   " << HumanBytes(r.phase_peaks[int(Phase::kForward)])
    << "\n  backward peak  " << HumanBytes(r.phase_peaks[int(Phase::kBackward)])
    << "\n  optimizer peak " << HumanBytes(r.phase_peaks[int(Phase::kOptimizer)]) << "\n";
  if (r.host_bytes) o << "  host / unified memory " << HumanBytes(r.host_bytes) << " (outside the device's allocator)\n";
  o << "\n";
  if (!r.step_peaks.empty()) {
    o << "per step (peak live, live at its end):\n";
    for (size_t k = 0; k < r.step_peaks.size(); ++k)
      o << "  step " << (k + 1) << "  " << HumanBytes(r.step_peaks[k]) << " (" << r.step_peaks[k] << " bytes), end "
        << HumanBytes(r.step_end_bytes[k]) << "\n";
    o << "\n";
  }
  o << "at the peak, by category:\n";
  for (int c = 0; c < kNumCategories; ++c) {
    int64_t v = r.breakdown_at_peak[c];
    if (v == 0) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %-16s %12s  %5.1f %%\n", std::string(CategoryName(Category(c))).c_str(),
                  HumanBytes(v).c_str(), 100.0 * v / std::max<int64_t>(live, 1));
    o << buf;
  }
  if (r.recorded_rules) o << ToText(*r.recorded_rules);
  o << "\nlargest tensors alive at the peak:\n";
  for (const TensorAtPeak& t : r.top_tensors_at_peak) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %12s  %-16s %s\n", HumanBytes(t.bytes).c_str(),
                  std::string(CategoryName(t.category)).c_str(), t.name.c_str());
    o << buf;
    for (const std::string& h : t.held_by) o << std::string(32, ' ') << "held by: " << h << "\n";
  }
  if (!r.recomputed.empty()) o << "\nrecomputed in backward (torch.compile's partitioner; the buffers holding them):\n";
  for (const RecomputedInRegion& region : r.recomputed)
    for (const RecomputedBuffer& b : region.buffers) {
      std::string nodes;
      for (const std::string& n : b.nodes) nodes += (nodes.empty() ? "" : ", ") + n;
      char buf[256];
      std::snprintf(buf, sizeof buf, "  %12s  %s:%s  ", HumanBytes(b.bytes).c_str(), region.region.c_str(), b.buffer.c_str());
      o << buf << nodes << "\n";
    }
  o << "\n" << AllocatorText(r);
  if (r.device.modelled) o << "\n" << DeviceText(r.device, r.figures.oom);
  if (r.ranks) o << "\n" << ToText(*r.ranks);
  return o.str();
}

std::string EventsText(const EventStream& s) {
  std::ostringstream o;
  for (const MemEvent& e : s.events) {
    const Buffer& b = s.buffers[e.buffer];
    o << (e.kind == EventKind::kAlloc ? "A " : "F ") << PhaseName(e.phase) << " " << b.bytes << " " << b.name << " "
      << CategoryName(b.category) << "\n";
  }
  return o.str();
}

}  // namespace memsim
