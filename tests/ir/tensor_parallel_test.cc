// Tensor parallelism as a graph rewrite (lib/ir/tensor_parallel.h, Note [Tensor parallel]): the
// shard shapes of ColwiseParallel and RowwiseParallel weights, the collectives at each boundary,
// the head count divided in explicit view sizes, the parallelize order, and the refusals.
#include "lib/ir/tensor_parallel.h"

#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ParseBody;

// One decoder layer as llama_1b.json writes it: 4 heads of 8 (explicit view sizes), a SwiGLU MLP.
const char* kLayer = R"(
  "symbols": {"batch": 2, "seq": 16},
  "inputs": [{"name": "x", "shape": ["batch", "seq", 32]}],
  "parameters": [{"name": "l.attn.q_proj.weight", "shape": [32, 32]}, {"name": "l.attn.o_proj.weight", "shape": [32, 32]},
                 {"name": "l.mlp.gate_proj.weight", "shape": [64, 32]}, {"name": "l.mlp.up_proj.weight", "shape": [64, 32]},
                 {"name": "l.mlp.down_proj.weight", "shape": [32, 64]}],
  "ops": [
    {"op": "linear", "module": "l.attn.q_proj", "inputs": ["x", "l.attn.q_proj.weight"], "outputs": ["q"]},
    {"op": "view", "module": "l.attn", "inputs": ["q"], "outputs": ["qh"], "attrs": {"shape": ["batch", "seq", 4, 8]}},
    {"op": "reshape", "module": "l.attn", "inputs": ["qh"], "outputs": ["a"], "attrs": {"shape": ["batch", "seq", 32]}},
    {"op": "linear", "module": "l.attn.o_proj", "inputs": ["a", "l.attn.o_proj.weight"], "outputs": ["o"]},
    {"op": "add", "module": "l", "inputs": ["x", "o"], "outputs": ["h"]},
    {"op": "linear", "module": "l.mlp.gate_proj", "inputs": ["h", "l.mlp.gate_proj.weight"], "outputs": ["g"]},
    {"op": "silu", "module": "l.mlp.act", "inputs": ["g"], "outputs": ["s"]},
    {"op": "linear", "module": "l.mlp.up_proj", "inputs": ["h", "l.mlp.up_proj.weight"], "outputs": ["u"]},
    {"op": "mul", "module": "l.mlp", "inputs": ["s", "u"], "outputs": ["m"]},
    {"op": "linear", "module": "l.mlp.down_proj", "inputs": ["m", "l.mlp.down_proj.weight"], "outputs": ["d"]},
    {"op": "mean", "inputs": ["d"], "outputs": ["loss"]}],
  "loss": "loss")";

std::vector<std::string> OpList(const Graph& g) {
  std::vector<std::string> v;
  for (const Op& op : g.ops) v.push_back(std::string(OpKindName(op.kind)) + "@" + op.module);
  return v;
}

std::string Shape(const Graph& g, const std::string& name) {
  std::string s;
  for (const DimExpr& d : g.tensors[g.FindTensor(name)].shape) s += (s.empty() ? "" : ",") + d.ToString(g.symbols);
  return s;
}

TEST(TensorParallelTest, ShardsColwiseRowsAndRowwiseColumns) {
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kLayer), {2, "layers", false});
  ASSERT_TRUE(tp.ok()) << tp.status().message();
  EXPECT_EQ(Shape(*tp, "l.attn.q_proj.weight"), "16,32");
  EXPECT_EQ(Shape(*tp, "l.attn.o_proj.weight"), "32,16");
  EXPECT_EQ(Shape(*tp, "l.mlp.gate_proj.weight"), "32,32");
  EXPECT_EQ(Shape(*tp, "l.mlp.down_proj.weight"), "32,32");
  EXPECT_EQ(tp->tp_degree, 2);
  // parallelize order, with the Shard dim
  std::vector<std::pair<std::string, int>> shards;
  for (const Graph::TpShard& s : tp->tp_shards) shards.emplace_back(tp->tensors[s.param].name, s.dim);
  EXPECT_EQ(shards, (std::vector<std::pair<std::string, int>>{{"l.attn.q_proj.weight", 0}, {"l.attn.o_proj.weight", 1},
                                                               {"l.mlp.gate_proj.weight", 0}, {"l.mlp.up_proj.weight", 0},
                                                               {"l.mlp.down_proj.weight", 1}}));
}

TEST(TensorParallelTest, CollectivesAtEachBoundary) {
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kLayer), {2, "layers", false});
  ASSERT_TRUE(tp.ok()) << tp.status().message();
  EXPECT_EQ(OpList(*tp),
            (std::vector<std::string>{"grad_all_reduce@l.attn.q_proj", "linear@l.attn.q_proj", "view@l.attn",
                                      "reshape@l.attn", "linear@l.attn.o_proj", "all_reduce@l.attn.o_proj", "add@l",
                                      "grad_all_reduce@l.mlp.gate_proj", "linear@l.mlp.gate_proj", "silu@l.mlp.act",
                                      "grad_all_reduce@l.mlp.up_proj", "linear@l.mlp.up_proj", "mul@l.mlp",
                                      "linear@l.mlp.down_proj", "all_reduce@l.mlp.down_proj", "mean@"}));
  // the all-reduce produces the Linear's output name; producers are consistent
  EXPECT_EQ(tp->tensors[tp->ops[5].outputs[0]].name, "o");
  for (OpId o = 0; o < tp->ops.size(); ++o)
    for (TensorId t : tp->ops[o].outputs) EXPECT_EQ(tp->tensors[t].producer, o);
}

TEST(TensorParallelTest, DividesTheHeadCountOfExplicitViews) {
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kLayer), {4, "layers", false});
  ASSERT_TRUE(tp.ok()) << tp.status().message();
  const auto& view = std::get<std::vector<DimExpr>>(*tp->ops[2].attrs.Find("shape"));
  EXPECT_EQ(view[2].coeff, 1);  // 4 heads / 4
  EXPECT_EQ(view[3].coeff, 8);  // head_dim untouched
  const auto& merged = std::get<std::vector<DimExpr>>(*tp->ops[3].attrs.Find("shape"));
  EXPECT_EQ(merged[2].coeff, 8);  // 32 features / 4
  // and the rewritten graph binds: the shapes agree end to end
  EXPECT_TRUE(testing::SimulateOk(*tp, testing::Opts("cpu")).events.events.size() > 0);
}

TEST(TensorParallelTest, Refusals) {
  auto message = [](Result<Graph> r) { return r.ok() ? std::string("ok") : r.status().message(); };
  EXPECT_NE(message(ApplyTensorParallel(ParseBody(kLayer), {3, "layers", false})).find("not divisible by 3"),
            std::string::npos);
  EXPECT_NE(message(ApplyTensorParallel(ParseBody(kLayer), {2, "everything", false})).find("unknown plan"),
            std::string::npos);
  EXPECT_NE(message(ApplyTensorParallel(testing::ZooGraph("mlp"), {2, "layers", false})).find("selects no Linear"),
            std::string::npos);
  EXPECT_NE(message(ApplyTensorParallel(ParseBody(kLayer), {2, "layers", true})).find("give --tp-plan torchtitan"),
            std::string::npos);
  // a view that infers the heads: 32 features / 8 ranks = 4 per rank, not whole heads of 8
  std::string inferred = kLayer;
  inferred.replace(inferred.find("[\"batch\", \"seq\", 4, 8]"), 22, "[\"batch\", \"seq\", -1, 8]");
  EXPECT_TRUE(ApplyTensorParallel(ParseBody(inferred), {4, "layers", false}).ok());
  EXPECT_NE(message(ApplyTensorParallel(ParseBody(inferred), {8, "layers", false})).find("not whole heads of 8"),
            std::string::npos);
}

// A decoder around kLayer's shape: the embedding, one layer with its norms, the final norm and the head.
const char* kModel = R"(
  "symbols": {"batch": 2, "seq": 16},
  "inputs": [{"name": "ids", "shape": ["batch", "seq"], "dtype": "int64"},
             {"name": "target", "shape": ["batch", "seq"], "dtype": "int64"}],
  "parameters": [{"name": "embed_tokens.weight", "shape": [64, 32]},
                 {"name": "l.attn.q_proj.weight", "shape": [32, 32]}, {"name": "l.attn.k_proj.weight", "shape": [32, 32]},
                 {"name": "l.attn.o_proj.weight", "shape": [32, 32]}, {"name": "lm_head.weight", "shape": [64, 32]}],
  "ops": [
    {"op": "embedding", "module": "embed_tokens", "inputs": ["ids", "embed_tokens.weight"], "outputs": ["x"]},
    {"op": "relu", "module": "l.norm", "inputs": ["x"], "outputs": ["n"]},
    {"op": "linear", "module": "l.attn.q_proj", "inputs": ["n", "l.attn.q_proj.weight"], "outputs": ["q"]},
    {"op": "linear", "module": "l.attn.k_proj", "inputs": ["n", "l.attn.k_proj.weight"], "outputs": ["k"]},
    {"op": "mul", "module": "l.attn", "inputs": ["q", "k"], "outputs": ["a"]},
    {"op": "linear", "module": "l.attn.o_proj", "inputs": ["a", "l.attn.o_proj.weight"], "outputs": ["o"],
     "attrs": {"keep_alive": ["n"]}},
    {"op": "add", "module": "l", "inputs": ["x", "o"], "outputs": ["h"]},
    {"op": "relu", "module": "norm", "inputs": ["h"], "outputs": ["f"]},
    {"op": "linear", "module": "lm_head", "inputs": ["f", "lm_head.weight"], "outputs": ["logits"]},
    {"op": "view", "inputs": ["logits"], "outputs": ["flat"], "attrs": {"shape": [-1, 64]}},
    {"op": "view", "inputs": ["target"], "outputs": ["t"], "attrs": {"shape": [-1]}},
    {"op": "cross_entropy", "inputs": ["flat", "t"], "outputs": ["loss"]}],
  "loss": "loss")";

TEST(TensorParallelTest, TorchtitanPlanShardsTheEmbeddingAndTheHeadFirst) {
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kModel), {2, "torchtitan", false});
  ASSERT_TRUE(tp.ok()) << tp.status().message();
  EXPECT_EQ(Shape(*tp, "embed_tokens.weight"), "32,32");  // RowwiseParallel: the vocabulary's rows
  EXPECT_EQ(Shape(*tp, "lm_head.weight"), "32,32");       // ColwiseParallel: the vocabulary's rows
  // parallelize_module(model, {tok_embeddings, norm, output}) before the layers
  std::vector<std::string> order;
  for (const Graph::TpShard& s : tp->tp_shards) order.push_back(tp->tensors[s.param].name);
  EXPECT_EQ(order, (std::vector<std::string>{"embed_tokens.weight", "lm_head.weight", "l.attn.q_proj.weight",
                                             "l.attn.k_proj.weight", "l.attn.o_proj.weight"}));
  EXPECT_EQ(OpList(*tp),
            (std::vector<std::string>{"tp_embedding@embed_tokens", "all_reduce@embed_tokens", "relu@l.norm",
                                      "grad_all_reduce@l.attn.q_proj", "linear@l.attn.q_proj",
                                      "grad_all_reduce@l.attn.k_proj", "linear@l.attn.k_proj", "mul@l.attn",
                                      "linear@l.attn.o_proj", "all_reduce@l.attn.o_proj", "add@l", "relu@norm",
                                      "grad_all_reduce@lm_head", "linear@lm_head", "all_gather@lm_head", "view@",
                                      "view@", "cross_entropy@"}));
  // the logits all-gathered on the last dimension; the layers plan leaves the embedding and head whole
  EXPECT_EQ(tp->ops[14].attrs.GetInt("dim", {}).value_or(0), -1);
  Result<Graph> layers = ApplyTensorParallel(ParseBody(kModel), {2, "layers", false});
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(Shape(*layers, "embed_tokens.weight"), "64,32");
  EXPECT_TRUE(testing::SimulateOk(*tp, testing::Opts("cpu")).events.events.size() > 0);
}

TEST(TensorParallelTest, SequenceParallelGathersBeforeAndScattersAfterEachBlock) {
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kModel), {2, "torchtitan", true});
  ASSERT_TRUE(tp.ok()) << tp.status().message();
  // one all-gather for the attention's q and k (PrepareModuleInput), none per Linear; the
  // reductions reduce-scatter on the sequence
  EXPECT_EQ(OpList(*tp),
            (std::vector<std::string>{"tp_embedding@embed_tokens", "reduce_scatter@embed_tokens", "relu@l.norm",
                                      "all_gather@l.attn.q_proj", "linear@l.attn.q_proj", "linear@l.attn.k_proj",
                                      "mul@l.attn", "linear@l.attn.o_proj", "reduce_scatter@l.attn.o_proj", "add@l",
                                      "relu@norm", "all_gather@lm_head", "linear@lm_head", "all_gather@lm_head",
                                      "view@", "view@", "cross_entropy@"}));
  // the caller's names live until the module's output hook has reduced (o_proj keeps the norm output)
  EXPECT_EQ(tp->ops[8].keep_alive, std::vector<TensorId>{tp->FindTensor("n")});
  EXPECT_TRUE(tp->ops[7].keep_alive.empty());
  const SimResult r = testing::SimulateOk(*tp, testing::Opts("cpu"));
  // the residual stream holds seq / tp: the embedding's reduced output is [2, 8, 32] fp32
  int64_t x_bytes = 0;
  for (const MemEvent& e : r.events.events)
    if (e.kind == EventKind::kAlloc && r.events.buffers[e.buffer].name == "x") x_bytes = r.events.bytes(e);
  EXPECT_EQ(x_bytes, 2 * 8 * 32 * 4);
}

TEST(TensorParallelTest, LossParallelKeepsTheLogitsShardedIntoTheLoss) {
  TensorParallelConfig c{2, "torchtitan", false, true};
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kModel), c);
  ASSERT_TRUE(tp.ok()) << tp.status().message();
  // no all-gather after the head; the flattening view takes the rank's vocabulary; the loss is
  // loss_parallel's
  const std::vector<std::string> ops = OpList(*tp);
  EXPECT_EQ(std::vector<std::string>(ops.end() - 5, ops.end()),
            (std::vector<std::string>{"grad_all_reduce@lm_head", "linear@lm_head", "view@", "view@", "tp_cross_entropy@"}));
  const auto& flat = std::get<std::vector<DimExpr>>(*tp->ops[tp->ops.size() - 3].attrs.Find("shape"));
  EXPECT_EQ(flat[1].coeff, 32);
  const SimResult r = testing::SimulateOk(*tp, testing::Opts("cpu"));
  // the saved log-softmax, [32 tokens, 32 columns] fp32, and no [32, 64] logits anywhere
  EXPECT_EQ(testing::AllocatedContaining(r.events, "loss:log_softmax"), 32 * 32 * 4);
  EXPECT_EQ(testing::AllocatedContaining(r.events, "all_gather"), 0);
  TensorParallelConfig layers{2, "layers", false, true};
  EXPECT_FALSE(ApplyTensorParallel(ParseBody(kModel), layers).ok());
}

TEST(TensorParallelTest, RowwiseEmbeddingGradKeepsTheWholeWeightGrad) {
  Result<Graph> tp = ApplyTensorParallel(ParseBody(kModel), {2, "torchtitan", false});
  ASSERT_TRUE(tp.ok());
  const SimResult r = testing::SimulateOk(*tp, testing::Opts("cpu"));
  // embedding_dense_backward on the replicated ids: the full [64, 32] grad, narrowed to the shard
  int64_t grad = 0;
  for (const MemEvent& e : r.events.events)
    if (e.kind == EventKind::kAlloc && r.events.buffers[e.buffer].name == "embed_tokens.weight.grad") grad = r.events.bytes(e);
  EXPECT_EQ(grad, 64 * 32 * 4);
}

}  // namespace
}  // namespace memsim
