// LoRA adapters as a graph rewrite (lib/ir/lora.h, Note [LoRA]): the spec, target matching, the
// adapters' shapes, names, order and bytes, the ops PEFT's LoraLayer runs, and the step's memory:
// gradients and optimizer state for the adapters only.
#include "lib/ir/lora.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lib/ops/bind.h"
#include "lib/ops/profile.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ParseBody;

// x [batch, 32] -> fc1 (32 -> 64, bias) -> relu -> fc2 (64 -> 16, no bias) -> mse loss.
const char* kMlp = R"(
  "symbols": {"batch": 4},
  "inputs": [{"name": "x", "shape": ["batch", 32]}, {"name": "t", "shape": ["batch", 16]}],
  "parameters": [{"name": "fc1.weight", "shape": [64, 32]}, {"name": "fc1.bias", "shape": [64]},
                 {"name": "fc2.weight", "shape": [16, 64]}],
  "ops": [
    {"op": "linear", "module": "fc1", "inputs": ["x", "fc1.weight", "fc1.bias"], "outputs": ["h"]},
    {"op": "relu", "module": "act", "inputs": ["h"], "outputs": ["a"]},
    {"op": "linear", "module": "fc2", "inputs": ["a", "fc2.weight"], "outputs": ["y"]},
    {"op": "mse_loss", "inputs": ["y", "t"], "outputs": ["loss"]}],
  "loss": "loss")";

LoraConfig Config(std::vector<std::string> targets, int64_t r = 4, double alpha = 8, double dropout = 0) {
  LoraConfig c;
  c.r = r;
  c.alpha = alpha;
  c.targets = std::move(targets);
  c.dropout = dropout;
  return c;
}

std::vector<std::string> ParamNames(const Graph& g) {
  std::vector<std::string> v;
  for (TensorId t : g.parameters) v.push_back(g.tensors[t].name);
  return v;
}

TEST(LoraSpecTest, ParsesListsQuotesAndDefaults) {
  Result<LoraConfig> c = ParseLoraSpec("r=16,alpha=32,targets='*.q_proj,*.v_proj',dropout=0.05");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->r, 16);
  EXPECT_DOUBLE_EQ(c->alpha, 32);
  EXPECT_EQ(c->targets, (std::vector<std::string>{"*.q_proj", "*.v_proj"}));
  EXPECT_DOUBLE_EQ(c->dropout, 0.05);
  EXPECT_DOUBLE_EQ(c->scaling(), 2.0);
  EXPECT_EQ(c->ToString(), "r=16,alpha=32,targets=*.q_proj,*.v_proj,dropout=0.05");
  Result<LoraConfig> d = ParseLoraSpec("targets=c_attn,r=8");  // PEFT's default lora_alpha is 8
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->scaling(), 1.0);
  Result<LoraConfig> rs = ParseLoraSpec("r=16,alpha=8,targets=c_attn,rslora=on");
  ASSERT_TRUE(rs.ok());
  EXPECT_DOUBLE_EQ(rs->scaling(), 2.0);  // alpha / sqrt(r)
}

TEST(LoraSpecTest, RejectsBadSpecsNamingTheKey) {
  for (const char* bad : {"alpha=8,targets=a", "r=8", "r=0,targets=a", "r=2.5,targets=a", "r=8,targets=a,dropout=1",
                          "r=8,targets=a,bias=all", "r=8,targets=a,dora=maybe", "r=x,targets=a", "r=8,r=4,targets=a"}) {
    Result<LoraConfig> c = ParseLoraSpec(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message().rfind("--lora \"", 0), 0u) << c.status().message();
  }
}

TEST(LoraSpecTest, TargetsMatchAsPeftDoes) {
  EXPECT_TRUE(LoraTargetMatches("q_proj", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(LoraTargetMatches("q_proj", "q_proj"));
  EXPECT_FALSE(LoraTargetMatches("q_proj", "model.layers.0.self_attn.xq_proj"));
  EXPECT_TRUE(LoraTargetMatches("self_attn.q_proj", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(LoraTargetMatches("*.q_proj", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(LoraTargetMatches("layers.[01].*", "layers.1.fc"));
  EXPECT_FALSE(LoraTargetMatches("*.q_proj", "q_proj"));
}

TEST(LoraRewriteTest, AdapterShapesNamesOrderAndFreezing) {
  Graph g = ParseBody(kMlp);
  Result<Graph> l = ApplyLora(g, Config({"fc1", "fc2"}));
  ASSERT_TRUE(l.ok()) << l.status().message();
  // model.parameters() of the peft model: base_layer's, then lora_A and lora_B, per module.
  EXPECT_EQ(ParamNames(*l), (std::vector<std::string>{"fc1.base_layer.weight", "fc1.base_layer.bias",
                                                      "fc1.lora_A.default.weight", "fc1.lora_B.default.weight",
                                                      "fc2.base_layer.weight", "fc2.lora_A.default.weight",
                                                      "fc2.lora_B.default.weight"}));
  std::vector<bool> rg;
  for (TensorId t : l->parameters) rg.push_back(l->tensors[t].requires_grad);
  EXPECT_EQ(rg, (std::vector<bool>{false, false, true, true, false, true, true}));
  Profile cpu = *FindProfile("cpu");
  BindOptions opt;
  opt.profile = &cpu;
  Result<BoundGraph> b = BindGraph(*l, l->DefaultBindings(), opt);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto sizes = [&](const std::string& n) { return b->metas[l->FindTensor(n)].sizes; };
  EXPECT_EQ(sizes("fc1.lora_A.default.weight"), (std::vector<int64_t>{4, 32}));  // [r, in]
  EXPECT_EQ(sizes("fc1.lora_B.default.weight"), (std::vector<int64_t>{64, 4}));  // [out, r]
  EXPECT_EQ(sizes("fc2.lora_A.default.weight"), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(b->metas[l->FindTensor("fc2.lora_B.default.weight")].bytes(), 16 * 4 * 4);
  EXPECT_EQ(sizes("y"), (std::vector<int64_t>{4, 16}));  // the add produces the linear's own output
  ASSERT_TRUE(l->lora);
  EXPECT_EQ(l->lora_adapters, 2u);
  Result<Graph> again = ApplyLora(*l, Config({"fc1"}));
  EXPECT_FALSE(again.ok());
}

TEST(LoraRewriteTest, OpsAreLoraLayerForward) {
  Graph g = ParseBody(kMlp);
  for (double dropout : {0.0, 0.1}) {
    Result<Graph> l = ApplyLora(g, Config({"fc2"}, 4, 16, dropout));
    ASSERT_TRUE(l.ok()) << l.status().message();
    std::vector<std::string> ops;
    for (const Op& op : l->ops) ops.push_back(std::string(OpKindName(op.kind)) + "@" + op.module);
    std::vector<std::string> want = {"linear@fc1", "relu@act", "linear@fc2.base_layer"};
    if (dropout > 0) want.push_back("dropout@fc2.lora_dropout.default");
    want.insert(want.end(), {"linear@fc2.lora_A.default", "linear@fc2.lora_B.default", "mul@fc2", "add@fc2", "mse_loss@"});
    EXPECT_EQ(ops, want) << "dropout " << dropout;
    const Op& mul = l->ops[want.size() - 3];
    EXPECT_DOUBLE_EQ(mul.attrs.GetFloat("scalar", 0), 4.0);  // alpha / r
    EXPECT_EQ(l->tensors[l->ops[want.size() - 2].outputs[0]].name, "y");
    for (OpId o = 0; o < l->ops.size(); ++o)
      for (TensorId t : l->ops[o].outputs) EXPECT_EQ(l->tensors[t].producer, o);
  }
}

TEST(LoraRewriteTest, TargetThatMatchesNoLinearIsAnError) {
  Graph g = ParseBody(kMlp);
  Result<Graph> l = ApplyLora(g, Config({"q_proj"}));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("\"q_proj\" matches no Linear module"), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find("fc1, fc2"), std::string::npos) << l.status().message();
  EXPECT_FALSE(ApplyLora(g, Config({"act"})).ok());  // a ReLU is no Linear
}

TEST(LoraRewriteTest, StepKeepsGradsAndAdamStateForAdaptersOnly) {
  Graph g = ParseBody(kMlp);
  Result<Graph> l = ApplyLora(g, Config({"fc1", "fc2"}));
  ASSERT_TRUE(l.ok());
  SimResult r = testing::SimulateOk(*l, testing::Opts("cpu", "adam"));
  const int64_t adapters = 4 * (4 * 32 + 64 * 4 + 4 * 64 + 16 * 4);
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kOptimizerState), 2 * adapters + 4 * 4);  // exp_avg, exp_avg_sq, step
  for (const std::string base : {"fc1.base_layer.weight", "fc1.base_layer.bias", "fc2.base_layer.weight"})
    EXPECT_TRUE(testing::BuffersContaining(r.events, base + ".grad").empty()) << base;
  EXPECT_EQ(testing::BuffersContaining(r.events, "lora_A.default.weight.grad").size(), 2u) << testing::Dump(r.events);
  EXPECT_EQ(std::count(r.frozen.begin(), r.frozen.end(), true), 3);
}

TEST(DoraRewriteTest, MagnitudeVectorFollowsTheAdapters) {
  Graph g = ParseBody(kMlp);
  LoraConfig c = Config({"fc1", "fc2"});
  c.dora = true;
  Result<Graph> l = ApplyLora(g, c);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(ParamNames(*l), (std::vector<std::string>{
                                "fc1.base_layer.weight", "fc1.base_layer.bias", "fc1.lora_A.default.weight",
                                "fc1.lora_B.default.weight", "fc1.lora_magnitude_vector.default.weight",
                                "fc2.base_layer.weight", "fc2.lora_A.default.weight", "fc2.lora_B.default.weight",
                                "fc2.lora_magnitude_vector.default.weight"}));
  const Tensor& m = l->tensors[l->FindTensor("fc1.lora_magnitude_vector.default.weight")];
  EXPECT_TRUE(m.requires_grad);
  Profile cpu = *FindProfile("cpu");
  BindOptions opt;
  opt.profile = &cpu;
  Result<BoundGraph> b = BindGraph(*l, l->DefaultBindings(), opt);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->metas[l->FindTensor("fc1.lora_magnitude_vector.default.weight")].sizes, (std::vector<int64_t>{64}));
  EXPECT_EQ(b->metas[l->FindTensor("fc2.lora_magnitude_vector.default.weight")].sizes, (std::vector<int64_t>{16}));
  EXPECT_EQ(b->metas[l->FindTensor("y.dora_eye")].sizes, (std::vector<int64_t>{64, 64}));  // eye(in)
  EXPECT_EQ(b->metas[l->FindTensor("y.dora_weight_norm")].sizes, (std::vector<int64_t>{16}));
  EXPECT_EQ(b->metas[l->FindTensor("y")].sizes, (std::vector<int64_t>{4, 16}));
}

TEST(DoraRewriteTest, OpsAreDoraLinearVariantForward) {
  Graph g = ParseBody(kMlp);
  LoraConfig c = Config({"fc1"});
  c.dora = true;
  Result<Graph> l = ApplyLora(g, c);
  ASSERT_TRUE(l.ok()) << l.status().message();
  std::vector<std::string> ops;
  for (const Op& op : l->ops) ops.push_back(std::string(OpKindName(op.kind)));
  // base; get_lora_weight: eye, lora_A, lora_B, .T; get_weight_norm on the detached weight; m / norm;
  // lora_B(lora_A(x)); base - bias; (s - 1) * base + s * lora * scaling; result + that.
  EXPECT_EQ(ops, (std::vector<std::string>{"linear", "full", "linear", "linear", "transpose", "detach", "mul", "add",
                                           "vector_norm", "div", "view", "linear", "linear", "sub", "sub", "mul", "mul",
                                           "mul", "add", "add", "relu", "linear", "mse_loss"}));
  for (OpId o = 0; o < l->ops.size(); ++o)
    for (TensorId t : l->ops[o].outputs) EXPECT_EQ(l->tensors[t].producer, o);
}

TEST(DoraRewriteTest, TheEyeGraphDiesInForward) {
  Graph g = ParseBody(kMlp);
  LoraConfig c = Config({"fc1", "fc2"});
  c.dora = true;
  Result<Graph> l = ApplyLora(g, c);
  ASSERT_TRUE(l.ok());
  SimResult r = testing::SimulateOk(*l, testing::Opts("cpu", "adam"));
  // get_lora_weight's graph is detached: its nodes (and the eye lora_A saves) die as the layer
  // returns (Note [Dead graphs]), not at the end of backward.
  for (const std::string name : {"h.dora_eye", "y.dora_eye", "y.dora_lora_A"}) {
    std::optional<uint32_t> buf = testing::Buffer(r.events, name);
    ASSERT_TRUE(buf) << name << testing::Dump(r.events);
    const MemEvent* f = testing::FreeEvent(r.events, *buf);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->phase, Phase::kForward) << name;
  }
  EXPECT_EQ(testing::BuffersContaining(r.events, "lora_magnitude_vector.default.weight.grad").size(), 2u);
}


// kMlp in bfloat16: inputs and parameters.
std::string Bf16Mlp() {
  std::string body = kMlp;
  for (const std::string shape : {"[\"batch\", 32]}", "[\"batch\", 16]}", "[64, 32]}", "[64]}", "[16, 64]}"}) {
    const size_t at = body.find(shape);
    body.replace(at, shape.size(), shape.substr(0, shape.size() - 1) + ", \"dtype\": \"bfloat16\"}");
  }
  return body;
}

TEST(LoraAdapterDtypeTest, Float32AdaptersOnA16BitBaseCastTheInputAndTheSum) {
  Graph g = ParseBody(Bf16Mlp());
  for (double dropout : {0.0, 0.1}) {
    Result<Graph> l = ApplyLora(g, Config({"fc2"}, 4, 16, dropout));  // autocast_adapter_dtype: peft's default
    ASSERT_TRUE(l.ok()) << l.status().message();
    std::vector<std::string> ops;
    for (const Op& op : l->ops) ops.push_back(std::string(OpKindName(op.kind)) + "@" + op.module);
    std::vector<std::string> want = {"linear@fc1", "relu@act", "linear@fc2.base_layer", "to_dtype@fc2"};
    if (dropout > 0) want.push_back("dropout@fc2.lora_dropout.default");
    want.insert(want.end(), {"linear@fc2.lora_A.default", "linear@fc2.lora_B.default", "mul@fc2", "add@fc2",
                             "to_dtype@fc2", "mse_loss@"});
    EXPECT_EQ(ops, want) << "dropout " << dropout;
    const Op& back = l->ops[want.size() - 2];
    EXPECT_EQ(l->tensors[back.outputs[0]].name, "y");
    EXPECT_EQ(back.attrs.GetString("dtype", ""), "bfloat16");
    // the layer's local x (the float32 copy) lives until the layer returns
    const TensorId cast = l->ops[3].outputs[0];
    EXPECT_NE(std::find(back.keep_alive.begin(), back.keep_alive.end(), cast), back.keep_alive.end());
    Profile cpu = *FindProfile("cpu");
    BindOptions opt;
    opt.profile = &cpu;
    Result<BoundGraph> b = BindGraph(*l, l->DefaultBindings(), opt);
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(b->metas[l->FindTensor("fc2.lora_A.default.weight")].dtype, Dtype::kFloat32);
    EXPECT_EQ(b->metas[l->FindTensor("fc2.lora_B.default.weight")].bytes(), 16 * 4 * 4);
    EXPECT_EQ(b->metas[l->FindTensor("fc2.base_layer.weight")].dtype, Dtype::kBFloat16);
    EXPECT_EQ(b->metas[cast].dtype, Dtype::kFloat32);
    EXPECT_EQ(b->metas[back.inputs[0]].dtype, Dtype::kFloat32);  // bf16 + fp32 promotes
    EXPECT_EQ(b->metas[l->FindTensor("y")].dtype, Dtype::kBFloat16);
  }
}

TEST(LoraAdapterDtypeTest, OffKeepsTheBaseDtypeAndFloat32BasesNeedNoCasts) {
  LoraConfig off = Config({"fc2"});
  off.autocast_adapter_dtype = false;
  EXPECT_EQ(off.ToString(), "r=4,alpha=8,targets=fc2,autocast_adapter_dtype=off");
  Result<LoraConfig> parsed = ParseLoraSpec(off.ToString());
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->autocast_adapter_dtype);
  for (const auto& [body, config] : {std::pair{Bf16Mlp(), off}, std::pair{std::string(kMlp), Config({"fc2"})}}) {
    Result<Graph> l = ApplyLora(ParseBody(body), config);
    ASSERT_TRUE(l.ok()) << l.status().message();
    for (const Op& op : l->ops) EXPECT_NE(op.kind, OpKind::kToDtype);
    EXPECT_EQ(l->tensors[l->FindTensor("fc2.lora_A.default.weight")].dtype,
              l->tensors[l->FindTensor("fc2.base_layer.weight")].dtype);
  }
  LoraConfig dora = Config({"fc2"});
  dora.dora = true;
  Result<Graph> d = ApplyLora(ParseBody(Bf16Mlp()), dora);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("autocast_adapter_dtype=off"), std::string::npos) << d.status().message();
}

TEST(LoraAdapterDtypeTest, AdamStateOfFloat32Adapters) {
  Result<Graph> l = ApplyLora(ParseBody(Bf16Mlp()), Config({"fc1", "fc2"}));
  ASSERT_TRUE(l.ok());
  SimResult r = testing::SimulateOk(*l, testing::Opts("cpu", "adam"));
  const int64_t adapters = 4 * (4 * 32 + 64 * 4 + 4 * 64 + 16 * 4);  // float32
  EXPECT_EQ(testing::LiveAtEnd(r.events, Category::kOptimizerState), 2 * adapters + 4 * 4);
}

}  // namespace
}  // namespace memsim
