// torchao float8 training as a graph rewrite (lib/ir/fp8.h, Note [FP8 training]): the spec, the
// default filter (features multiples of 16), explicit targets, and the bias split off as an add.
#include "lib/ir/fp8.h"

#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ParseBody;

// x [batch, 32] -> fc1 (32 -> 64, bias) -> relu -> fc2 (64 -> 16) -> relu -> head (16 -> 10) -> mse.
const char* kMlp = R"(
  "symbols": {"batch": 4},
  "inputs": [{"name": "x", "shape": ["batch", 32]}, {"name": "t", "shape": ["batch", 10]}],
  "parameters": [{"name": "fc1.weight", "shape": [64, 32]}, {"name": "fc1.bias", "shape": [64]},
                 {"name": "fc2.weight", "shape": [16, 64]}, {"name": "head.weight", "shape": [10, 16]}],
  "ops": [
    {"op": "linear", "module": "fc1", "inputs": ["x", "fc1.weight", "fc1.bias"], "outputs": ["h"]},
    {"op": "relu", "module": "act", "inputs": ["h"], "outputs": ["a"]},
    {"op": "linear", "module": "fc2", "inputs": ["a", "fc2.weight"], "outputs": ["b"]},
    {"op": "relu", "module": "act2", "inputs": ["b"], "outputs": ["c"]},
    {"op": "linear", "module": "head", "inputs": ["c", "head.weight"], "outputs": ["y"]},
    {"op": "mse_loss", "inputs": ["y", "t"], "outputs": ["loss"]}],
  "loss": "loss")";

std::vector<std::string> OpList(const Graph& g) {
  std::vector<std::string> v;
  for (const Op& op : g.ops) v.push_back(std::string(OpKindName(op.kind)) + "@" + op.module);
  return v;
}

TEST(Fp8SpecTest, ParsesRecipeAndTargets) {
  Result<Fp8Config> c = ParseFp8Spec("rowwise,targets=*.c_fc,*.c_proj");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->recipe, "rowwise");
  EXPECT_EQ(c->targets, (std::vector<std::string>{"*.c_fc", "*.c_proj"}));
  EXPECT_EQ(c->ToString(), "rowwise,targets=*.c_fc,*.c_proj");
  EXPECT_TRUE(ParseFp8Spec("tensorwise").ok());
  Result<Fp8Config> f = ParseFp8Spec("tensorwise,fsdp_float8_all_gather,targets=fc*");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->fsdp_float8_all_gather);
  EXPECT_EQ(f->ToString(), "tensorwise,fsdp_float8_all_gather,targets=fc*");
  // torchao: "enable_fsdp_float8_all_gather only supports tensorwise scaling granularity"
  Result<Fp8Config> rw = ParseFp8Spec("rowwise,fsdp_float8_all_gather");
  ASSERT_FALSE(rw.ok());
  EXPECT_NE(rw.status().message().find("needs tensorwise"), std::string::npos) << rw.status().message();
  for (const char* bad : {"", "delayed", "tensorwise,r=2"}) {
    Result<Fp8Config> b = ParseFp8Spec(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--fp8"), std::string::npos) << b.status().message();
  }
}

TEST(Fp8RewriteTest, DefaultTargetsAreLinearsWithFeaturesMultiplesOf16) {
  Result<Graph> f = ApplyFp8(ParseBody(kMlp), *ParseFp8Spec("tensorwise"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(OpList(*f), (std::vector<std::string>{"fp8_linear@fc1", "to_dtype@fc1", "add@fc1", "relu@act",
                                                  "fp8_linear@fc2", "relu@act2", "linear@head", "mse_loss@"}));
  EXPECT_EQ(f->ops[0].attrs.GetString("recipe", ""), "tensorwise");
  EXPECT_EQ(f->tensors[f->ops[2].outputs[0]].name, "h");  // the add produces the Linear's output
  EXPECT_EQ(f->ops[0].inputs.size(), 2u);
  // self.bias.to(output.dtype): the bias cast to the GEMM output's dtype, then added
  ASSERT_EQ(f->ops[1].inputs.size(), 2u);
  EXPECT_EQ(f->tensors[f->ops[1].inputs[0]].name, "fc1.bias");
  EXPECT_EQ(f->ops[1].inputs[1], f->ops[0].outputs[0]);
  EXPECT_EQ(f->ops[2].inputs, (std::vector<TensorId>{f->ops[0].outputs[0], f->ops[1].outputs[0]}));
  for (OpId o = 0; o < f->ops.size(); ++o)
    for (TensorId t : f->ops[o].outputs) EXPECT_EQ(f->tensors[t].producer, o);
}

// Note [Transformer Engine]: each converted module's float8 weight, its transpose and fp8_meta
// become buffers, with one cuBLAS workspace for all.
TEST(Fp8RewriteTest, TransformerEngineAddsEachModulesFloat8StateAsBuffers) {
  Result<Fp8Config> c = ParseFp8Spec("te,amax_history=16");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->ToString(), "te,amax_history=16");
  EXPECT_EQ(ParseFp8Spec("te")->amax_history, 1024);
  EXPECT_FALSE(ParseFp8Spec("te,fsdp_float8_all_gather").ok());
  EXPECT_FALSE(ParseFp8Spec("te,amax_history=0").ok());
  EXPECT_FALSE(ParseFp8Spec("tensorwise,amax_history=16").ok());
  Result<Graph> f = ApplyFp8(ParseBody(kMlp), *c);
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::vector<std::string> names;
  for (TensorId t : f->buffers) names.push_back(f->tensors[t].name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight_fp8", "fc1.weight_t_fp8", "fc1.fp8_meta.scaling_fwd.amax_history",
                                             "fc1.fp8_meta.scaling_bwd.amax_history", "fc1.fp8_meta.scales",
                                             "fc2.weight_fp8", "fc2.weight_t_fp8", "fc2.fp8_meta.scaling_fwd.amax_history",
                                             "fc2.fp8_meta.scaling_bwd.amax_history", "fc2.fp8_meta.scales",
                                             "transformer_engine.cublas_workspace"}));
  const Tensor& wt = f->tensors[f->buffers[1]];
  EXPECT_EQ(wt.dtype, Dtype::kUInt8);
  EXPECT_EQ(wt.shape[0].coeff, 32);  // fc1.weight [64, 32] transposed
  EXPECT_EQ(f->tensors[f->buffers[2]].shape[0].coeff, 16);
  EXPECT_EQ(f->ops[0].attrs.GetString("recipe", ""), "te");
}

TEST(Fp8RewriteTest, FsdpFloat8AllGatherMarksTheWeightsFloat8) {
  Result<Graph> f = ApplyFp8(ParseBody(kMlp), *ParseFp8Spec("tensorwise,fsdp_float8_all_gather"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->ops[0].attrs.GetString("weight", ""), "float8");
  Result<Graph> plain = ApplyFp8(ParseBody(kMlp), *ParseFp8Spec("tensorwise"));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->ops[0].attrs.GetString("weight", ""), "");
}

TEST(Fp8RewriteTest, ExplicitTargetsAndTheirErrors) {
  Graph g = ParseBody(kMlp);
  Result<Graph> f = ApplyFp8(g, *ParseFp8Spec("rowwise,targets=fc2"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(OpList(*f)[0], "linear@fc1");
  EXPECT_EQ(OpList(*f)[2], "fp8_linear@fc2");
  Result<Graph> head = ApplyFp8(g, *ParseFp8Spec("tensorwise,targets=head"));
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("multiples of 16"), std::string::npos) << head.status().message();
  EXPECT_FALSE(ApplyFp8(g, *ParseFp8Spec("tensorwise,targets=q_proj")).ok());
}

}  // namespace
}  // namespace memsim
