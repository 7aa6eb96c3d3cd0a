// memsim._core: the pybind11 binding behind the Python package memsim (python/memsim/,
// docs/python.md). It has no logic of its own: options are parsed by the CLI's one option spec
// (sim/options/options.h) from the argument vector the Python layer builds out of keyword
// arguments, every number comes from RunPipeline / RunSweep / FitBatch / Advise, and every
// rendering from the typed reports (ToJson, ToText, HtmlTimeline, ChromeTrace, ToPickle), so
// Python and `memsim run/sweep/fit/advise` give the same bytes. The GIL is released while C++
// simulates.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>

#include "lib/autodiff/optimizer.h"
#include "lib/io/graph_json.h"
#include "lib/util/check.h"
#include "sim/version.h"
#include "sim/advise.h"
#include "sim/gpus.h"
#include "sim/options/config_file.h"
#include "sim/options/options.h"
#include "sim/options/parse_error.h"
#include "sim/options/plan_options.h"
#include "sim/report/plan_report.h"
#include "sim/report/replay_report.h"
#include "sim/replay/snapshot.h"
#include "sim/pipeline.h"
#include "sim/ranks.h"
#include "sim/report/rank_report.h"
#include "sim/report/memviz.h"
#include "sim/report/run_report.h"
#include "sim/report/sweep_report.h"
#include "sim/report/timeline.h"
#include "sim/report/timeline_table.h"
#include "sim/fit.h"
#include "sim/sweep.h"

namespace py = pybind11;

namespace memsim::python {
namespace {

// The exception classes, created once in the module init (intentionally never released: they
// live as long as the interpreter).
PyObject* g_error = nullptr;         // memsim.Error
PyObject* g_graph_error = nullptr;   // memsim.GraphError: a bad graph (file and JSON pointer)
PyObject* g_option_error = nullptr;  // memsim.OptionError (a ValueError): a bad option value
PyObject* g_snapshot_error = nullptr;  // memsim.SnapshotError (a ValueError): a snapshot that cannot be replayed

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

template <typename T>
T ValueOr(Result<T> r, PyObject* type) {
  if (!r.ok()) Raise(type, r.status().message());
  return std::move(r).value();
}

/// Runs |f| with the GIL released (pure C++ that touches no Python object).
template <typename F>
auto WithoutGil(F f) {
  py::gil_scoped_release nogil;
  return f();
}

/// A parsed graph, shared read-only by every run, sweep and report made from it.
struct GraphHandle {
  std::shared_ptr<const Graph> g;
};

GraphHandle MakeHandle(Result<Graph> r) {
  return GraphHandle{std::make_shared<const Graph>(ValueOr(std::move(r), g_graph_error))};
}

/// An error of the pipeline: a GraphError when it names a place in the graph file ("file: /ops/3:
/// ..."), else a bad option (unknown optimizer, a --freeze glob matching nothing, ...).
[[noreturn]] void RaisePipelineError(const Graph& g, const Status& s) {
  const bool in_graph = s.message().rfind(g.source + ": /", 0) == 0;
  Raise(in_graph ? g_graph_error : g_option_error, s.message());
}

/// The CLI's option spec applied to |args| (`--batch=8`, `--optimizer=adam`, ...; the Python
/// layer builds them from keyword arguments): the same checks and messages as the command line.
cli::ConfigOptions ParseOptions(std::vector<std::string> args, bool lists) {
  CLI::App app{"memsim"};
  cli::ConfigOptions options;
  options.Bind(&app, lists);
  cli::GuardIntegerText(&app);
  std::vector<std::string> notes;  // --config FILE, as the CLI expands it
  args = ValueOr(cli::ExpandConfigFiles(args, &notes), g_option_error);
  for (const std::string& n : notes)
    if (PyErr_WarnEx(PyExc_UserWarning, n.c_str(), 1) < 0) throw py::error_already_set();
  args.insert(args.begin(), "graph");  // the positional the CLI reads the graph from
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    Raise(g_option_error, cli::ParseErrorMessage(app, e));
  }
  return options;
}

RunConfig SingleConfig(const std::vector<std::string>& args, const char* command) {
  return ValueOr(ParseOptions(args, /*lists=*/false).Single(command), g_option_error);
}

/// The graph |args| run (`lora=...`: its LoRA rewrite, as the CLI's --lora), sharing |graph|
/// when they change nothing.
GraphHandle Adapted(const GraphHandle& graph, const std::vector<std::string>& args, bool lists) {
  cli::ConfigOptions o = ParseOptions(args, lists);
  if (o.lora.empty() && o.quantize_base.empty() && o.fp8.empty()) return graph;
  return GraphHandle{std::make_shared<const Graph>(ValueOr(o.Adapt(*graph.g), g_option_error))};
}

/// Whether the run can record block placement for the memory_viz export (the caching model
/// without expandable segments; SimulateAllocator refuses the others).
bool CanRecordPlacement(const AllocatorOptions& a) {
  if (a.model != AllocatorModel::kCaching) return false;
  Result<AllocatorConfig> conf = ParseAllocConf(a.alloc_conf);
  return conf.ok() && !conf->expandable_segments;
}

/// One simulated configuration: what `memsim run` computes, kept for its renderings.
struct Run {
  GraphHandle graph;
  RunConfig config;
  RunResult result;
  int top = 10;
  std::optional<RanksReport> ranks;  ///< several ranks: every distinct one (as `memsim run`)
  std::vector<RankRun> other_ranks;  ///< the distinct ranks after rank 0's (the page's panels)
  std::vector<int> first_ranks;      ///< the ranks |result| stands for

  const Graph& g() const { return *graph.g; }
  RunReport Report() const {
    RunReport r = MakeRunReport(g(), config, result, top);
    r.ranks = ranks;
    return r;
  }
  std::string Json() const { return ToJson(Report()).dump(2) + "\n"; }  // as `memsim run --json` prints it
  std::string Text() const { return ToText(Report()); }
  std::string Html() const {  // as `memsim run --timeline x.html` writes it: a panel per distinct rank
    std::vector<TimelinePanel> panels = PanelsOf(g(), config, other_ranks);
    panels.insert(panels.begin(), PanelOf(g(), config, first_ranks, result));
    return HtmlTimeline(g(), panels, top);
  }
  std::string ChromeTraceText() const {  // as `memsim run --timeline x.json` writes it
    return memsim::ChromeTraceText(g(), result.sim.events, result.sim.peak, 1 << 20,
                                   LevelsOf(g(), result, config.alloc.capacity_bytes));
  }
  py::bytes MemoryViz() const {
    if (!result.alloc.placement)
      Raise(g_option_error, "the memory_viz export needs the caching allocator without expandable_segments");
    return py::bytes(ToPickle(MemoryVizSnapshot(g(), result.sim.events, *result.alloc.placement)));
  }
  py::dict Timeline() const;
};

template <typename T>
py::array_t<T> Array(const std::vector<T>& v) {
  return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
}

template <typename E>
py::array_t<uint8_t> Codes(const std::vector<E>& v) {
  std::vector<uint8_t> codes(v.size());
  std::transform(v.begin(), v.end(), codes.begin(), [](E e) { return static_cast<uint8_t>(e); });
  return Array(codes);
}

py::dict Run::Timeline() const {
  AllocatorOptions ao = EffectiveAllocatorOptions(config, result);  // as the pipeline ran it
  TimelineTable t = ValueOr(WithoutGil([&] { return MakeTimelineTable(g(), result.sim.events, ao); }),
                            g_option_error);
  py::dict d;
  d["kind"] = Codes(t.kind);
  d["phase"] = Codes(t.phase);
  d["category"] = Codes(t.category);
  d["tensor"] = t.tensor;
  d["op"] = t.op;
  d["module"] = t.module;
  d["bytes"] = Array(t.bytes);
  d["live"] = Array(t.live);
  d["allocated"] = Array(t.allocated);
  d["reserved"] = Array(t.reserved);
  d["allocator_rows"] = t.allocator_rows;
  return d;
}

std::shared_ptr<Run> RunGraph(const GraphHandle& given, const std::vector<std::string>& args, bool explain,
                              int top) {
  if (top < 0) Raise(g_option_error, "top=" + std::to_string(top) + ": expected 0 or more (0 lists none)");
  auto run = std::make_shared<Run>();
  const GraphHandle graph = Adapted(given, args, /*lists=*/false);
  run->graph = graph;
  run->top = top;
  run->config = SingleConfig(args, "run");
  run->config.sim.explain = explain;
  run->config.alloc.record_placement = CanRecordPlacement(run->config.alloc);
  run->config.workspace_range = true;  // as `memsim run` does
  // Several ranks: rank 0's run is the report's, every distinct rank is listed (sim/ranks.h).
  Result<std::vector<RankRun>> r = WithoutGil([&] { return RunRanks(*graph.g, run->config); });
  if (!r.ok()) RaisePipelineError(*graph.g, r.status());
  if (run->config.sim.parallel.enabled()) run->ranks = MakeRanksReport(*graph.g, run->config, *r);
  run->first_ranks = r->front().ranks;
  run->result = std::move(r->front().result);
  run->other_ranks.assign(std::make_move_iterator(r->begin() + 1), std::make_move_iterator(r->end()));
  return run;
}

constexpr size_t kMaxConfigurations = 1000000;  // as `memsim sweep`

/// `memsim sweep`: {"json", "csv", "text"} of the table, simulated in parallel without the GIL.
py::dict Sweep(const GraphHandle& given, const std::vector<std::string>& args, int threads) {
  const GraphHandle graph = Adapted(given, args, /*lists=*/true);
  SweepSpec spec = ValueOr(ParseOptions(args, /*lists=*/true).Spec(), g_option_error);
  size_t n = ValueOr(spec.Count(kMaxConfigurations), g_option_error);
  // The CLI's path: compiled steps shared by the configurations, size schedules (Note [Size schedule]).
  std::vector<SweepRow> rows;
  rows.reserve(n);
  Status s = WithoutGil([&] {
    return StreamSweep(*graph.g, spec, n, SweepSlice{}, threads, [&](size_t, const SweepRow& r) {
      rows.push_back(r);
      return Status::OK();
    });
  });
  if (!s.ok()) RaisePipelineError(*graph.g, s);
  SweepTable table{graph.g->name, &spec, std::move(rows)};
  py::dict d;
  d["json"] = ToJson(table).dump(2) + "\n";
  d["csv"] = ToText(table, /*csv=*/true);
  d["text"] = ToText(table, /*csv=*/false);
  return d;
}

/// `memsim fit [--search SYMBOL]`: {"json", "text", "max_batch"} (the largest value of |search|).
py::dict Fit(const GraphHandle& given, const std::vector<std::string>& args, int64_t max_batch, const std::string& search) {
  const GraphHandle graph = Adapted(given, args, /*lists=*/false);
  RunConfig base = SingleConfig(args, "fit");
  Result<FitAnswer> fit = WithoutGil([&] { return FitWithProposals(*graph.g, base, search, max_batch, 0); });
  if (!fit.ok()) RaisePipelineError(*graph.g, fit.status());
  FitReport report{graph.g->name, base.device.gpu, base.alloc.capacity_bytes, max_batch, std::move(fit->fit),
                   std::move(fit->proposals)};
  py::dict d;
  d["json"] = ToJson(report).dump(2) + "\n";
  d["text"] = ToText(report);
  d["max_batch"] = report.fit.max_batch;
  d["max_batch_at_top"] = report.fit.max_batch_at_top;
  return d;
}

/// `memsim advise`: {"json", "text"}.
py::dict AdviseGraph(const GraphHandle& given, const std::vector<std::string>& args, int threads, int64_t max_batch) {
  const GraphHandle graph = Adapted(given, args, /*lists=*/false);
  RunConfig base = SingleConfig(args, "advise");
  Result<AdviseReport> report = WithoutGil([&] { return Advise(*graph.g, base, threads, max_batch); });
  if (!report.ok()) RaisePipelineError(*graph.g, report.status());
  py::dict d;
  d["json"] = ToJson(*report).dump(2) + "\n";
  d["text"] = ToText(*report);
  return d;
}

/// `memsim plan` (docs/plan.md): {"json", "text", "html", "snippet"}; |args| are plan's flags
/// after GRAPH ("--gpus=8xH100-80GB", ...), checked by the same option spec as the command line.
py::dict PlanOf(const GraphHandle& graph, std::vector<std::string> args, const std::string& framework) {
  CLI::App app{"memsim plan"};
  cli::PlanArgs plan;
  plan.Bind(&app);
  cli::GuardIntegerText(&app);
  args.insert(args.begin(), "graph");
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    Raise(g_option_error, cli::ParseErrorMessage(app, e));
  }
  PlanOptions o = ValueOr(plan.Options(), g_option_error);
  PlanReport report;
  report.graph_path = graph.g->source.empty() ? "GRAPH.json" : graph.g->source;
  report.blocks = PlanModelOf(*graph.g).blocks;
  Result<PlanResult> r = WithoutGil([&] { return Plan(*graph.g, o); });
  if (!r.ok()) RaisePipelineError(*graph.g, r.status());
  report.result = std::move(*r);
  py::dict d;
  d["json"] = ToJson(report).dump(2) + "\n";
  d["text"] = ToText(report);
  d["html"] = ToHtml(report);
  d["snippet"] = py::none();
  if (!framework.empty() && report.result.chosen)
    d["snippet"] = ValueOr(PlanSnippet(report, report.result.front[*report.result.chosen], framework), g_option_error);
  return d;
}

/// `memsim replay`: {"json", "text"} of the snapshot file |source| (or, given |data|, of those
/// bytes, named |source|), replayed with |alloc_conf| (None: as recorded).
py::dict Replay(const std::string& source, const std::optional<py::bytes>& data,
                const std::optional<std::string>& alloc_conf, bool what_if) {
  const std::optional<std::string> bytes = data ? std::optional<std::string>(std::string(*data)) : std::nullopt;
  ReplayOptions opt;
  opt.what_if = what_if;
  if (alloc_conf) {
    if (Result<AllocatorConfig> c = ParseAllocConf(*alloc_conf); !c.ok())
      Raise(g_option_error, "alloc_conf: " + c.status().message());
    opt.alloc_conf = *alloc_conf;
  }
  Result<ReplayReport> r = WithoutGil([&]() -> Result<ReplayReport> {
    Result<MemorySnapshot> snap = bytes ? ParseSnapshot(*bytes) : LoadSnapshotFile(source);
    if (!snap.ok()) return bytes ? snap.status().WithPrefix(source) : snap.status();
    Result<ReplayReport> rep = ReplaySnapshot(*snap, opt);
    if (!rep.ok()) return rep.status().WithPrefix(source);
    return rep;
  });
  if (!r.ok()) Raise(g_snapshot_error, r.status().message());
  py::dict d;
  d["json"] = ReplayJson(source, *r).dump(2) + "\n";
  d["text"] = ReplayText(source, *r);
  return d;
}

py::dict Symbols(const Graph& g) {
  py::dict d;
  for (size_t s = 0; s < g.symbols.size(); ++s)
    d[py::str(g.symbols[s])] = g.symbol_defaults[s] ? py::object(py::int_(*g.symbol_defaults[s])) : py::none();
  return d;
}

PyObject* NewError(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  PyObject* type = PyErr_NewExceptionWithDoc((std::string("memsim.") + name).c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(type);
  return type;
}

template <typename E>
std::vector<std::string> Names(int n, std::string_view (*name)(E)) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.emplace_back(name(E(i)));
  return v;
}

void BindErrors(py::module_& m) {
  g_error = NewError(m, "Error", py::make_tuple(py::handle(PyExc_Exception)), "Base class of memsim's errors.");
  g_graph_error = NewError(m, "GraphError", py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError)),
                           "A graph that cannot be read or bound; the message names the file and JSON pointer.");
  g_option_error = NewError(m, "OptionError", py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError)),
                            "A bad option value; the message is the command line's (it names the CLI option).");
  g_snapshot_error = NewError(m, "SnapshotError", py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError)),
                              "A memory snapshot that cannot be read or replayed; the message names the file and "
                              "the key path or byte offset.");
  NewError(m, "ExportError", py::make_tuple(py::handle(g_error)),
           "An nn.Module the exporter cannot turn into a graph (unsupported ops are all listed).");
  // A bug in memsim (a failed MEMSIM_CHECK) or an exception that input should not reach: memsim.Error
  // with the cause, never an abort of the interpreter (lib/util/check.h).
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const InternalError& e) {
      PyErr_SetString(g_error, e.what());
    } catch (const std::length_error& e) {
      PyErr_SetString(g_error, (std::string("internal error: ") + e.what()).c_str());
    } catch (const std::out_of_range& e) {
      PyErr_SetString(g_error, (std::string("internal error: ") + e.what()).c_str());
    }
  });
}

}  // namespace

void BindModule(py::module_& m) {
  BindErrors(m);
  py::class_<GraphHandle>(m, "Graph", "A graph (docs/graph-format.md), parsed once and shared by every run.")
      .def_property_readonly("name", [](const GraphHandle& h) { return h.g->name; })
      .def_property_readonly("source", [](const GraphHandle& h) { return h.g->source; })
      .def_property_readonly("provenance", [](const GraphHandle& h) { return h.g->provenance; })
      .def_property_readonly("symbols", [](const GraphHandle& h) { return Symbols(*h.g); },
                             "symbol name -> default value (None: no default)")
      .def_property_readonly("num_ops", [](const GraphHandle& h) { return h.g->ops.size(); })
      .def_property_readonly("num_parameters", [](const GraphHandle& h) { return h.g->parameters.size(); },
                             "parameter tensors")
      .def("__repr__", [](const GraphHandle& h) {
        return "<memsim.Graph " + h.g->name + " (" + std::to_string(h.g->ops.size()) + " ops) from " + h.g->source + ">";
      });
  py::class_<Run, std::shared_ptr<Run>>(m, "Run", "One simulated configuration (the Python layer wraps it in Report).")
      .def("json", &Run::Json, "the `memsim run --json` document")
      .def("text", &Run::Text, "the `memsim run` text report")
      .def("html", &Run::Html, "the page `memsim run --timeline x.html` writes")
      .def("chrome_trace", &Run::ChromeTraceText, "the Chrome trace `memsim run --timeline x.json` writes")
      .def("memory_viz", &Run::MemoryViz, "the pickle `memsim run --timeline x.pickle` writes")
      .def("events_text", [](const Run& r) { return EventsText(r.result.sim.events); }, "`memsim run --events`")
      .def("timeline", &Run::Timeline, "the timeline table's columns")
      .def_property_readonly("peak_event", [](const Run& r) { return r.result.sim.peak.peak_event; })
      .def_property_readonly("oom_event",
                             [](const Run& r) -> py::object {
                               if (!r.result.alloc.oom) return py::none();
                               return py::int_(r.result.alloc.oom->event_index);
                             })
      .def_property_readonly("fragmentation_event",
                             [](const Run& r) { return r.result.alloc.fragmentation.event_index; })
      .def_property_readonly("graph", [](const Run& r) { return r.graph; });
  m.def("load_graph", [](const std::string& path) { return MakeHandle(LoadGraph(path)); }, py::arg("path"),
        "Reads a graph file; GraphError names the file and JSON pointer.");
  m.def("parse_graph", [](const std::string& text, const std::string& source) { return MakeHandle(ParseGraph(text, source)); },
        py::arg("text"), py::arg("source"), "Parses graph-file text; |source| names it in messages.");
  m.def("run", &RunGraph, py::arg("graph"), py::arg("args"), py::arg("explain") = false, py::arg("top") = 10);
  m.def("sweep", &Sweep, py::arg("graph"), py::arg("args"), py::arg("threads") = 0);
  m.def("fit", &Fit, py::arg("graph"), py::arg("args"), py::arg("max_batch") = 65536, py::arg("search") = "batch");
  m.def("advise", &AdviseGraph, py::arg("graph"), py::arg("args"), py::arg("threads") = 0,
        py::arg("max_batch") = 65536);
  m.def("replay", &Replay, py::arg("source"), py::arg("data") = py::none(), py::arg("alloc_conf") = py::none(),
        py::arg("what_if") = true);
  m.def("plan", &PlanOf, py::arg("graph"), py::arg("args"), py::arg("framework") = "");
  m.attr("PHASES") = Names<Phase>(kNumPhases, PhaseName);
  m.attr("CATEGORIES") = Names<Category>(kNumCategories, CategoryName);
  m.attr("KINDS") = std::vector<std::string>{"alloc", "free"};
  m.attr("GPUS") = GpuNames();
  m.attr("__version__") = kMemsimVersion;
  m.attr("OPTIMIZERS") = OptimizerNames();
}

}  // namespace memsim::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "memsim's C++ pipeline (use the package memsim, docs/python.md)";
  memsim::python::BindModule(m);
}
