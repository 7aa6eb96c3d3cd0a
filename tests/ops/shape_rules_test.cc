// Op rules of lib/ops/rules_shape.cc: views alias (no new bytes), reshape/flatten/contiguous copy
// only when a view is impossible, cat/stack/index_select allocate, narrowing-view backward.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::AllocBytes;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Parameter a [2, 3, 4] (96 bytes) -> <ops> -> "y" -> sum -> loss.
std::string Body(const std::string& ops, const std::string& shape = "[2, 3, 4]") {
  return R"("inputs": [{"name": "idx", "shape": [2], "dtype": "int64"}], "parameters": [{"name": "a", "shape": )" + shape +
         R"(}], "ops": [)" + ops + R"(, {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

struct Shaped {
  testing::Run run;
  std::vector<int64_t> sizes;
  bool aliases_a = false;
  bool allocated_y = false;
};

Shaped Run1(const std::string& ops, const std::string& shape = "[2, 3, 4]") {
  Shaped s;
  s.run = testing::Simulate(Body(ops, shape));
  EXPECT_TRUE(s.run.ok) << s.run.error;
  if (!s.run.ok) return s;
  TensorId y = s.run.graph.FindTensor("y");
  s.sizes = s.run.r.bound.metas[y].sizes;
  s.aliases_a = s.run.r.bound.owner[y] == s.run.graph.FindTensor("a");
  s.allocated_y = !testing::BuffersNamed(s.run.r.events, "y").empty();
  return s;
}

std::string Error(const std::string& ops) {
  auto run = testing::Simulate(Body(ops));
  EXPECT_FALSE(run.ok);
  return run.error;
}

TEST(ViewRuleTest, ViewAliasesWithInferredDim) {
  auto s = Run1(R"({"op": "view", "inputs": ["a"], "outputs": ["y"], "attrs": {"shape": [6, -1]}})");
  EXPECT_THAT(s.sizes, ElementsAre(6, 4));
  EXPECT_TRUE(s.aliases_a);
  EXPECT_FALSE(s.allocated_y);
  EXPECT_THAT(testing::SavedBy(s.run, "y"), IsEmpty());
}

TEST(ViewRuleTest, WrongElementCountNamesOp) {
  EXPECT_THAT(Error(R"({"op": "view", "inputs": ["a"], "outputs": ["y"], "attrs": {"shape": [5, 5]}})"),
              HasSubstr("/ops/0: view"));
  EXPECT_THAT(Error(R"({"op": "view", "inputs": ["a"], "outputs": ["y"], "attrs": {"shape": [-1, -1]}})"),
              HasSubstr("only one dimension can be -1"));
}

TEST(ViewRuleTest, ViewOfNonContiguousInputIsAnError) {
  EXPECT_THAT(Error(R"({"op": "transpose", "inputs": ["a"], "outputs": ["t"], "attrs": {"dim0": 0, "dim1": 2}},
                       {"op": "view", "inputs": ["t"], "outputs": ["y"], "attrs": {"shape": [24]}})"),
              HasSubstr("/ops/1: view"));
}

TEST(ReshapeRuleTest, ContiguousInputIsAView) {
  auto s = Run1(R"({"op": "reshape", "inputs": ["a"], "outputs": ["y"], "attrs": {"shape": [4, 6]}})");
  EXPECT_TRUE(s.aliases_a);
  EXPECT_FALSE(s.allocated_y);
}

TEST(ReshapeRuleTest, NonViewableInputIsCopied) {
  auto s = Run1(R"({"op": "transpose", "inputs": ["a"], "outputs": ["t"], "attrs": {"dim0": 0, "dim1": 2}},
                   {"op": "reshape", "inputs": ["t"], "outputs": ["y"], "attrs": {"shape": [24]}})");
  EXPECT_THAT(s.sizes, ElementsAre(24));
  EXPECT_FALSE(s.aliases_a);
  ASSERT_TRUE(s.allocated_y);
  auto b = testing::Buffer(s.run.r.events, "y");
  ASSERT_TRUE(b);
  EXPECT_EQ(s.run.r.events.buffers[*b].bytes, 96);
}

TEST(FlattenRuleTest, FlattensRangeAsView) {
  auto s = Run1(R"({"op": "flatten", "inputs": ["a"], "outputs": ["y"], "attrs": {"start_dim": 1}})");
  EXPECT_THAT(s.sizes, ElementsAre(2, 12));
  EXPECT_TRUE(s.aliases_a);
}

TEST(FlattenRuleTest, NonViewableFlattenCopies) {
  auto s = Run1(R"({"op": "permute", "inputs": ["a"], "outputs": ["t"], "attrs": {"dims": [2, 0, 1]}},
                   {"op": "flatten", "inputs": ["t"], "outputs": ["y"]})");
  EXPECT_THAT(s.sizes, ElementsAre(24));
  EXPECT_TRUE(s.allocated_y);
}

TEST(TransposeRuleTest, SwapsDimsAsView) {
  auto s = Run1(R"({"op": "transpose", "inputs": ["a"], "outputs": ["y"], "attrs": {"dim0": -1, "dim1": 0}})");
  EXPECT_THAT(s.sizes, ElementsAre(4, 3, 2));
  EXPECT_TRUE(s.aliases_a);
  EXPECT_THAT(Error(R"({"op": "transpose", "inputs": ["a"], "outputs": ["y"], "attrs": {"dim0": 0, "dim1": 3}})"),
              HasSubstr("/ops/0: transpose"));
}

TEST(PermuteRuleTest, PermutesAsViewAndRejectsNonPermutations) {
  auto s = Run1(R"({"op": "permute", "inputs": ["a"], "outputs": ["y"], "attrs": {"dims": [1, 2, 0]}})");
  EXPECT_THAT(s.sizes, ElementsAre(3, 4, 2));
  EXPECT_TRUE(s.aliases_a);
  EXPECT_THAT(Error(R"({"op": "permute", "inputs": ["a"], "outputs": ["y"], "attrs": {"dims": [1, 1, 0]}})"),
              HasSubstr("not a permutation"));
}

TEST(ExpandRuleTest, ExpandsSizeOneDimsAsView) {
  auto s = Run1(R"({"op": "expand", "inputs": ["a"], "outputs": ["y"], "attrs": {"sizes": [5, -1, 3, 4]}})", "[2, 1, 4]");
  EXPECT_THAT(s.sizes, ElementsAre(5, 2, 3, 4));
  EXPECT_TRUE(s.aliases_a);
  EXPECT_FALSE(s.allocated_y);
}

TEST(ExpandRuleTest, BackwardReducesToNewInputSizedGrad) {
  auto s = Run1(R"({"op": "expand", "inputs": ["a"], "outputs": ["y"], "attrs": {"sizes": [2, 3, 4]}})", "[2, 1, 4]");
  auto g = testing::Buffer(s.run.r.events, "a.grad");
  ASSERT_TRUE(g);
  EXPECT_EQ(s.run.r.events.buffers[*g].bytes, 2 * 1 * 4 * 4);
}

TEST(ExpandRuleTest, NonSingletonDimCannotExpand) {
  EXPECT_THAT(Error(R"({"op": "expand", "inputs": ["a"], "outputs": ["y"], "attrs": {"sizes": [2, 5, 4]}})"),
              HasSubstr("/ops/0: expand"));
}

TEST(SqueezeRuleTest, UnsqueezeAndSqueezeAreViews) {
  auto s = Run1(R"({"op": "unsqueeze", "inputs": ["a"], "outputs": ["u"], "attrs": {"dim": 1}},
                   {"op": "squeeze", "inputs": ["u"], "outputs": ["y"], "attrs": {"dim": 1}})");
  EXPECT_THAT(s.sizes, ElementsAre(2, 3, 4));
  EXPECT_TRUE(s.aliases_a);
  TensorId u = s.run.graph.FindTensor("u");
  EXPECT_THAT(s.run.r.bound.metas[u].sizes, ElementsAre(2, 1, 3, 4));
}

TEST(ContiguousRuleTest, CopiesOnlyNonContiguousInput) {
  auto view = Run1(R"({"op": "contiguous", "inputs": ["a"], "outputs": ["y"]})");
  EXPECT_TRUE(view.aliases_a);
  EXPECT_FALSE(view.allocated_y);
  auto copy = Run1(R"({"op": "transpose", "inputs": ["a"], "outputs": ["t"], "attrs": {"dim0": 1, "dim1": 2}},
                      {"op": "contiguous", "inputs": ["t"], "outputs": ["y"]})");
  EXPECT_FALSE(copy.aliases_a);
  EXPECT_TRUE(copy.allocated_y);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 4, 3));
}

TEST(SelectSliceRuleTest, NarrowingViewsAliasAndBackwardAllocatesFullGrad) {
  auto sel = Run1(R"({"op": "select", "inputs": ["a"], "outputs": ["y"], "attrs": {"dim": 1, "index": -1}})");
  EXPECT_THAT(sel.sizes, ElementsAre(2, 4));
  EXPECT_TRUE(sel.aliases_a);
  auto g = testing::Buffer(sel.run.r.events, "a.grad");
  ASSERT_TRUE(g);
  EXPECT_EQ(sel.run.r.events.buffers[*g].bytes, 96);
  auto sl = Run1(R"({"op": "slice", "inputs": ["a"], "outputs": ["y"], "attrs": {"dim": 2, "start": 1, "end": 100, "step": 2}})");
  EXPECT_THAT(sl.sizes, ElementsAre(2, 3, 2));
  EXPECT_TRUE(sl.aliases_a);
  EXPECT_THAT(Error(R"({"op": "select", "inputs": ["a"], "outputs": ["y"], "attrs": {"dim": 1, "index": 3}})"),
              HasSubstr("/ops/0: select"));
}

TEST(SelectSliceRuleTest, WholeSliceHasNoSliceBackwardFrom2x) {
  // Note [Whole slices]: a[:, :, 0:4] is `a` itself in eager 2.x; the (contiguous) grad of the
  // product reaches `a` unchanged and is stolen. 1.13 recorded a SliceBackward0 (a new a.grad).
  auto body = [](int end) {
    return Body(R"({"op": "slice", "inputs": ["a"], "outputs": ["s"], "attrs": {"dim": 2, "start": 0, "end": )" +
                std::to_string(end) + R"(, "step": 1}}, {"op": "mul", "inputs": ["s", "s"], "outputs": ["y"]})");
  };
  auto whole = testing::Simulate(body(4));
  ASSERT_TRUE(whole.ok) << whole.error;
  EXPECT_THAT(testing::BuffersNamed(whole.r.events, "a.grad"), IsEmpty());
  auto part = testing::Simulate(body(3));
  ASSERT_TRUE(part.ok) << part.error;
  EXPECT_EQ(testing::BuffersNamed(part.r.events, "a.grad").size(), 1u);
  auto old = testing::Simulate(body(4), testing::Opts("cuda", "sgd", "1.13"));
  ASSERT_TRUE(old.ok) << old.error;
  EXPECT_EQ(testing::BuffersNamed(old.r.events, "a.grad").size(), 1u);
}

TEST(SplitRuleTest, SplitAndChunkProduceViews) {
  auto run = testing::Simulate(Body(R"({"op": "split", "inputs": ["a"], "outputs": ["p0", "p1"], "attrs": {"split_size": 2, "dim": 2}},
                                       {"op": "mul", "inputs": ["p0", "p1"], "outputs": ["y"]})"));
  ASSERT_TRUE(run.ok) << run.error;
  TensorId p1 = run.graph.FindTensor("p1");
  EXPECT_THAT(run.r.bound.metas[p1].sizes, ElementsAre(2, 3, 2));
  EXPECT_EQ(run.r.bound.owner[p1], run.graph.FindTensor("a"));
  auto chunk = testing::Simulate(Body(R"({"op": "chunk", "inputs": ["a"], "outputs": ["c0", "c1", "c2"], "attrs": {"chunks": 3, "dim": 1}},
                                         {"op": "add", "inputs": ["c0", "c2"], "outputs": ["y"]})"));
  ASSERT_TRUE(chunk.ok) << chunk.error;
  EXPECT_THAT(chunk.r.bound.metas[chunk.graph.FindTensor("c2")].sizes, ElementsAre(2, 1, 4));
}

TEST(SplitRuleTest, OutputCountMustMatchPieces) {
  EXPECT_THAT(Error(R"({"op": "split", "inputs": ["a"], "outputs": ["y"], "attrs": {"split_size": 2, "dim": 2}})"),
              HasSubstr("/ops/0: split"));
}

TEST(CatRuleTest, AllocatesOutputAndSavesNothing) {
  auto s = Run1(R"({"op": "cat", "inputs": ["a", "a"], "outputs": ["y"], "attrs": {"dim": 1}})");
  EXPECT_THAT(s.sizes, ElementsAre(2, 6, 4));
  ASSERT_TRUE(s.allocated_y);
  EXPECT_EQ(s.run.r.events.buffers[*testing::Buffer(s.run.r.events, "y")].bytes, 2 * 96);
  EXPECT_THAT(testing::SavedBy(s.run, "y"), IsEmpty());
}

TEST(CatRuleTest, MismatchedSizesNameOp) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [2, 3]}, {"name": "b", "shape": [3, 3]}],
      "ops": [{"op": "cat", "inputs": ["a", "b"], "outputs": ["y"], "attrs": {"dim": 1}}, {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("/ops/0: cat"));
}

TEST(StackRuleTest, InsertsNewDim) {
  auto s = Run1(R"({"op": "stack", "inputs": ["a", "a", "a"], "outputs": ["y"], "attrs": {"dim": 1}})");
  EXPECT_THAT(s.sizes, ElementsAre(2, 3, 3, 4));
  EXPECT_TRUE(s.allocated_y);
  EXPECT_THAT(testing::SavedBy(s.run, "y"), IsEmpty());
}

TEST(IndexSelectRuleTest, CopiesAndSavesIndex) {
  auto s = Run1(R"({"op": "index_select", "inputs": ["a", "idx"], "outputs": ["y"], "attrs": {"dim": 2}})");
  EXPECT_THAT(s.sizes, ElementsAre(2, 3, 2));
  EXPECT_TRUE(s.allocated_y);
  EXPECT_THAT(testing::SavedNames(s.run, "y"), ElementsAre("idx"));
}

TEST(ArangeRuleTest, MakesFreshTensorWithoutInputs) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [5]}],
      "ops": [{"op": "arange", "inputs": [], "outputs": ["r"], "attrs": {"end": 5, "dtype": "float32"}},
              {"op": "mul", "inputs": ["a", "r"], "outputs": ["y"]}, {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(run.r.bound.metas[run.graph.FindTensor("r")].sizes, ElementsAre(5));
  EXPECT_THAT(testing::SavedNames(run, "y"), ElementsAre("r"));
}


// ---------------------------------------------------------------- Note [Padding and resampling]

TEST(PadRuleTest, ConstantKeepsNothingReflectKeepsSelf) {
  auto c = Run1(R"({"op": "pad", "inputs": ["a"], "outputs": ["y"], "attrs": {"pad": [1, 2, 0, 1]}})");
  EXPECT_THAT(c.sizes, ElementsAre(2, 4, 7));
  EXPECT_TRUE(c.allocated_y);
  EXPECT_THAT(testing::SavedNames(c.run, "y"), IsEmpty());
  EXPECT_THAT(AllocBytes(c.run, "a.grad"), ElementsAre(96));
  auto r = Run1(R"({"op": "pad", "inputs": ["a"], "outputs": ["y"], "attrs": {"pad": [1, 1], "mode": "reflect"}})");
  EXPECT_THAT(r.sizes, ElementsAre(2, 3, 6));
  EXPECT_THAT(testing::SavedNames(r.run, "y"), ElementsAre("a"));
}

TEST(PadRuleTest, CircularAndOddPadsAreErrors) {
  EXPECT_THAT(Error(R"({"op": "pad", "inputs": ["a"], "outputs": ["y"], "attrs": {"pad": [1, 1], "mode": "circular"}})"),
              HasSubstr("circular"));
  EXPECT_THAT(Error(R"({"op": "pad", "inputs": ["a"], "outputs": ["y"], "attrs": {"pad": [1]}})"), HasSubstr("pad"));
}

std::string UpsampleBody(const std::string& size) {
  return R"("inputs": [], "parameters": [{"name": "a", "shape": [2, 4, 6, 6]}],
      "ops": [{"op": "upsample", "inputs": ["a"], "outputs": ["y"], "attrs": {"size": )" + size + R"(, "mode": "nearest"}},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(UpsampleRuleTest, SmallCpuOutputsRunTheChannelsLastKernelWithTwoScratchCopies) {
  const int64_t in = 2 * 4 * 6 * 6 * 4, out = 2 * 4 * 12 * 12 * 4;
  auto run = testing::Simulate(UpsampleBody("[12, 12]"), testing::Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "y:channels-last input"), ElementsAre(in));
  EXPECT_THAT(AllocBytes(run, "y:channels-last output"), ElementsAre(out));
  EXPECT_THAT(testing::SavedNames(run, "y"), IsEmpty());
  EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(in));
  auto old = testing::Simulate(UpsampleBody("[12, 12]"), testing::Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(old.ok) << old.error;
  EXPECT_TRUE(testing::BuffersContaining(old.r.events, "channels-last").empty());
  auto big = testing::Simulate(UpsampleBody("[64, 65]"), testing::Opts("cpu"));
  ASSERT_TRUE(big.ok) << big.error;
  EXPECT_TRUE(testing::BuffersContaining(big.r.events, "channels-last").empty());
}

// Note [Upsample index buffers]
TEST(UpsampleRuleTest, GenericCpuKernelMakesIndexAndWeightPairsPerSpatialDim) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [2, 4, 6, 6]}],
      "ops": [{"op": "upsample", "inputs": ["a"], "outputs": ["y"], "attrs": {"size": [12, 10], "mode": "bicubic"}},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")",
                               testing::Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  // 4 pairs per dim: int64 indices and float weights of the output's size along the dim.
  EXPECT_THAT(AllocBytes(run, "y:upsample indices"), ElementsAre(96, 96, 96, 96, 80, 80, 80, 80));
  EXPECT_THAT(AllocBytes(run, "y:upsample weights"), ElementsAre(48, 48, 48, 48, 40, 40, 40, 40));
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "channels-last").empty());
  EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(2 * 4 * 6 * 6 * 4));
  auto cuda = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [2, 4, 6, 6, 6]}],
      "ops": [{"op": "upsample", "inputs": ["a"], "outputs": ["y"], "attrs": {"size": [12, 12, 12], "mode": "trilinear"}},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_TRUE(testing::BuffersContaining(cuda.r.events, "upsample").empty());
}

TEST(UpsampleRuleTest, ModeMustFitTheSpatialRank) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [2, 4, 6]}],
      "ops": [{"op": "upsample", "inputs": ["a"], "outputs": ["y"], "attrs": {"size": [12], "mode": "bilinear"}},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("bilinear"));
}

TEST(RollRepeatRuleTest, NewOutputsAndOneInputSizedGrad) {
  auto roll = Run1(R"({"op": "roll", "inputs": ["a"], "outputs": ["y"], "attrs": {"shifts": 1, "dims": 0}})");
  EXPECT_THAT(roll.sizes, ElementsAre(2, 3, 4));
  EXPECT_TRUE(roll.allocated_y);
  EXPECT_THAT(AllocBytes(roll.run, "a.grad"), ElementsAre(96));
  auto rep = Run1(R"({"op": "repeat", "inputs": ["a"], "outputs": ["y"], "attrs": {"repeats": [2, 1, 1, 3]}})");
  EXPECT_THAT(rep.sizes, ElementsAre(2, 2, 3, 12));
  EXPECT_THAT(testing::SavedNames(rep.run, "y"), IsEmpty());
  EXPECT_THAT(AllocBytes(rep.run, "a.grad"), ElementsAre(96));
  EXPECT_THAT(Error(R"({"op": "repeat", "inputs": ["a"], "outputs": ["y"], "attrs": {"repeats": [2]}})"),
              HasSubstr("repeats"));
}

TEST(ToDtypeRuleTest, CastsForwardAndTheGradBack) {
  auto run = Run1(R"({"op": "to_dtype", "inputs": ["a"], "outputs": ["y"], "attrs": {"dtype": "float16"}})");
  EXPECT_THAT(AllocBytes(run.run, "y"), ElementsAre(48));
  EXPECT_THAT(AllocBytes(run.run, "a.grad"), ElementsAre(96));
  EXPECT_THAT(Error(R"({"op": "to_dtype", "inputs": ["a"], "outputs": ["y"], "attrs": {"dtype": "float7"}})"),
              HasSubstr("dtype"));
}

TEST(FullRuleTest, AllocatesItsShapeAndDtypeWithoutANode) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [4, 8]}],
      "ops": [{"op": "full", "inputs": [], "outputs": ["z"], "attrs": {"shape": [4, 8], "dtype": "bfloat16"}},
              {"op": "mul", "inputs": ["a", "z"], "outputs": ["y"]},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(AllocBytes(run, "z"), ElementsAre(64));
  EXPECT_THAT(testing::SavedNames(run, "y"), ElementsAre("z"));
  EXPECT_TRUE(testing::BuffersNamed(run.r.events, "z.grad").empty());
  auto bad = testing::Simulate(R"("inputs": [], "parameters": [],
      "ops": [{"op": "full", "inputs": [], "outputs": ["z"], "attrs": {"dtype": "float32"}}], "outputs": ["z"])");
  EXPECT_FALSE(bad.ok);
  EXPECT_THAT(bad.error, HasSubstr("shape"));
}

TEST(DetachRuleTest, AliasesAndCutsTheGrad) {
  auto run = testing::Simulate(R"("inputs": [], "parameters": [{"name": "a", "shape": [4, 8]}],
      "ops": [{"op": "detach", "inputs": ["a"], "outputs": ["d"]}, {"op": "mul", "inputs": ["a", "d"], "outputs": ["y"]},
              {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")");
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.r.bound.owner[run.graph.FindTensor("d")], run.graph.FindTensor("a"));
  EXPECT_THAT(testing::SavedNames(run, "y"), ElementsAre("d"));  // only a's grad is needed
  EXPECT_THAT(AllocBytes(run, "a.grad"), ElementsAre(128));
}


// ---------------------------------------------------------------- writes into views
// Note [Writes into views]: x [4, 8] -> linear -> h [4, 16]; linear -> g [4, 8] (128 bytes);
// one view_write of g (or a number, a mask, an index) into a view of h or of a fresh buffer.
std::string WriteBody(const std::string& ops) {
  return R"("inputs": [{"name": "x", "shape": [4, 8]}, {"name": "idx", "shape": [8], "dtype": "int64"}],
      "parameters": [{"name": "w", "shape": [16, 8]}, {"name": "w2", "shape": [8, 8]}],
      "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
              {"op": "linear", "inputs": ["x", "w2"], "outputs": ["g"]}, )" + ops + R"(,
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

TEST(ViewWriteRuleTest, CopyIntoASliceOfABaseWithHistory) {
  auto run = testing::Simulate(WriteBody(R"({"op": "slice", "inputs": ["h"], "outputs": ["v"], "attrs": {"dim": 1, "start": 4, "end": 12}},
      {"op": "view_write", "inputs": ["h", "v", "g"], "outputs": ["y"], "attrs": {"write": "copy"}})"), testing::Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.r.bound.owner[run.graph.FindTensor("y")], run.graph.FindTensor("h"));
  EXPECT_TRUE(testing::SavedNames(run, "y").empty());
  // CopySlices: the base-sized result is h's grad, the clone g's; CopyBackwards' zeros_like(grad)
  // for the view (the base had history) is a view-sized temporary.
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "y:written grad", &n), 4 * 8 * 4);
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "CopySlices").empty());
}

TEST(ViewWriteRuleTest, CopyIntoABufferWithoutHistoryDropsTheResult) {
  auto run = testing::Simulate(WriteBody(R"({"op": "full", "inputs": [], "outputs": ["z"], "attrs": {"shape": [4, 2, 8]}},
      {"op": "select", "inputs": ["z"], "outputs": ["v"], "attrs": {"dim": 1, "index": 1}},
      {"op": "view_write", "inputs": ["z", "v", "g"], "outputs": ["y"], "attrs": {"write": "copy"}})"), testing::Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  auto result = testing::Buffer(run.r.events, "y:CopySlices result");
  ASSERT_TRUE(result);
  EXPECT_EQ(run.r.events.buffers[*result].bytes, 4 * 2 * 8 * 4);
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "written grad").empty());
}

TEST(ViewWriteRuleTest, FillAndMaskedFillKeepWhatTheirNodesKeep) {
  auto fill = testing::Simulate(WriteBody(R"({"op": "slice", "inputs": ["h"], "outputs": ["v"], "attrs": {"dim": 1, "start": 0, "end": 4}},
      {"op": "view_write", "inputs": ["h", "v"], "outputs": ["y"], "attrs": {"write": "fill", "value": 0}})"), testing::Opts("cpu"));
  ASSERT_TRUE(fill.ok) << fill.error;
  auto value = testing::Buffer(fill.r.events, "y:fill value");
  ASSERT_TRUE(value);
  EXPECT_EQ(fill.r.events.buffers[*value].bytes, 4);
  EXPECT_EQ(testing::AllocatedContaining(fill.r.events, "y:CopySlices grad slice"), 4 * 4 * 4);
  auto masked = testing::Simulate(WriteBody(R"({"op": "slice", "inputs": ["h"], "outputs": ["v"], "attrs": {"dim": 1, "start": 8, "end": 16}},
      {"op": "gt", "inputs": ["g"], "outputs": ["m"], "attrs": {"scalar": 1.0}},
      {"op": "view_write", "inputs": ["h", "v", "m"], "outputs": ["y"], "attrs": {"write": "masked_fill", "value": 1}})"), testing::Opts("cpu"));
  ASSERT_TRUE(masked.ok) << masked.error;
  EXPECT_THAT(testing::SavedNames(masked, "y"), ElementsAre("m"));
  EXPECT_EQ(testing::AllocatedContaining(masked.r.events, "y:masked_fill grad"), 4 * 8 * 4);
}

// `noise.bernoulli_(p)`, `x.zero_()`: a scalar write allocates nothing; into the whole tensor it is
// the inner node alone (zeros_like(grad) for a base with history), into a view CopySlices.
TEST(ViewWriteRuleTest, AScalarWriteAllocatesNothingAndItsNodeKeepsNothing) {
  auto whole = testing::Simulate(WriteBody(R"({"op": "view_write", "inputs": ["h", "h"], "outputs": ["y"],
      "attrs": {"write": "scalar", "fn": "zero_"}})"), testing::Opts("cpu"));
  ASSERT_TRUE(whole.ok) << whole.error;
  EXPECT_EQ(whole.r.bound.owner[whole.graph.FindTensor("y")], whole.graph.FindTensor("h"));
  EXPECT_TRUE(testing::SavedNames(whole, "y").empty());
  EXPECT_TRUE(testing::BuffersContaining(whole.r.events, "y:").empty());
  auto view = testing::Simulate(WriteBody(R"({"op": "slice", "inputs": ["h"], "outputs": ["v"], "attrs": {"dim": 1, "start": 4, "end": 8}},
      {"op": "view_write", "inputs": ["h", "v"], "outputs": ["y"], "attrs": {"write": "scalar", "fn": "zero_"}})"), testing::Opts("cpu"));
  ASSERT_TRUE(view.ok) << view.error;
  EXPECT_TRUE(testing::BuffersContaining(view.r.events, "fill value").empty());
  EXPECT_EQ(testing::AllocatedContaining(view.r.events, "y:written grad"), 4 * 4 * 4);
  EXPECT_EQ(testing::AllocatedContaining(view.r.events, "y:CopySlices grad slice"), 4 * 4 * 4);
}

TEST(ViewWriteRuleTest, IndexPutOnAWholeSliceIsCopySlicesOnlyUnder113) {
  const std::string ops = R"({"op": "slice", "inputs": ["h"], "outputs": ["v"], "attrs": {"dim": 0, "start": 0}},
      {"op": "view_write", "inputs": ["h", "v", "g", "idx"], "outputs": ["y"], "attrs": {"write": "index_put", "dim": 1}})";
  auto v2 = testing::Simulate(WriteBody(ops), testing::Opts("cpu"));
  auto v1 = testing::Simulate(WriteBody(ops), testing::Opts("cpu", "sgd", "1.13"));
  ASSERT_TRUE(v2.ok && v1.ok) << v2.error << v1.error;
  EXPECT_THAT(testing::SavedNames(v2, "y"), ElementsAre("idx"));
  // IndexPutBackward0: zeros_like(values) then the index_put grad; 1.13 inside CopySlices.
  EXPECT_EQ(testing::AllocatedContaining(v2.r.events, "zeros_like(values)"), 4 * 8 * 4);
  EXPECT_TRUE(testing::BuffersContaining(v2.r.events, "CopySlices").empty());
  EXPECT_EQ(testing::AllocatedContaining(v1.r.events, "y:CopySlices grad slice"), 4 * 16 * 4);
}

// x[mask] = 0.0 (index_put_ → masked_fill_): the 0-dim value in forward; IndexPutBackward0 keeps
// the mask, its zeros_like(values) is 0-dim; no nonzero anywhere.
TEST(ViewWriteRuleTest, MaskFillKeepsTheMaskAndRunsNoNonzero) {
  auto run = testing::Simulate(WriteBody(R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["g2"]},
      {"op": "gt", "inputs": ["g2"], "outputs": ["m"], "attrs": {"scalar": 0.5}},
      {"op": "view_write", "inputs": ["h", "h", "m"], "outputs": ["y"], "attrs": {"write": "mask_fill", "value": 0}})"),
                               testing::Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "y"), ElementsAre("m"));
  auto value = testing::Buffer(run.r.events, "y:fill value");
  ASSERT_TRUE(value);
  EXPECT_EQ(run.r.events.buffers[*value].bytes, 4);
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "zeros_like(values)"), 4);
  EXPECT_TRUE(testing::BuffersContaining(run.r.events, "nonzero").empty());
}

// x[mask] = y with a tensor: mask.nonzero() ([rows, mask.dim()] int64) in forward, again in the
// self grad's index_put and in the value grad's index; the value's grad has its rows.
TEST(ViewWriteRuleTest, MaskPutRunsNonzeroForEachIndexing) {
  auto run = testing::Simulate(WriteBody(R"({"op": "full", "inputs": [], "outputs": ["m"], "attrs": {"shape": [4, 16], "dtype": "bool"}},
      {"op": "flatten", "inputs": ["g"], "outputs": ["v"], "attrs": {"start_dim": 0, "end_dim": -1}},
      {"op": "view_write", "inputs": ["h", "h", "v", "m"], "outputs": ["y"], "attrs": {"write": "mask_put"}})"),
                               testing::Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "y"), ElementsAre("m"));
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "mask.nonzero()", &n), 3 * 32 * 2 * 8);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(testing::AllocatedContaining(run.r.events, "zeros_like(values)"), 32 * 4);
}

// masked_scatter_: nothing in forward (a contiguous source), the mask kept; backward: the self
// grad (masked_fill), masked_select's 0-dim count and, on the CPU, the mask copied to int64.
TEST(ViewWriteRuleTest, MaskedScatterCountsTheMaskOnTheCpu) {
  const std::string ops = R"({"op": "full", "inputs": [], "outputs": ["m"], "attrs": {"shape": [4, 16], "dtype": "bool"}},
      {"op": "flatten", "inputs": ["g"], "outputs": ["v"], "attrs": {"start_dim": 0, "end_dim": -1}},
      {"op": "view_write", "inputs": ["h", "h", "v", "m"], "outputs": ["y"], "attrs": {"write": "masked_scatter"}})";
  auto cpu = testing::Simulate(WriteBody(ops), testing::Opts("cpu"));
  auto cuda = testing::Simulate(WriteBody(ops), testing::Opts("cuda"));
  ASSERT_TRUE(cpu.ok && cuda.ok) << cpu.error << cuda.error;
  EXPECT_THAT(testing::SavedNames(cpu, "y"), ElementsAre("m"));
  EXPECT_EQ(testing::AllocatedContaining(cpu.r.events, "masked_select count"), 8);
  EXPECT_EQ(testing::AllocatedContaining(cpu.r.events, "mask as int64"), 4 * 16 * 8);
  EXPECT_TRUE(testing::BuffersContaining(cuda.r.events, "mask as int64").empty());
}

TEST(ViewWriteRuleTest, RefusesAMaskThatIsNotBoolOverTheLeadingDims) {
  auto run = testing::Simulate(WriteBody(R"({"op": "full", "inputs": [], "outputs": ["m"], "attrs": {"shape": [16], "dtype": "bool"}},
      {"op": "view_write", "inputs": ["h", "h", "m"], "outputs": ["y"], "attrs": {"write": "mask_fill", "value": 0}})"),
                               testing::Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("leading sizes"));
}

TEST(ViewWriteRuleTest, RefusesAValueOfAnotherShapeOrArity) {
  auto run = testing::Simulate(WriteBody(R"({"op": "slice", "inputs": ["h"], "outputs": ["v"], "attrs": {"dim": 1, "start": 0, "end": 4}},
      {"op": "view_write", "inputs": ["h", "v", "g"], "outputs": ["y"], "attrs": {"write": "copy"}})"), testing::Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_THAT(run.error, HasSubstr("does not broadcast"));
}

}  // namespace
}  // namespace memsim
