// nn.DataParallel's loss on device 0 runs at the whole batch over the gathered outputs, and the
// gathered outputs' grad is scattered back (Note [DataParallel] in docs/op-rules.md).
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/simulator.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SimulateOk;

int64_t Allocated(const EventStream& s, const std::string& part, size_t* count = nullptr) {
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

/// The phase of the first free of a buffer named with |part|.
Phase FreedIn(const EventStream& s, const std::string& part) {
  for (const MemEvent& e : s.events)
    if (e.kind == EventKind::kFree && s.buffers[e.buffer].name.find(part) != std::string::npos) return e.phase;
  return Phase::kSetup;
}

SimOptions DataParallelMlp(int device) {
  SimOptions o;
  o.symbols["batch"] = 64;  // the whole batch: 16 per device
  o.optimizer = "adam";
  o.parallel.data_parallel = true;
  o.parallel.world = 4;
  o.parallel.rank = device;
  return o;
}

TEST(DataParallelLossTest, Device0HoldsTheWholeBatchGradOfTheGatheredOutputs) {
  Graph g = *LoadGraph(std::string(MEMSIM_SOURCE_DIR) + "/graphs/mlp.json");
  SimResult d0 = SimulateOk(g, DataParallelMlp(0));
  // cross_entropy's backward makes the grad of the [16, 10] fp32 logits; device 0's is the
  // whole batch's: the other 48 rows beside it, until the last linear has run backward.
  size_t n = 0;
  EXPECT_EQ(Allocated(d0.events, "DataParallel: whole-batch grad, other devices' part of _8", &n), 48 * 10 * 4);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(FreedIn(d0.events, "DataParallel: whole-batch grad"), Phase::kBackward);
  // The gathered outputs themselves, as before.
  EXPECT_EQ(Allocated(d0.events, "DataParallel: gathered outputs of the other devices"), 48 * 10 * 4);
  // The other devices compute no loss: nothing of the whole batch there.
  SimResult d1 = SimulateOk(g, DataParallelMlp(1));
  EXPECT_EQ(Allocated(d1.events, "DataParallel: whole-batch"), 0);
}

}  // namespace
}  // namespace memsim
