// memsim run: simulate one training step of a graph and report its peak memory.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "sim/allocator/simulate.h"
#include "sim/gpus.h"
#include "sim/report.h"
#include "sim/memviz.h"
#include "sim/timeline.h"
#include "tools/memsim/cli_util.h"
#include "tools/memsim/commands.h"

namespace memsim::cli {
namespace {

struct RunArgs {
  CommonOptions common;
  std::string optimizer = "sgd";
  std::string step = "first";
  std::vector<std::string> freeze;
  int64_t freeze_params = 0;
  std::string inplace = "keep";
  bool json = false;
  int top = 10;
  std::string events_path;
  std::string timeline_path;
  bool explain = false;
  std::string allocator = "caching";
  std::string alloc_conf;
  std::string gpu;
  int64_t capacity = 0;
  int64_t conv_workspace = -1;
  int64_t cublas_workspace = -1;
};

/// The allocator part of the report, with the OOM record's tensor and op named.
nlohmann::ordered_json AllocatorJson(const Graph& g, const SimResult& r, const AllocatorReport& a) {
  nlohmann::ordered_json j = AllocatorReportToJson(a);
  if (a.oom) {
    const Buffer& b = r.events.buffers[a.oom->buffer];
    j["oom"]["tensor"] = b.name;
    j["oom"]["category"] = CategoryName(b.category);
    j["oom"]["op"] = a.oom->op < g.ops.size() ? g.ops[a.oom->op].name : "";
    j["oom"]["module"] = b.module;
    j["oom"]["phase"] = PhaseName(a.oom->phase);
  }
  return j;
}

std::string AllocatorText(const AllocatorReport& a, const nlohmann::ordered_json& aj) {
  std::ostringstream o;
  o << "allocator (" << AllocatorModelName(a.model) << (a.alloc_conf.empty() ? "" : ", " + a.alloc_conf) << "):\n"
    << "  peak allocated  " << HumanBytes(a.peak_allocated_bytes) << "  (torch.cuda.max_memory_allocated)\n"
    << "  peak reserved   " << HumanBytes(a.peak_reserved_bytes) << "  (torch.cuda.max_memory_reserved)\n";
  if (a.ideal_peak_bytes > 0) o << "  ideal packing   " << HumanBytes(a.ideal_peak_bytes) << "  (best-fit offsets in one arena, no caching; live peak: " + HumanBytes(a.peak_requested_bytes) + ")\n";
  if (a.capacity_bytes > 0) o << "  capacity        " << HumanBytes(a.capacity_bytes) << "\n";
  if (a.oom) {
    o << "\nOUT OF MEMORY: " << a.oom->info.message << "\n  triggered by " << aj["oom"].value("tensor", "")
      << " (" << aj["oom"].value("category", "") << ") in " << aj["oom"].value("phase", "");
    if (!aj["oom"].value("op", std::string()).empty()) o << " at op " << aj["oom"].value("op", "");
    o << "\n";
  } else if (a.capacity_bytes > 0) {
    o << "  fits: " << HumanBytes(a.capacity_bytes - a.peak_reserved_bytes) << " to spare\n";
  }
  return o.str();
}

void Run(const RunArgs& a) {
  Graph g = LoadOrFail(a.common.graph);
  SimOptions opt;
  a.common.ApplyTo(&opt);
  opt.optimizer = a.optimizer;
  opt.first_step = a.step == "first";
  opt.freeze_globs = a.freeze;
  opt.freeze_params = a.freeze_params;
  if (a.inplace != "keep") opt.inplace = a.inplace == "on";
  if (a.conv_workspace >= 0) opt.conv_workspace_bytes = a.conv_workspace;
  opt.explain = a.explain;
  if (a.cublas_workspace >= 0) opt.cublas_workspace_bytes = a.cublas_workspace;
  std::optional<GpuSpec> gpu;
  if (!a.gpu.empty()) {
    gpu = GpuOrFail(a.gpu);
    if (a.cublas_workspace < 0) opt.cublas_workspace_bytes = gpu->cublas_workspace_bytes;
  }
  auto r = Simulate(g, opt);
  if (!r.ok()) Fail(r.status());
  AllocatorOptions ao;
  auto model = ParseAllocatorModel(a.allocator);
  if (!model.ok()) Fail(model.status());
  ao.model = *model;
  ao.alloc_conf = a.alloc_conf;
  ao.capacity_bytes = a.capacity;
  if (gpu && a.capacity == 0) ao.capacity_bytes = gpu->memory_bytes;
  auto alloc = SimulateAllocator(r->events, ao);
  if (!alloc.ok()) Fail(alloc.status());
  if (!a.events_path.empty()) {
    std::ofstream out(a.events_path);
    if (!out) Fail(Status::InvalidArgument(a.events_path + ": cannot write"));
    out << EventsText(r->events);
  }
  if (!a.timeline_path.empty()) {
    std::ofstream out(a.timeline_path);
    if (!out) Fail(Status::InvalidArgument(a.timeline_path + ": cannot write"));
    if (a.timeline_path.ends_with(".html")) {
      out << HtmlTimeline(g, r->events, r->peak, a.top);
    } else if (a.timeline_path.ends_with(".pickle")) {
      auto snap = MemoryVizSnapshot(g, r->events, a.alloc_conf);
      if (!snap.ok()) Fail(snap.status());
      out << ToPickle(*snap);
    } else {
      out << ChromeTrace(g, r->events, r->peak, 1 << 20).dump() << "\n";
    }
  }
  nlohmann::ordered_json aj = AllocatorJson(g, *r, *alloc);
  if (a.json) {
    nlohmann::ordered_json j = RunReportJson(g, opt, *r, a.top);
    j["peak_allocated_bytes"] = alloc->peak_allocated_bytes;
    j["peak_reserved_bytes"] = alloc->peak_reserved_bytes;
    j["fragmentation"] = aj["fragmentation"];
    j["oom"] = aj.contains("oom") ? aj["oom"] : nlohmann::ordered_json();
    j["allocator"] = aj;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << RunReportText(g, opt, *r, a.top) << "\n" << AllocatorText(*alloc, aj);
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "simulate one training step and report its peak memory");
  args->common.Bind(cmd);
  cmd->add_option("--optimizer", args->optimizer, "none, sgd, momentum, nesterov, adam, adamw, adam_amsgrad, "
                                                  "adamw_amsgrad, adagrad, rmsprop, rmsprop_momentum, rmsprop_centered")
      ->capture_default_str();
  cmd->add_option("--step", args->step, "first (optimizer state created during the step) or steady")
      ->check(CLI::IsMember({"first", "steady"}))
      ->capture_default_str();
  cmd->add_option("--freeze", args->freeze, "freeze parameters whose name matches this glob (repeatable)");
  cmd->add_option("--freeze-params", args->freeze_params, "freeze the first K parameter tensors (registration order)");
  cmd->add_option("--inplace-activations", args->inplace, "on, off, or keep the graph's in-place flags")
      ->check(CLI::IsMember({"on", "off", "keep"}))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--explain", args->explain, "say what keeps each listed tensor alive at the peak (held_by)");
  cmd->add_option("--top", args->top, "how many tensors alive at the peak to list")->capture_default_str();
  cmd->add_option("--events", args->events_path, "write the allocate/free event stream to this file");
  cmd->add_option("--timeline", args->timeline_path,
                  "write memory over time: FILE.html (standalone page), FILE.json (Chrome trace for Perfetto) "
                  "or FILE.pickle (a _dump_snapshot() for pytorch.org/memory_viz)");
  cmd->add_option("--allocator", args->allocator, "caching (PyTorch's CUDA caching allocator), expandable, or ideal")
      ->check(CLI::IsMember({"caching", "expandable", "ideal"}))
      ->capture_default_str();
  cmd->add_option("--alloc-conf", args->alloc_conf, "PYTORCH_CUDA_ALLOC_CONF string, e.g. expandable_segments:True");
  cmd->add_option("--gpu", args->gpu, "device whose memory is the capacity (V100-16GB, A100-80GB, ...)");
  cmd->add_option("--capacity", args->capacity, "device capacity in bytes (overrides --gpu)");
  cmd->add_option("--conv-workspace", args->conv_workspace,
                  "cuDNN workspace bytes per convolution call (cuda profile; default 0)");
  cmd->add_option("--cublas-workspace", args->cublas_workspace,
                  "cuBLAS workspace bytes (cuda profile; default 8519680, 32 MiB with --gpu H100)");
  cmd->callback([args] { Run(*args); });
}

}  // namespace memsim::cli
