// Autocast (--amp): the op lists per profile, the cast copies and what nodes save, the weight-cast
// cache, ToCopyBackward0 grads, and the promotion of mixed-dtype binary ops (Note [Autocast]).
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "lib/ops/autocast_lists.h"
#include "sim/simulator.h"
#include "tests/autodiff/mlp_fixture.h"
#include "tests/testing/graph_builder.h"
#include "tests/testing/invariants.h"

namespace memsim {
namespace {

Graph Parse(const std::string& body) { return testing::ParseBody(body); }

using testing::SimulateOk;

using testing::Lives;

TEST(AutocastListsTest, CpuAndCudaListsDiffer) {
  // 2.x CUDA runs layer_norm and exp in fp32; 1.13 CPU runs them in the incoming dtype.
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCuda2x, OpKind::kLayerNorm), CastPolicy::kFp32);
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCpu113, OpKind::kLayerNorm), CastPolicy::kNone);
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCuda2x, OpKind::kSoftmax), CastPolicy::kFp32SetOptDtype);
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCpu113, OpKind::kSoftmax), CastPolicy::kNone);
  // 1.13 CPU promotes cat/stack; the CUDA lists leave them alone.
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCpu113, OpKind::kCat), CastPolicy::kPromote);
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCuda2x, OpKind::kCat), CastPolicy::kNone);
  for (AutocastTable t : {AutocastTable::kCuda2x, AutocastTable::kCpu113}) {
    EXPECT_EQ(AutocastPolicy(t, OpKind::kLinear), CastPolicy::kLowerPrecision);
    EXPECT_EQ(AutocastPolicy(t, OpKind::kConv2d), CastPolicy::kLowerPrecision);
    EXPECT_EQ(AutocastPolicy(t, OpKind::kRelu), CastPolicy::kNone);
  }
  // cross_entropy: the CPU casts the logits to fp32; CUDA 2.x runs log_softmax in their dtype and
  // casts its result for nll_loss (Note [Autocast])
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCpu113, OpKind::kCrossEntropy), CastPolicy::kFp32);
  EXPECT_EQ(AutocastPolicy(AutocastTable::kCuda2x, OpKind::kCrossEntropy), CastPolicy::kInnerNllFp32);
}

TEST(AutocastListsTest, CastsAreMadeLastArgumentFirstAndSkipIneligibleInputs) {
  auto x = *TensorMeta::Contiguous(Dtype::kFloat32, {4, 8});
  auto w = *TensorMeta::Contiguous(Dtype::kFloat32, {2, 8});
  auto b = *TensorMeta::Contiguous(Dtype::kFloat32, {2});
  auto casts = AutocastCasts(AutocastTable::kCpu113, OpKind::kLinear, Dtype::kBFloat16, {&x, &w, &b});
  ASSERT_EQ(casts.size(), 3u);
  EXPECT_EQ(casts[0].input, 2);
  EXPECT_EQ(casts[1].input, 1);
  EXPECT_EQ(casts[2].input, 0);
  EXPECT_EQ(casts[2].meta.dtype, Dtype::kBFloat16);
  EXPECT_EQ(casts[2].meta.bytes(), 4 * 8 * 2);
  // Already in the target dtype, integer and fp64 tensors are not cast.
  auto xb = *TensorMeta::Contiguous(Dtype::kBFloat16, {4, 8});
  auto idx = *TensorMeta::Contiguous(Dtype::kInt64, {4});
  auto d = *TensorMeta::Contiguous(Dtype::kFloat64, {4, 8});
  EXPECT_TRUE(AutocastCasts(AutocastTable::kCpu113, OpKind::kLinear, Dtype::kBFloat16, {&xb}).empty());
  EXPECT_TRUE(AutocastCasts(AutocastTable::kCpu113, OpKind::kMm, Dtype::kBFloat16, {&d, &d}).empty());
  auto ce = AutocastCasts(AutocastTable::kCpu113, OpKind::kCrossEntropy, Dtype::kBFloat16, {&xb, &idx});
  ASSERT_EQ(ce.size(), 1u);
  EXPECT_EQ(ce[0].meta.dtype, Dtype::kFloat32);
  // Promote: to the widest floating input; fp16 with bf16 gives fp32.
  auto xh = *TensorMeta::Contiguous(Dtype::kFloat16, {4, 8});
  auto cat = AutocastCasts(AutocastTable::kCpu113, OpKind::kCat, Dtype::kBFloat16, {&xh, &xb});
  ASSERT_EQ(cat.size(), 2u);
  EXPECT_EQ(cat[0].meta.dtype, Dtype::kFloat32);
  // fp32_set_opt_dtype: no copy, the op computes in fp32.
  auto sm = AutocastCasts(AutocastTable::kCuda2x, OpKind::kSoftmax, Dtype::kFloat16, {&xh});
  ASSERT_EQ(sm.size(), 1u);
  EXPECT_FALSE(sm[0].copy);
  EXPECT_EQ(PromoteFloating(Dtype::kFloat32, Dtype::kBFloat16), Dtype::kFloat32);
}

SimOptions MlpAmp(const std::string& profile) {
  SimOptions opt = testing::Opts(profile, "sgd");
  opt.amp = "bf16";
  return opt;
}

TEST(AutocastTest, LinearSavesTheCastCopiesAndTheCacheDiesAtRegionExit) {
  Graph g = Parse(testing::MlpBody());
  SimResult r = SimulateOk(g, MlpAmp("cpu"));
  // x does not require grad: l1 saves nothing of W, so l1.weight's cached cast dies when the
  // region exits (end of forward); l2 saves its weight cast (r requires grad) until backward.
  auto w1 = Lives(r.events, "l1.weight (autocast bfloat16)");
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(w1[0].bytes, 64 * 32 * 2);
  EXPECT_EQ(w1[0].free, Phase::kForward);
  auto w2 = Lives(r.events, "l2.weight (autocast bfloat16)");
  ASSERT_EQ(w2.size(), 1u);
  EXPECT_EQ(w2[0].free, Phase::kBackward);
  // Biases are never saved: their cached casts die at region exit too.
  EXPECT_EQ(Lives(r.events, "l2.bias (autocast bfloat16)")[0].free, Phase::kForward);
  // The bf16 logits are cast to fp32 for cross_entropy (fp32 policy), a transient copy.
  auto logits = Lives(r.events, "logits (autocast float32)");
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(logits[0].bytes, 8 * 10 * 4);
  // Activations are bf16: the relu output is half the fp32 size.
  for (const Buffer& b : r.events.buffers)
    if (b.name == "r") {
      EXPECT_EQ(b.bytes, 8 * 64 * 2);
    }
  // ToCopyBackward0: each weight grad is made in bf16, then cast to an fp32 .grad.
  auto g2 = Lives(r.events, "l2.weight.grad");
  ASSERT_EQ(g2.size(), 2u);
  EXPECT_EQ(g2[0].bytes, 10 * 64 * 2);
  EXPECT_EQ(g2[1].bytes, testing::kW2);
  EXPECT_EQ(g2[0].free, Phase::kBackward);
  EXPECT_EQ(g2[1].free, Phase::kOptimizer);
}

TEST(AutocastTest, TrainableWeightsAreCastOncePerRegionFrozenOnesAtEveryUse) {
  // One weight used by two linears (weight tying).
  Graph g = Parse(R"("inputs": [{"name": "x", "shape": [4, 16]}],
    "parameters": [{"name": "w", "shape": [16, 16]}],
    "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
            {"op": "linear", "inputs": ["h", "w"], "outputs": ["y"]},
            {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}],
    "loss": "loss")");
  SimOptions opt = MlpAmp("cuda");
  SimResult trained = SimulateOk(g, opt);
  EXPECT_EQ(Lives(trained.events, "w (autocast float16)").size(), 0u);  // bf16 asked
  auto casts = Lives(trained.events, "w (autocast bfloat16)");
  EXPECT_EQ(casts.size(), 1u);
  // One ToCopyBackward0 for both uses: the two uses' bf16 grads are summed (into a new buffer: a
  // Linear's weight grad is a view, Note [InputBuffer]), then cast once to the one fp32 .grad.
  auto grads = Lives(trained.events, "w.grad");
  ASSERT_EQ(grads.size(), 4u);
  EXPECT_EQ(grads[0].bytes, 16 * 16 * 2);
  EXPECT_EQ(grads[1].bytes, 16 * 16 * 2);
  EXPECT_EQ(grads[2].bytes, 16 * 16 * 2);
  EXPECT_EQ(grads[3].bytes, 16 * 16 * 4);
  EXPECT_EQ(grads[3].free, Phase::kOptimizer);
  opt.freeze_params = 1;
  SimResult frozen = SimulateOk(g, opt);
  auto fcasts = Lives(frozen.events, "w (autocast bfloat16)");
  ASSERT_EQ(fcasts.size(), 2u);
  // Nothing requires grad once w is frozen: no node saves either copy, each dies with its op.
  EXPECT_EQ(fcasts[0].free, Phase::kForward);
  EXPECT_EQ(fcasts[1].free, Phase::kForward);
}

TEST(AutocastTest, MixedDtypeAddPromotesAndCopiesTheNarrowOperandOnCpu) {
  // An fp32 residual plus a bf16 linear output (the residual of a transformer block).
  Graph g = Parse(R"("inputs": [{"name": "x", "shape": [4, 16]}],
    "parameters": [{"name": "w", "shape": [16, 16]}],
    "ops": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
            {"op": "add", "inputs": ["x", "h"], "outputs": ["y"]},
            {"op": "sum", "inputs": ["y"], "outputs": ["loss"]}],
    "loss": "loss")");
  SimResult cpu = SimulateOk(g, MlpAmp("cpu"));
  for (const Buffer& b : cpu.events.buffers) {
    if (b.name == "y") {
      EXPECT_EQ(b.bytes, 4 * 16 * 4);  // fp32 + bf16 = fp32
    }
    if (b.name == "h") {
      EXPECT_EQ(b.bytes, 4 * 16 * 2);
    }
  }
  size_t copies = 0;
  for (const Buffer& b : cpu.events.buffers)
    if (b.name.find("mixed-dtype input copy") != std::string::npos) {
      ++copies;
      EXPECT_EQ(b.bytes, 4 * 16 * 4);
    }
  EXPECT_EQ(copies, 1u);
  SimResult cuda = SimulateOk(g, MlpAmp("cuda"));
  for (const Buffer& b : cuda.events.buffers) EXPECT_EQ(b.name.find("mixed-dtype input copy"), std::string::npos);
}

TEST(AutocastTest, AmpOffIsTheDefaultAndBadValuesAreErrors) {
  Graph g = Parse(testing::MlpBody());
  SimOptions opt = MlpAmp("cpu");
  opt.amp = "";
  SimResult plain = SimulateOk(g, opt);
  opt.amp = "off";
  EXPECT_EQ(SimulateOk(g, opt).peak.peak_live_bytes, plain.peak.peak_live_bytes);
  opt.amp = "fp8";
  EXPECT_FALSE(Simulate(g, opt).ok());
}

}  // namespace
}  // namespace memsim
