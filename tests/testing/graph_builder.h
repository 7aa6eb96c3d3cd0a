// Test helpers: build a Graph from a compact JSON body, simulate it, and query what the step
// saved, allocated and freed. Used by tests/ops, tests/autodiff, tests/io and tests/analysis.
#ifndef MEMSIM_TESTS_TESTING_GRAPH_BUILDER_H_
#define MEMSIM_TESTS_TESTING_GRAPH_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/stream/events.h"
#include "lib/ir/graph.h"
#include "sim/simulator.h"

namespace memsim::testing {

/// Wraps |body| (the inside of a JSON object without format/version/name, e.g.
/// `"inputs": [...], "ops": [...], "loss": "l"`) into a complete graph document.
std::string GraphDoc(const std::string& body);

/// Parses GraphDoc(|body|); fails the current test (ADD_FAILURE) and returns an empty graph on
/// error.
Graph ParseBody(const std::string& body);

/// The model zoo's graphs/|name|.json; fails the current test (ADD_FAILURE) and returns an empty
/// graph when it does not load.
Graph ZooGraph(const std::string& name);

/// A graph and one simulation of it.
struct Run {
  Graph graph;
  SimResult r;
  bool ok = false;
  std::string error;
};

SimOptions Opts(const std::string& profile = "cuda", const std::string& optimizer = "sgd",
                const std::string& torch = "2.13");
/// The pipeline tests' step: cpu, torch 2.13, AdamW, no in-place activations, --mesh pp=|pp|
/// (world |pp|) under |schedule| with |microbatches|, batch |batch| and seq |seq|.
SimOptions PipelineOpts(int pp, const std::string& schedule, int microbatches, int64_t batch, int64_t seq);

/// Parses and simulates; on error |ok| is false and |error| holds the message.
Run Simulate(const std::string& body, const SimOptions& opt = Opts());
/// Simulates |g| (a failure is a test failure) and checks the event stream's invariants.
SimResult SimulateOk(const Graph& g, const SimOptions& opt);

/// One tensor an op's autograd node keeps for backward.
struct SavedItem {
  std::string name;   ///< tensor name (input/output), or "extra:<label>"
  int64_t bytes = 0;  ///< bytes of its storage
  bool leaf = false;  ///< a parameter, buffer or input (no new activation memory)
};

/// What the node of op |op_name| saves in |run| (empty when no node exists), from the op rule
/// evaluated with the requires-grad flags of the run.
std::vector<SavedItem> SavedBy(const Run& run, const std::string& op_name);
std::vector<std::string> SavedNames(const Run& run, const std::string& op_name);
/// Bytes of the non-leaf storages it saves (distinct storages).
int64_t SavedActivationBytes(const Run& run, const std::string& op_name);

/// One allocation of a buffer: its bytes and the phases of its alloc and of its free.
struct Life {
  int64_t bytes = 0;
  Phase alloc = Phase::kSetup, free = Phase::kSetup;
  bool freed = false;
};
/// The allocations of the buffers named |name|, in event order.
std::vector<Life> Lives(const EventStream& s, const std::string& name);
/// The bytes of each allocation of the tensor |name| in |run|'s event stream, in order.
std::vector<int64_t> AllocBytes(const Run& run, const std::string& name);
/// The bound sizes of the tensor |name| of |run| (a test failure, and empty, when it has none).
std::vector<int64_t> SizesOf(const Run& run, const std::string& name);

/// Buffer ids whose name equals |name|.
std::vector<uint32_t> BuffersNamed(const EventStream& s, const std::string& name);
/// Buffer ids whose name contains |part|.
std::vector<uint32_t> BuffersContaining(const EventStream& s, const std::string& part);
/// The single buffer named |name| (fails the test if there is not exactly one).
std::optional<uint32_t> Buffer(const EventStream& s, const std::string& name);
/// Index of the alloc / free event of buffer |b| (-1 if none).
int AllocIndex(const EventStream& s, uint32_t b);
int FreeIndex(const EventStream& s, uint32_t b);
/// The event freeing |b|, or nullptr.
const MemEvent* FreeEvent(const EventStream& s, uint32_t b);

/// Live bytes after the last event of phase |p| (setup: before the first forward event).
int64_t LiveAfterPhase(const EventStream& s, Phase p);
/// Live bytes after event |i| (i = -1: before any event).
int64_t LiveAfter(const EventStream& s, int i);
/// Total bytes ever allocated with category |c| (optionally only in phase |p|).
int64_t AllocatedBytes(const EventStream& s, Category c, std::optional<Phase> p = std::nullopt);
/// Bytes of the allocations whose buffer name contains |part| (and how many, in |count|).
int64_t AllocatedContaining(const EventStream& s, const std::string& part, size_t* count = nullptr);
/// Bytes of category |c| live at the end of the step.
int64_t LiveAtEnd(const EventStream& s, Category c);
/// Number of buffers with category |c| allocated (with bytes > 0).
int CountAllocs(const EventStream& s, Category c, std::optional<Phase> p = std::nullopt);
/// Id of the op named |name| in |g|, or kNone.
OpId OpNamed(const Graph& g, const std::string& name);

/// A compact human-readable dump of the stream, for failure messages.
std::string Dump(const EventStream& s);

}  // namespace memsim::testing

#endif  // MEMSIM_TESTS_TESTING_GRAPH_BUILDER_H_
