#include "tests/testing/graph_builder.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "lib/autodiff/step.h"
#include "lib/io/graph_json.h"
#include "lib/ops/op_rules.h"
#include "tests/testing/invariants.h"

namespace memsim::testing {

std::string GraphDoc(const std::string& body) {
  return R"({"format": "memsim-graph", "version": 1, "name": "t", )" + body + "}";
}

Graph ZooGraph(const std::string& name) {
  auto g = LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/" + name + ".json");
  if (!g.ok()) {
    ADD_FAILURE() << g.status().message();
    return Graph{};
  }
  return std::move(g).value();
}

Graph ParseBody(const std::string& body) {
  auto g = ParseGraph(GraphDoc(body), "test.json");
  if (!g.ok()) {
    ADD_FAILURE() << "ParseGraph failed: " << g.status().message();
    return Graph{};
  }
  return std::move(g).value();
}

SimOptions PipelineOpts(int pp, const std::string& schedule, int microbatches, int64_t batch, int64_t seq) {
  SimOptions o;
  o.symbols["batch"] = batch;
  o.symbols["seq"] = seq;
  o.optimizer = "adamw";
  o.profile = "cpu";
  o.torch = "2.13";
  o.inplace = false;
  o.parallel.mesh.pp = pp;
  o.parallel.world = pp;
  o.parallel.pp_schedule = schedule;
  o.parallel.pp_microbatches = microbatches;
  return o;
}

SimOptions Opts(const std::string& profile, const std::string& optimizer, const std::string& torch) {
  SimOptions o;
  o.profile = profile;
  o.torch = torch;
  o.optimizer = optimizer;
  return o;
}

SimResult SimulateOk(const Graph& g, const SimOptions& opt) {
  auto r = memsim::Simulate(g, opt);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return SimResult{};
  EXPECT_TRUE(VerifyEventStream(r->events).ok()) << VerifyEventStream(r->events).message();
  return std::move(r).value();
}

std::vector<Life> Lives(const EventStream& s, const std::string& name) {
  std::vector<Life> out;
  std::vector<int> index(s.buffers.size(), -1);
  for (const MemEvent& e : s.events) {
    if (s.buffers[e.buffer].name != name) continue;
    if (e.kind == EventKind::kAlloc) {
      index[e.buffer] = static_cast<int>(out.size());
      out.push_back(Life{static_cast<int64_t>(s.buffers[e.buffer].bytes), e.phase, e.phase, false});
    } else if (index[e.buffer] >= 0) {
      out[index[e.buffer]].free = e.phase;
      out[index[e.buffer]].freed = true;
    }
  }
  return out;
}

Run Simulate(const std::string& body, const SimOptions& opt) {
  Run run;
  auto g = ParseGraph(GraphDoc(body), "test.json");
  if (!g.ok()) {
    run.error = g.status().message();
    return run;
  }
  run.graph = std::move(g).value();
  auto r = memsim::Simulate(run.graph, opt);
  if (!r.ok()) {
    run.error = r.status().message();
    return run;
  }
  run.r = std::move(r).value();
  run.ok = true;
  return run;
}

OpId OpNamed(const Graph& g, const std::string& name) {
  for (OpId o = 0; o < g.ops.size(); ++o)
    if (g.ops[o].name == name) return o;
  return kNone;
}

std::vector<SavedItem> SavedBy(const Run& run, const std::string& op_name) {
  std::vector<SavedItem> items;
  const Graph& g = run.graph;
  OpId o = OpNamed(g, op_name);
  if (o == kNone) {
    ADD_FAILURE() << "no op named " << op_name;
    return items;
  }
  const BoundGraph& b = run.r.bound;
  std::vector<bool> rg = PropagateRequiresGrad(g, b, run.r.frozen);
  const Op& op = g.ops[o];
  const OpRule& rule = RuleFor(op.kind);
  RuleCtx c = MakeRuleCtx(g, b, run.r.profile, o, &rg);
  if (!rule.forward || !c.rg.any()) return items;
  FwdPlan plan;
  rule.forward(c, &plan);
  for (const SavedRef& s : plan.saved) {
    SavedItem it;
    if (s.kind == SavedRef::kExtra) {
      it.name = "extra:" + std::string(plan.extras[s.index].label);
      it.bytes = plan.extras[s.index].bytes;
    } else {
      TensorId t = s.kind == SavedRef::kInput ? op.inputs[s.index] : op.outputs[s.index];
      it.name = g.tensors[t].name;
      it.bytes = b.metas[b.owner[t]].bytes();
      it.leaf = g.tensors[b.owner[t]].role != TensorRole::kActivation;
    }
    items.push_back(it);
  }
  return items;
}

std::vector<std::string> SavedNames(const Run& run, const std::string& op_name) {
  std::vector<std::string> names;
  for (const SavedItem& it : SavedBy(run, op_name)) names.push_back(it.name);
  return names;
}

int64_t SavedActivationBytes(const Run& run, const std::string& op_name) {
  int64_t total = 0;
  std::set<std::string> seen;
  for (const SavedItem& it : SavedBy(run, op_name))
    if (!it.leaf && seen.insert(it.name).second) total += it.bytes;
  return total;
}

std::vector<uint32_t> BuffersNamed(const EventStream& s, const std::string& name) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < s.buffers.size(); ++i)
    if (s.buffers[i].name == name) ids.push_back(i);
  return ids;
}

std::vector<uint32_t> BuffersContaining(const EventStream& s, const std::string& part) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < s.buffers.size(); ++i)
    if (s.buffers[i].name.find(part) != std::string::npos) ids.push_back(i);
  return ids;
}

std::optional<uint32_t> Buffer(const EventStream& s, const std::string& name) {
  auto ids = BuffersNamed(s, name);
  if (ids.size() != 1) {
    ADD_FAILURE() << "expected exactly one buffer named \"" << name << "\", found " << ids.size()
                  << "\n" << Dump(s);
    return std::nullopt;
  }
  return ids[0];
}

int AllocIndex(const EventStream& s, uint32_t b) {
  for (size_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].buffer == b && s.events[i].kind == EventKind::kAlloc) return static_cast<int>(i);
  return -1;
}

int FreeIndex(const EventStream& s, uint32_t b) {
  for (size_t i = 0; i < s.events.size(); ++i)
    if (s.events[i].buffer == b && s.events[i].kind == EventKind::kFree) return static_cast<int>(i);
  return -1;
}

const MemEvent* FreeEvent(const EventStream& s, uint32_t b) {
  int i = FreeIndex(s, b);
  return i < 0 ? nullptr : &s.events[i];
}

int64_t LiveAfter(const EventStream& s, int idx) {
  int64_t live = 0;
  for (int i = 0; i <= idx && i < static_cast<int>(s.events.size()); ++i)
    live += (s.events[i].kind == EventKind::kAlloc ? 1 : -1) * s.bytes(s.events[i]);
  return live;
}

int64_t LiveAfterPhase(const EventStream& s, Phase p) {
  int last = -1;
  for (size_t i = 0; i < s.events.size(); ++i)
    if (static_cast<int>(s.events[i].phase) <= static_cast<int>(p)) last = static_cast<int>(i);
  return LiveAfter(s, last);
}

int64_t AllocatedBytes(const EventStream& s, Category c, std::optional<Phase> p) {
  int64_t total = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kAlloc && s.buffers[e.buffer].category == c && (!p || e.phase == *p))
      total += s.bytes(e);
  return total;
}

int CountAllocs(const EventStream& s, Category c, std::optional<Phase> p) {
  int n = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kAlloc && s.buffers[e.buffer].category == c && (!p || e.phase == *p)) ++n;
  return n;
}

int64_t AllocatedContaining(const EventStream& s, const std::string& part, size_t* count) {
  int64_t bytes = 0;
  size_t n = 0;
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kAlloc && s.buffers[e.buffer].name.find(part) != std::string::npos) {
      bytes += s.bytes(e);
      ++n;
    }
  if (count) *count = n;
  return bytes;
}

int64_t LiveAtEnd(const EventStream& s, Category c) {
  int64_t live = 0;
  for (const MemEvent& e : s.events)
    if (s.buffers[e.buffer].category == c) live += (e.kind == EventKind::kAlloc ? 1 : -1) * s.bytes(e);
  return live;
}

std::string Dump(const EventStream& s) {
  std::ostringstream os;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const MemEvent& e = s.events[i];
    const auto& b = s.buffers[e.buffer];
    os << i << " " << PhaseName(e.phase) << " " << (e.kind == EventKind::kAlloc ? "A " : "F ") << b.name
       << " " << b.bytes << " [" << CategoryName(b.category) << "] op=" << static_cast<int64_t>(e.op == kNoOp ? -1 : e.op)
       << "\n";
  }
  return os.str();
}

std::vector<int64_t> AllocBytes(const Run& run, const std::string& name) {
  std::vector<int64_t> out;
  for (const auto& l : Lives(run.r.events, name)) out.push_back(l.bytes);
  return out;
}

std::vector<int64_t> SizesOf(const Run& run, const std::string& name) {
  TensorId t = run.graph.FindTensor(name);
  EXPECT_NE(t, kNone) << name;
  return t == kNone ? std::vector<int64_t>{} : run.r.bound.metas[t].sizes;
}

}  // namespace memsim::testing
