// torch.compile on/off (lib/ir/compile_mode.h): the compiled export's eager twin.
#include "lib/ir/compile_mode.h"

#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "sim/advise.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::Opts;

// A compiled region (y = x @ w.T, as in tests/ops/compiled_rules_test.cc) and, in the `compiled`
// section, the same model's eager ops as the exporter writes them (loss included).
const char* kRegion = R"("inputs": [{"name": "x", "shape": [4, 8]}],
    "parameters": [{"name": "w", "shape": [8, 8]}],
    "ops": [{"op": "compiled", "name": "region", "inputs": ["w", "x"], "outputs": ["y"], "attrs": {
               "fwd_bytes": [128, 128, 128], "fwd_names": "fwd.buf0 fwd.buf1 fwd.buf2",
               "fwd_program": "A0 A1 F0 A2", "fwd_outputs": [2], "saved": "i1 b1",
               "bwd_bytes": [128, 256], "bwd_names": "bwd.buf0 bwd.buf1", "bwd_program": "A0 G A1 R1 F0",
               "bwd_grads": [1, -1], "input_bytes": [256, 128], "out0_shape": [4, 8], "out0_dtype": "float32"}},
            {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";

std::string WithEager(const std::string& eager_ops) {
  return std::string(kRegion) + R"(, "compiled": {"backend": "inductor", "regions": 1, "eager_ops": )" + eager_ops + "}";
}

const char* kEagerOps = R"([{"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]},
                           {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}])";

TEST(CompileModeTest, TheExportsEagerOpsAreTheTwin) {
  Graph g = testing::ParseBody(WithEager(kEagerOps));
  ASSERT_TRUE(g.compile_twin);
  EXPECT_TRUE(HasCompiledRegions(g));
  EXPECT_FALSE(HasCompiledRegions(*g.compile_twin));
  EXPECT_EQ(g.compile_twin->ops.size(), 2u);
  EXPECT_EQ(g.compile_twin->ops[0].kind, OpKind::kLinear);
}

TEST(CompileModeTest, OffRunsTheEagerOpsAndOnTheRegionsAgain) {
  Graph g = testing::ParseBody(WithEager(kEagerOps));
  auto same = SelectCompile(g, true);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(HasCompiledRegions(*same));
  auto eager = SelectCompile(g, false);
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  EXPECT_FALSE(HasCompiledRegions(*eager));
  ASSERT_TRUE(eager->compile_twin);  // the regions stay one rewrite away
  auto back = SelectCompile(*eager, true);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(HasCompiledRegions(*back));
  EXPECT_EQ(back->ops[0].attrs.GetString("fwd_program", ""), "A0 A1 F0 A2");
  // the two run as themselves: the region's buffers, or the eager linear's output
  auto compiled = testing::SimulateOk(*back, Opts("cpu"));
  auto eager_run = testing::SimulateOk(*eager, Opts("cpu"));
  EXPECT_EQ(testing::AllocatedContaining(compiled.events, "region:fwd.buf1"), 128);
  EXPECT_EQ(testing::AllocatedContaining(eager_run.events, "region:"), 0);
}

TEST(CompileModeTest, NamesTheExportThatRecordsTheOtherForm) {
  auto eager_only = SelectCompile(testing::ParseBody(R"("inputs": [{"name": "x", "shape": [4]}],
      "ops": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}])"), true);
  ASSERT_FALSE(eager_only.ok());
  EXPECT_NE(eager_only.status().message().find("has no compiled regions: export the model with "
                                               "`tools/export_torch.py MODEL --compile`"),
            std::string::npos) << eager_only.status().message();
  auto old_export = SelectCompile(testing::ParseBody(kRegion), false);
  ASSERT_FALSE(old_export.ok());
  EXPECT_NE(old_export.status().message().find("records no eager op list"), std::string::npos);
}

TEST(CompileModeTest, ABadEagerOpIsNamedWhereItIs) {
  auto r = ParseGraph(testing::GraphDoc(WithEager(R"([{"op": "nope", "inputs": ["x"], "outputs": ["y"]}])")), "g.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/compiled/eager_ops/0/op"), std::string::npos) << r.status().message();
}

TEST(CompileModeTest, AdviseProposesTheOtherForm) {
  Graph g = testing::ParseBody(WithEager(kEagerOps));
  auto find = [](const std::vector<Change>& c, const std::string& prefix) -> const Change* {
    for (const Change& x : c)
      if (x.what.starts_with(prefix)) return &x;
    return nullptr;
  };
  const Change* eager = find(CandidateChanges(g), "run eager");
  ASSERT_NE(eager, nullptr);
  RunConfig base, changed = base;
  std::vector<std::string> args;
  EXPECT_TRUE(eager->apply(base, &changed, &args));
  EXPECT_EQ(args, (std::vector<std::string>{"--compile", "off"}));
  auto rewritten = eager->rewrite(g);
  ASSERT_TRUE(rewritten.ok());
  EXPECT_FALSE(HasCompiledRegions(*rewritten));
  const Change* compile = find(CandidateChanges(*rewritten), "compile with torch.compile");
  ASSERT_NE(compile, nullptr);
  EXPECT_TRUE(compile->apply(base, &changed, &args));
  EXPECT_EQ(args, (std::vector<std::string>{"--compile", "on"}));
  EXPECT_EQ(find(CandidateChanges(testing::ParseBody(kRegion)), "run eager"), nullptr);  // no twin
  // autocast applies to the eager ops; a region runs in the dtypes it was compiled in
  EXPECT_EQ(find(CandidateChanges(g), "mixed precision"), nullptr);
  EXPECT_NE(find(CandidateChanges(*rewritten), "mixed precision"), nullptr);
}

}  // namespace
}  // namespace memsim
