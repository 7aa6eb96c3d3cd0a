// Quantized frozen base weights (lib/ir/quantized_base.h, Note [Quantized base weights]): the spec,
// bitsandbytes' byte counts for NF4 / FP4 (with and without double quantization, odd sizes) and
// int8 weights, the rewrite's tensors and ops, and the dequantized weight temporaries of the step.
#include "lib/ir/quantized_base.h"

#include <gtest/gtest.h>

#include "lib/ir/lora.h"
#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ParseBody;

// x [batch, 32] -> fc1 (32 -> 64, bias) -> relu -> fc2 (64 -> 16, no bias) -> lm_head (16 -> 10) -> mse.
const char* kMlp = R"(
  "symbols": {"batch": 4},
  "inputs": [{"name": "x", "shape": ["batch", 32]}, {"name": "t", "shape": ["batch", 10]}],
  "parameters": [{"name": "fc1.weight", "shape": [64, 32]}, {"name": "fc1.bias", "shape": [64]},
                 {"name": "fc2.weight", "shape": [16, 64]}, {"name": "lm_head.weight", "shape": [10, 16]}],
  "ops": [
    {"op": "linear", "module": "fc1", "inputs": ["x", "fc1.weight", "fc1.bias"], "outputs": ["h"]},
    {"op": "relu", "module": "act", "inputs": ["h"], "outputs": ["a"]},
    {"op": "linear", "module": "fc2", "inputs": ["a", "fc2.weight"], "outputs": ["y"]},
    {"op": "linear", "module": "lm_head", "inputs": ["y", "lm_head.weight"], "outputs": ["z"]},
    {"op": "mse_loss", "inputs": ["z", "t"], "outputs": ["loss"]}],
  "loss": "loss")";

QuantizedBaseConfig Spec(const std::string& s) {
  Result<QuantizedBaseConfig> c = ParseQuantizedBaseSpec(s);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : QuantizedBaseConfig{};
}

int64_t TotalBytes(const std::vector<QuantTensor>& v) {
  int64_t n = 0;
  for (const QuantTensor& t : v) n += t.bytes();
  return n;
}

TEST(QuantizedBaseSpecTest, ParsesFormatKeysAndDefaults) {
  QuantizedBaseConfig c = Spec("nf4,double_quant=on,compute=bf16,targets=c_attn,c_fc");
  EXPECT_EQ(c.format, QuantFormat::kNf4);
  EXPECT_TRUE(c.double_quant);
  EXPECT_EQ(c.compute, Dtype::kBFloat16);
  EXPECT_EQ(c.targets, (std::vector<std::string>{"c_attn", "c_fc"}));
  EXPECT_EQ(c.skip, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(c.ToString(), "nf4,double_quant=on,compute=bf16,targets=c_attn,c_fc");
  EXPECT_EQ(Spec(c.ToString()).ToString(), c.ToString());
  EXPECT_EQ(Spec("type=fp4").ToString(), "fp4,double_quant=off");  // transformers' default
  EXPECT_EQ(Spec("int8,skip=none").ToString(), "int8,skip=none");
  EXPECT_TRUE(Spec("int8,skip=none").skip.empty());
}

TEST(QuantizedBaseSpecTest, RejectsBadSpecsNamingTheKey) {
  for (const char* bad : {"", "nf3", "double_quant=on", "nf4,compute=int8", "nf4,double_quant=yes", "nf4,blocksize=48",
                          "int8,double_quant=on", "nf4,foo=1", "nf4,compute=bf16,compute=fp32"}) {
    Result<QuantizedBaseConfig> c = ParseQuantizedBaseSpec(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("--quantize-base"), std::string::npos) << c.status().message();
  }
}

// bitsandbytes 0.50.2 on gpt2's c_attn [2304, 768], measured: uint8 weight [884736, 1], absmax
// float32 [27648] (with double quantization uint8 [27648], nested absmax float32 [108], a 256-entry
// nested code and a 0-dim offset), code float32 [16]; int8: int8 [2304, 768] and SCB float32 [2304].
TEST(QuantizedWeightTest, Nf4AndFp4BytesWithAndWithoutDoubleQuant) {
  for (const char* f : {"nf4", "fp4"}) {
    std::vector<QuantTensor> q = QuantizedWeight(Spec(f), 2304, 768);
    ASSERT_EQ(q.size(), 3u);
    EXPECT_EQ(q[0].shape, (std::vector<int64_t>{884736, 1}));
    EXPECT_EQ(q[1].suffix, "absmax");
    EXPECT_EQ(q[1].bytes(), 27648 * 4);
    EXPECT_EQ(TotalBytes(q), 884736 + 27648 * 4 + 64);
    std::vector<QuantTensor> d = QuantizedWeight(Spec(std::string(f) + ",double_quant=on"), 2304, 768);
    ASSERT_EQ(d.size(), 6u);
    EXPECT_EQ(TotalBytes(d), 884736 + 27648 + 64 + 108 * 4 + 1024 + 4);
  }
}

TEST(QuantizedWeightTest, OddSizesRoundUpThePackingAndTheBlocks) {
  // 7 × 9 = 63 values: 32 bytes of nibbles, one 64-value block, one nested block.
  std::vector<QuantTensor> q = QuantizedWeight(Spec("nf4"), 7, 9);
  EXPECT_EQ(q[0].bytes(), 32);
  EXPECT_EQ(q[1].bytes(), 4);
  std::vector<QuantTensor> d = QuantizedWeight(Spec("nf4,double_quant=on"), 7, 9);
  EXPECT_EQ(TotalBytes(d), 32 + 1 + 64 + 4 + 1024 + 4);
  // 1001 × 333 = 333333 values: 166667 bytes, 5209 blocks of 64, 21 nested blocks of 256.
  std::vector<QuantTensor> o = QuantizedWeight(Spec("fp4,double_quant=on,blocksize=64"), 1001, 333);
  EXPECT_EQ(o[0].bytes(), 166667);
  EXPECT_EQ(o[1].bytes(), 5209);
  EXPECT_EQ(o[3].bytes(), 21 * 4);
  std::vector<QuantTensor> b = QuantizedWeight(Spec("nf4,blocksize=128"), 1001, 333);
  EXPECT_EQ(b[1].bytes(), 2605 * 4);
}

TEST(QuantizedWeightTest, Int8BytesAreOnePerWeightAndAFloatPerRow) {
  std::vector<QuantTensor> q = QuantizedWeight(Spec("int8"), 2304, 768);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].bytes(), 2304 * 768);
  EXPECT_EQ(q[1].suffix, "SCB");
  EXPECT_EQ(q[1].bytes(), 2304 * 4);
}

TEST(QuantizedBaseRewriteTest, QuantizesEveryLinearButTheHead) {
  Graph g = ParseBody(kMlp);
  Result<Graph> q = ApplyQuantizedBase(g, Spec("nf4,double_quant=on"));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->quantized_linears, 2u);
  EXPECT_EQ(q->ops[0].kind, OpKind::kLinear4bit);
  EXPECT_EQ(q->ops[2].kind, OpKind::kLinear4bit);
  EXPECT_EQ(q->ops[3].kind, OpKind::kLinear);  // lm_head stays
  const Tensor& w = q->tensors[q->FindTensor("fc1.weight")];
  EXPECT_EQ(w.dtype, Dtype::kUInt8);
  EXPECT_EQ(w.shape[0].coeff, 1024);
  EXPECT_FALSE(w.requires_grad);
  EXPECT_NE(q->FindTensor("fc2.weight.nested_absmax"), kNone);
  EXPECT_EQ(q->buffers.size(), 10u);
  EXPECT_FALSE(ApplyQuantizedBase(*q, Spec("nf4")).ok());  // quantized already
  Result<Graph> bad = ApplyQuantizedBase(g, Spec("nf4,targets=q_proj"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"q_proj\" matches no Linear module"), std::string::npos);
}

TEST(QuantizedBaseRewriteTest, LoraBaseLayersAreQuantizedAndClonedNeverTheAdapters) {
  Graph g = ParseBody(kMlp);
  LoraConfig l;
  l.r = 4;
  l.targets = {"fc1", "fc2"};
  Result<Graph> a = ApplyLora(g, l);
  ASSERT_TRUE(a.ok());
  Result<Graph> q = ApplyQuantizedBase(*a, Spec("nf4,targets=fc1,fc2"));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->quantized_linears, 2u);
  for (const Op& op : q->ops) {
    if (op.module.ends_with(".base_layer")) {
      EXPECT_EQ(op.kind, OpKind::kLinear4bit) << op.module;
      EXPECT_TRUE(op.attrs.GetBool("clone", false));
    }
    if (op.module.find(".lora_A") != std::string::npos || op.module.find(".lora_B") != std::string::npos) {
      EXPECT_EQ(op.kind, OpKind::kLinear) << op.module;  // the adapters stay full precision
    }
  }
  EXPECT_EQ(q->tensors[q->FindTensor("fc1.lora_A.default.weight")].dtype, Dtype::kFloat32);
}

// The step: the dequantized weight is a temporary of each quantized linear's forward and of its
// backward (input grad), in the compute dtype; no weight grad exists.
// Regression: the rewrite appends the quant-state buffers while it holds a weight's Tensor&; on a
// model with many Linears the vector grows and the reference must not be read after that.
TEST(QuantizedBaseRewriteTest, EveryQuantStateBufferIsNamedAfterItsWeightOnALargeModel) {
  const Graph g = testing::ZooGraph("llama3_8b");
  ASSERT_FALSE(g.ops.empty());
  auto spec = ParseQuantizedBaseSpec("nf4,double_quant=on,compute=bf16");
  ASSERT_TRUE(spec.ok());
  auto q = ApplyQuantizedBase(g, *spec);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->quantized_linears, 224u);  // 32 layers × 7 projections; lm_head is skipped
  size_t named = 0;
  for (TensorId b : q->buffers) {
    const std::string& name = q->tensors[b].name;
    if (name.find(".weight.") == std::string::npos) continue;
    ++named;
    EXPECT_TRUE(name.starts_with("model.layers.")) << name;
  }
  EXPECT_EQ(named, 224u * 5);  // absmax, code, offset, nested absmax, nested code per weight
}

TEST(QuantizedBaseStepTest, DequantizedWeightIsATemporaryInForwardAndBackward) {
  Graph g = ParseBody(kMlp);
  Result<Graph> q = ApplyQuantizedBase(g, Spec("nf4,targets=fc2"));
  ASSERT_TRUE(q.ok());
  SimResult r = testing::SimulateOk(*q, testing::Opts("cpu", "sgd"));
  size_t n = 0;
  EXPECT_EQ(testing::AllocatedContaining(r.events, "dequantized weight", &n), 2 * 16 * 64 * 4) << testing::Dump(r.events);
  EXPECT_EQ(n, 2u);
  EXPECT_TRUE(testing::BuffersContaining(r.events, "fc2.weight.grad").empty());
  Result<Graph> b = ApplyQuantizedBase(g, Spec("nf4,compute=bf16,double_quant=on,targets=fc2"));
  ASSERT_TRUE(b.ok());
  SimResult rb = testing::SimulateOk(*b, testing::Opts("cpu", "sgd"));
  // forward: bf16 [16, 64]; backward: float32 (QuantState.dtype), then bf16 for the grad's matmul
  EXPECT_EQ(testing::AllocatedContaining(rb.events, "dequantized weight", &n), 16 * 64 * (2 + 4 + 2));
  // 16 blocks of 64: the nested absmax dequantized in forward and in backward
  EXPECT_EQ(testing::AllocatedContaining(rb.events, "absmax dequantized", &n), 2 * 16 * 4);
  Result<Graph> i8 = ApplyQuantizedBase(g, Spec("int8,targets=fc2"));
  ASSERT_TRUE(i8.ok());
  SimResult r8 = testing::SimulateOk(*i8, testing::Opts("cpu", "sgd"));
  EXPECT_EQ(testing::AllocatedContaining(r8.events, "dequantized weight", &n), 2 * 16 * 64 * 4);
  // MatMul8bitFp's ctx.A: fc2's input outlives fc2's backward and fc1's (the graph keeps it)
  std::optional<uint32_t> a = testing::Buffer(r8.events, "a"), g1 = testing::Buffer(r8.events, "fc1.weight.grad");
  ASSERT_TRUE(a && g1) << testing::Dump(r8.events);
  EXPECT_GT(testing::FreeIndex(r8.events, *a), testing::AllocIndex(r8.events, *g1));
  std::optional<uint32_t> a4 = testing::Buffer(r.events, "a"), g4 = testing::Buffer(r.events, "fc1.weight.grad");
  ASSERT_TRUE(a4 && g4);
  EXPECT_LT(testing::FreeIndex(r.events, *a4), testing::AllocIndex(r.events, *g4));  // 4-bit saves nothing of it
}

}  // namespace
}  // namespace memsim
