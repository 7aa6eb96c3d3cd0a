// Op rules of lib/ops/rules_llm.cc: what each saves with and without requires-grad on each
// input, output shapes/dtypes, and the temporaries of their backward per profile.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::SizesOf;

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::Opts;
using testing::SavedNames;


Dtype DtypeOf(const testing::Run& run, const std::string& name) {
  return run.r.bound.metas[run.graph.FindTensor(name)].dtype;
}

bool Aliases(const testing::Run& run, const std::string& a, const std::string& b) {
  return run.r.bound.owner[run.graph.FindTensor(a)] == run.r.bound.owner[run.graph.FindTensor(b)];
}

// x [4, 8] -> linear (w [16, 8], requires_grad |rg|) -> h [4, 16] -> <op> -> y -> mean -> loss.
std::string AfterLinear(const std::string& op, const std::string& attrs = "{}", bool rg = true) {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}],
      "parameters": [{"name": "w", "shape": [16, 8], "requires_grad": )" + std::string(rg ? "true" : "false") + R"(}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": ")" + op + R"(", "inputs": ["h"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

// ------------------------------------------------------------------------- unary math
TEST(LlmRuleTest, UnaryMathSavesResultOrSelfOnlyWithGrad) {
  struct Case { const char* op; const char* saved; } cases[] = {
      {"exp", "y"}, {"rsqrt", "y"}, {"sqrt", "y"}, {"log", "h"}, {"pow", "h"}};
  for (const auto& c : cases) {
    std::string attrs = std::string(c.op) == "pow" ? R"({"exponent": 2.0})" : "{}";
    auto run = testing::Simulate(AfterLinear(c.op, attrs));
    ASSERT_TRUE(run.ok) << c.op << ": " << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16)) << c.op;
    EXPECT_THAT(SavedNames(run, "y"), ElementsAre(c.saved)) << c.op;
    auto frozen = testing::Simulate(AfterLinear(c.op, attrs, false));
    ASSERT_TRUE(frozen.ok) << frozen.error;
    EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty()) << c.op << " without grad";
  }
  auto neg = testing::Simulate(AfterLinear("neg"));
  ASSERT_TRUE(neg.ok) << neg.error;
  EXPECT_THAT(SavedNames(neg, "y"), IsEmpty());
}

TEST(LlmRuleTest, PowAndRsqrtBackwardHaveTwoInputSizedTemporaries) {
  for (const char* op : {"pow", "rsqrt"}) {
    auto run = testing::Simulate(AfterLinear(op, R"({"exponent": 2.0})"));
    ASSERT_TRUE(run.ok) << run.error;
    auto tmp = testing::BuffersContaining(run.r.events, std::string(op) + " backward");
    ASSERT_EQ(tmp.size(), 2u) << op;
    for (uint32_t b : tmp) {
      EXPECT_EQ(run.r.events.buffers[b].bytes, 4 * 16 * 4) << op;
      EXPECT_EQ(run.r.events.buffers[b].category, Category::kTemporary);
    }
  }
}

TEST(LlmRuleTest, CosAndSinSaveSelfAndTheirBackwardHasTrigTemporaries) {
  struct Case { const char* op; size_t temps; } cases[] = {{"cos", 2u}, {"sin", 1u}};
  for (const auto& c : cases) {
    auto run = testing::Simulate(AfterLinear(c.op));
    ASSERT_TRUE(run.ok) << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16)) << c.op;
    EXPECT_THAT(SavedNames(run, "y"), ElementsAre("h")) << c.op;
    auto tmp = testing::BuffersContaining(run.r.events, std::string(c.op) + " backward");
    EXPECT_EQ(tmp.size(), c.temps) << c.op;  // cos: self.sin() and its negation; sin: self.cos()
    for (uint32_t b : tmp) EXPECT_EQ(run.r.events.buffers[b].bytes, 4 * 16 * 4) << c.op;
    auto frozen = testing::Simulate(AfterLinear(c.op, "{}", false));
    ASSERT_TRUE(frozen.ok) << frozen.error;
    EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty()) << c.op << " without grad";
  }
}

// ------------------------------------------------------------------------- comparisons, where
TEST(LlmRuleTest, ComparisonIsBoolAndWhereKeepsOnlyTheCondition) {
  auto body = [](bool rg) {
    return R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "p", "shape": [16], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [16, 8], "requires_grad": )" + std::string(rg ? "true" : "false") + R"(}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "ge", "inputs": ["p"], "outputs": ["m"], "attrs": {"scalar": 3}},
              {"op": "where", "inputs": ["m", "h"], "outputs": ["y"], "attrs": {"other": "-inf"}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  };
  auto run = testing::Simulate(body(true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(DtypeOf(run, "m"), Dtype::kBool);
  EXPECT_THAT(SizesOf(run, "m"), ElementsAre(16));
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 16));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("m"));
  auto frozen = testing::Simulate(body(false));
  ASSERT_TRUE(frozen.ok) << frozen.error;
  EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty());
}

// ------------------------------------------------------------------------- reductions
TEST(LlmRuleTest, MaxWithDimReturnsIndicesAndSavesThem) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "max", "inputs": ["h"], "outputs": ["v", "i"], "attrs": {"dim": -1, "keepdim": true}},
              {"op": "sub", "inputs": ["h", "v"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "v"), ElementsAre(4, 1));
  EXPECT_EQ(DtypeOf(run, "i"), Dtype::kInt64);
  EXPECT_THAT(SavedNames(run, "v"), ElementsAre("i"));
}

TEST(LlmRuleTest, AmaxAndLogsumexpSaveSelfAndResult) {
  for (const char* op : {"amax", "logsumexp"}) {
    auto run = testing::Simulate(AfterLinear(op, R"({"dim": [-1], "keepdim": true})"));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 1)) << op;
    EXPECT_THAT(SavedNames(run, "y"), UnorderedElementsAre("h", "y")) << op;
    auto frozen = testing::Simulate(AfterLinear(op, R"({"dim": [-1]})", false));
    ASSERT_TRUE(frozen.ok);
    EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty()) << op;
  }
}

TEST(LlmRuleTest, TopkKeepsIndices) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}], "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "topk", "inputs": ["h"], "outputs": ["v", "i"], "attrs": {"k": 3, "dim": -1}},
              {"op": "mean", "inputs": ["v"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "v"), ElementsAre(4, 3));
  EXPECT_EQ(DtypeOf(run, "i"), Dtype::kInt64);
  EXPECT_THAT(SavedNames(run, "v"), ElementsAre("i"));
}

// ------------------------------------------------------------------------- indexing
std::string IndexBody(const std::string& op, const std::string& attrs, bool rg) {
  return R"("inputs": [{"name": "ids", "shape": [2, 5], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [100, 8], "requires_grad": )" + std::string(rg ? "true" : "false") + R"(}],
      "ops": [{"op": ")" + op + R"(", "inputs": ["w", "ids"], "outputs": ["y"], "attrs": )" + attrs + R"(},
              {"op": "mul", "inputs": ["y"], "outputs": ["z"], "attrs": {"scalar": 2.0}},
              {"op": "mean", "inputs": ["z"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(LlmRuleTest, IndexByTokenIdsKeepsIdsAndGrowsAWeightSizedGrad) {
  auto run = testing::Simulate(IndexBody("index", R"({"dim": 0})", true), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(2, 5, 8));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("ids"));
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "sort buffer").empty()) << "cpu: no sort";
  auto cuda = testing::Simulate(IndexBody("index", R"({"dim": 0})", true), Opts("cuda"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  auto sort = testing::BuffersContaining(cuda.r.events, "sort buffer");
  ASSERT_EQ(sort.size(), 3u);
  EXPECT_EQ(cuda.r.events.buffers[sort[0]].bytes, 8 * 10);
  auto frozen = testing::Simulate(IndexBody("index", R"({"dim": 0})", false));
  ASSERT_TRUE(frozen.ok);
  EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty());
}

TEST(LlmRuleTest, GatherKeepsItsIndex) {
  auto body = [](bool rg) {
    return R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": [4, 1], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [16, 8], "requires_grad": )" + std::string(rg ? "true" : "false") + R"(}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "gather", "inputs": ["h", "t"], "outputs": ["y"], "attrs": {"dim": -1}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  };
  auto run = testing::Simulate(body(true));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(4, 1));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("t"));
  auto frozen = testing::Simulate(body(false));
  ASSERT_TRUE(frozen.ok);
  EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty());
}

TEST(LlmRuleTest, UnbindGivesViewsOfItsInput) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}], "buffers": [{"name": "c", "shape": [2, 4, 16]}],
      "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "unbind", "inputs": ["c"], "outputs": ["cos", "sin"], "attrs": {"dim": 0}},
              {"op": "mul", "inputs": ["h", "cos"], "outputs": ["y"]},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "sin"), ElementsAre(4, 16));
  EXPECT_TRUE(Aliases(run, "cos", "c"));
  EXPECT_TRUE(Aliases(run, "sin", "c"));
}

TEST(LlmRuleTest, TrilCumsumSaveNothingRepeatInterleaveKeepsItsIndex) {
  for (const char* op : {"tril", "triu", "cumsum"}) {
    auto run = testing::Simulate(AfterLinear(op, R"({"dim": -1})"));
    ASSERT_TRUE(run.ok) << op << ": " << run.error;
    EXPECT_THAT(SavedNames(run, "y"), IsEmpty()) << op;
  }
  auto run = testing::Simulate(AfterLinear("repeat_interleave", R"({"repeats": 2, "dim": 0})"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SizesOf(run, "y"), ElementsAre(8, 16));
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("extra:repeat_interleave index"));
  auto frozen = testing::Simulate(AfterLinear("repeat_interleave", R"({"repeats": 2, "dim": 0})", false));
  ASSERT_TRUE(frozen.ok);
  EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty());
}

TEST(LlmRuleTest, ScatterKeepsItsIndexForEitherGrad) {
  auto run = testing::Simulate(R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "t", "shape": [4, 2], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "scatter", "inputs": ["h", "t"], "outputs": ["y"], "attrs": {"dim": 1, "value": 0.0}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(SavedNames(run, "y"), ElementsAre("t"));
}

// ------------------------------------------------------------------------- Python-number operands
TEST(LlmRuleTest, PythonNumberOperandIsAWrappedTensorKeptByMulAndDivOnCpu) {
  for (const char* op : {"mul", "div"}) {
    auto cpu = testing::Simulate(AfterLinear(op, R"({"scalar": 8.0})"), Opts("cpu", "sgd", "1.13"));
    ASSERT_TRUE(cpu.ok) << op << ": " << cpu.error;
    EXPECT_THAT(SavedNames(cpu, "y"), ElementsAre("extra:wrapped scalar")) << op;
    auto frozen = testing::Simulate(AfterLinear(op, R"({"scalar": 8.0})", false), Opts("cpu", "sgd", "1.13"));
    ASSERT_TRUE(frozen.ok);
    EXPECT_THAT(SavedNames(frozen, "y"), IsEmpty()) << op;
    auto cuda = testing::Simulate(AfterLinear(op, R"({"scalar": 8.0})"), Opts("cuda"));
    ASSERT_TRUE(cuda.ok);
    EXPECT_THAT(SavedNames(cuda, "y"), IsEmpty()) << op << ": the wrapped number stays on the host";
  }
  auto add = testing::Simulate(AfterLinear("add", R"({"scalar": 1.0})"), Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(add.ok) << add.error;
  EXPECT_THAT(SavedNames(add, "y"), IsEmpty());
  auto wrapped = testing::BuffersContaining(add.r.events, "wrapped scalar");
  ASSERT_EQ(wrapped.size(), 1u);
  EXPECT_EQ(add.r.events.buffers[wrapped[0]].bytes, 8);
  EXPECT_LT(testing::FreeIndex(add.r.events, wrapped[0]), testing::FreeIndex(add.r.events, *testing::Buffer(add.r.events, "h")))
      << "transient: freed when add finishes";
}

// 2.13 CPU (Profile::scalar_operand_cast): the 8-byte wrapped number, then a copy of the scalar in
// the op's dtype freed once the output is allocated; MulBackward0 keeps the wrapped number.
TEST(LlmRuleTest, PythonNumberOperandOn213CpuIsWrappedThenCast) {
  auto mul = testing::Simulate(AfterLinear("mul", R"({"scalar": 2.0})"), Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(mul.ok) << mul.error;
  EXPECT_THAT(SavedNames(mul, "y"), ElementsAre("extra:wrapped scalar"));
  auto add = testing::Simulate(AfterLinear("add", R"({"scalar": 1.0})"), Opts("cpu", "sgd", "2.13"));
  ASSERT_TRUE(add.ok) << add.error;
  const EventStream& e = add.r.events;
  auto wrapped = testing::BuffersContaining(e, "wrapped scalar");
  ASSERT_EQ(wrapped.size(), 2u);  // the wrapped number and its cast
  EXPECT_EQ(e.buffers[wrapped[0]].bytes, 8);
  EXPECT_EQ(e.buffers[wrapped[1]].bytes, 4);
  const uint32_t y = *testing::Buffer(e, "y");
  EXPECT_LT(testing::AllocIndex(e, wrapped[1]), testing::AllocIndex(e, y));
  EXPECT_LT(testing::AllocIndex(e, y), testing::FreeIndex(e, wrapped[1]));
  EXPECT_LT(testing::FreeIndex(e, wrapped[1]), testing::FreeIndex(e, wrapped[0]));
}

// saved_variable.cpp: saved-tensor hooks never pack a wrapped number, so a mul inside a
// non-reentrant checkpoint keeps its wrapped number until its backward (Note [LoRA]).
TEST(LlmRuleTest, CheckpointedMulStillKeepsItsWrappedNumber) {
  const std::string body = R"("inputs": [{"name": "x", "shape": [4, 8]}],
      "parameters": [{"name": "blk.w", "shape": [16, 8]}],
      "ops": [{"op": "linear", "module": "blk", "inputs": ["x", "blk.w"], "outputs": ["h"]},
              {"op": "mul", "module": "blk", "inputs": ["h"], "outputs": ["y"], "attrs": {"scalar": 2.0}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
  // 2.13 keeps it (Profile::wrapped_number_skips_hooks); 1.13's hooks packed it: freed at once.
  for (const char* torch : {"2.13", "1.13"}) {
    SimOptions o = Opts("cpu", "sgd", torch);
    o.checkpoint_globs = {"blk"};
    auto run = testing::Simulate(body, o);
    ASSERT_TRUE(run.ok) << run.error;
    std::vector<uint32_t> wrapped;
    for (uint32_t b : testing::BuffersContaining(run.r.events, "wrapped scalar"))
      if (run.r.events.buffers[b].bytes == 8) wrapped.push_back(b);
    // The forward's, and the recomputation's under 1.13; 2.13's early stop comes after the linear,
    // the last save that goes through the hooks (the wrapped number does not).
    ASSERT_EQ(wrapped.size(), std::string(torch) == "2.13" ? 1u : 2u) << torch;
    const MemEvent* freed = testing::FreeEvent(run.r.events, wrapped[0]);
    ASSERT_NE(freed, nullptr);
    EXPECT_EQ(freed->phase, std::string(torch) == "2.13" ? Phase::kBackward : Phase::kForward)
        << torch << "\n" << testing::Dump(run.r.events);
  }
}

}  // namespace
}  // namespace memsim
