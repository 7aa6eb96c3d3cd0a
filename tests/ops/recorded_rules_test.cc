// A recorded op (lib/ops/rules_recorded.cc, Note [Recorded rules]): the forward and backward
// buffer programs the exporter measured, each buffer sized from the op's own tensors where the
// measurement matched one (so it scales with the batch) or with its fixed bytes; the saved set
// kept until backward; the run report's recorded-rules line and --strict's refusal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/report/recorded_report.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::ElementsAre;
using testing::Opts;

// x [batch, 8] -> linear (w [8, 8]) -> h -> recorded -> y -> mean. Forward: buffer 0 is y (o0), buffer
// 1 a scratch of h's elements x 1 byte freed in the op, buffer 2 a fixed 16-byte buffer that only the
// node holds (saved, with h). Backward: a temporary of h's bytes, then h's grad, then the saved
// buffer released (R1) before the temporary is freed.
std::string Recorded(const std::string& fwd_like = "o0 i0x1 -") {
  return R"("inputs": [{"name": "x", "shape": ["batch", 8]}], "symbols": {"batch": 4},
      "parameters": [{"name": "w", "shape": [8, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "recorded", "name": "rec", "inputs": ["h"], "outputs": ["y"], "attrs": {
                 "target": "aten.cumprod.default", "out0_shape": ["batch", 8], "out0_dtype": "float32",
                 "fwd_bytes": [0, 0, 16], "fwd_like": ")" + fwd_like + R"(", "fwd_program": "A0 A1 F1 A2",
                 "fwd_outputs": [0], "saved": "i0 b2",
                 "bwd_bytes": [0, 0], "bwd_like": "i0 i0", "bwd_program": "A0 A1 R1 F0", "bwd_grads": [1]}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

SimOptions WithBatch(int64_t batch) {
  SimOptions o = Opts("cpu");
  o.symbols["batch"] = batch;
  return o;
}

TEST(RecordedRuleTest, KeepsTheMeasuredSavedSet) {
  auto run = testing::Simulate(Recorded(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "rec"), ElementsAre("h", "extra:recorded buffer"));
}

TEST(RecordedRuleTest, SizesScaleWithTheOpsTensors) {
  for (int64_t batch : {4, 16}) {
    auto run = testing::Simulate(Recorded(), WithBatch(batch));
    ASSERT_TRUE(run.ok) << run.error;
    std::vector<int64_t> fwd;
    for (const auto& l : testing::Lives(run.r.events, "rec:recorded buffer")) fwd.push_back(l.bytes);
    EXPECT_THAT(fwd, ElementsAre(batch * 8, 16)) << "i0x1: h's elements x 1 byte; -: the fixed 16 bytes";
    auto y = testing::Buffer(run.r.events, "y");
    ASSERT_TRUE(y);
    EXPECT_EQ(run.r.events.buffers[*y].bytes, batch * 8 * 4);
  }
}

TEST(RecordedRuleTest, ReplaysTheForwardAndBackwardPrograms) {
  auto run = testing::Simulate(Recorded(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const EventStream& s = run.r.events;
  auto fwd = testing::Lives(s, "rec:recorded buffer");
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].free, Phase::kForward);   // A1 F1: scratch inside the op
  EXPECT_EQ(fwd[1].free, Phase::kBackward);  // saved: released by R1
  auto temps = testing::BuffersContaining(s, "recorded backward buffer");
  auto grad = testing::Buffer(s, "h.grad");
  auto saved = testing::BuffersContaining(s, "rec:recorded buffer");
  ASSERT_EQ(temps.size(), 1u);
  ASSERT_TRUE(grad);
  EXPECT_EQ(s.buffers[temps[0]].bytes, 4 * 8 * 4);
  // A0 (temp), A1 (h's grad), R1 (the saved buffer), F0 (the temp)
  EXPECT_LT(testing::AllocIndex(s, temps[0]), testing::AllocIndex(s, *grad));
  EXPECT_LT(testing::AllocIndex(s, *grad), testing::FreeIndex(s, saved[1]));
  EXPECT_LT(testing::FreeIndex(s, saved[1]), testing::FreeIndex(s, temps[0]));
}

TEST(RecordedRuleTest, RefusesAMalformedLikeToken) {
  auto run = testing::Simulate(Recorded("o0 i7 -"), Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("bad token \"i7\""), std::string::npos) << run.error;
  auto bad = testing::Simulate(Recorded("o0 i0x1"), Opts("cpu"));  // one token short
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("re-export the model"), std::string::npos) << bad.error;
}

TEST(RecordedRuleTest, ReportsTheRecordedOpsAndStrictRefusesThem) {
  auto run = testing::Simulate(Recorded(), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  auto rep = MakeRecordedRulesReport(run.graph, run.r);
  ASSERT_TRUE(rep);
  EXPECT_THAT(rep->ops, ElementsAre("rec (aten.cumprod.default)"));
  EXPECT_GE(rep->share_of_peak, 0.0);
  EXPECT_LE(rep->share_of_peak, 1.0);
  EXPECT_NE(ToText(*rep).find("recorded rules: 1 op (rec (aten.cumprod.default))"), std::string::npos);
  Status st = RefuseRecordedRules(run.graph);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--strict"), std::string::npos);
}

}  // namespace
}  // namespace memsim
