// The torchao float8 linear (lib/ops/rules_fp8.cc, Note [FP8 training]): the high-precision input
// is what the node keeps; the casts' temporaries and fp8 bits die within the op; both grads are
// computed; the CPU's mat2 copy and emulated row-wise GEMM are profile fields.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using ::testing::ElementsAre;
using testing::Opts;

// x [32, 64] -> fp8_linear (w [48, 64]) -> y [32, 48] -> mean; x is the input itself or, when
// |xrg|, a linear's output (so that it requires grad).
std::string Fp8Linear(const std::string& recipe, bool xrg = true) {
  const std::string pre = xrg ? R"({"op": "linear", "inputs": ["x0", "w0"], "outputs": ["x"]},)" : "";
  return R"("inputs": [{"name": ")" + std::string(xrg ? "x0" : "x") + R"(", "shape": [32, )" + (xrg ? "16" : "64") + R"(]}],
      "parameters": [{"name": "w0", "shape": [64, 16]}, {"name": "w", "shape": [48, 64]}],
      "ops": [)" + pre + R"({"op": "fp8_linear", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"recipe": ")" + recipe + R"("}},
              {"op": "mean", "inputs": ["y"], "outputs": ["loss"]}], "loss": "loss")";
}

int64_t Allocated(const testing::Run& run, const std::string& part) {
  return testing::AllocatedContaining(run.r.events, part);
}

TEST(Fp8RuleTest, KeepsTheHighPrecisionInputOnly) {
  auto run = testing::Simulate(Fp8Linear("tensorwise"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_THAT(testing::SavedNames(run, "y"), ElementsAre("x", "w"));
  EXPECT_EQ(testing::SavedActivationBytes(run, "y"), 32 * 64 * 4);
}

TEST(Fp8RuleTest, CastsInForwardAndTwiceInBackward) {
  auto run = testing::Simulate(Fp8Linear("tensorwise"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  // forward: x and Wᵀ; backward: go, Wᵀ, go again, x
  const int64_t x = 32 * 64, w = 48 * 64, go = 32 * 48;
  EXPECT_EQ(Allocated(run, "float8 bits"), (x + w) + (go + w + go + x));
  EXPECT_EQ(Allocated(run, "fp8 cast: scaled"), 4 * ((x + w) + (go + w + go + x)));
  EXPECT_EQ(Allocated(run, "max's contiguous copy"), 4 * 2 * w);  // Wᵀ is not contiguous
  // preprocess_addmm's copies (Wᵀᵀ for grad_input; goᵀ and x for grad_weight) and the CPU kernel's mat2
  EXPECT_EQ(Allocated(run, "contiguous operand"), w + go + x);
  EXPECT_EQ(Allocated(run, "contiguous mat2"), w + w + x);
  auto cuda = testing::Simulate(Fp8Linear("tensorwise"), Opts("cuda"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_EQ(Allocated(cuda, "contiguous mat2"), 0);
  // the backward GEMMs multiply e5m2 by e4m3: emulated on the CPU (fp32 operands)
  EXPECT_EQ(Allocated(run, "fp32 mat_a"), 4 * 2 * go);  // go [M, N] and goᵀ [N, M]
  EXPECT_EQ(Allocated(cuda, "fp32 mat_a"), 0);
}

// Note [Transformer Engine]: te.Linear saves the float8 transpose of its input (one byte an
// element) instead of the high-precision input, casts the grad output with its transpose, and
// runs on CUDA only.
TEST(Fp8RuleTest, TransformerEngineSavesTheFloat8InputTranspose) {
  auto run = testing::Simulate(Fp8Linear("te"), Opts("cuda"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "te.Linear: float8 input transpose"), 32 * 64);
  EXPECT_EQ(Allocated(run, "te.Linear: float8 input"), 2 * 32 * 64);  // the bits and the transpose
  EXPECT_EQ(testing::SavedActivationBytes(run, "y"), 32 * 64 + 12);     // the transpose and scale_inv's clone
  EXPECT_EQ(Allocated(run, "te.Linear: float8 grad output"), 2 * 32 * 48);
  EXPECT_EQ(Allocated(run, "fp8 cast"), 0);  // none of torchao's casts
  auto cpu = testing::Simulate(Fp8Linear("te"), Opts("cpu"));
  EXPECT_FALSE(cpu.ok);
  EXPECT_NE(cpu.error.find("CUDA only"), std::string::npos) << cpu.error;
}

TEST(Fp8RuleTest, ComputesGradInputEvenWhenTheInputNeedsNone) {
  auto run = testing::Simulate(Fp8Linear("tensorwise", /*xrg=*/false), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "unused grad"), 32 * 64 * 4);
}

TEST(Fp8RuleTest, RowwiseScalesPostScaleAndEmulatedCpuGemm) {
  auto run = testing::Simulate(Fp8Linear("rowwise"), Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(Allocated(run, "max's contiguous copy"), 0);  // amax over a dim reads strided
  EXPECT_EQ(Allocated(run, "post scale"), 4 * (32 * 64 + 48 * 64));  // grad_input [32,64], grad_weight [48,64]
  EXPECT_EQ(Allocated(run, "fp32 mat_a"), 4 * 32 * 64);  // the forward GEMM (fast accumulation, row-wise)
  EXPECT_EQ(Allocated(run, "bf16 result"), 2 * (32 * 48 + 32 * 64 + 48 * 64));
  auto cuda = testing::Simulate(Fp8Linear("rowwise"), Opts("cuda"));
  ASSERT_TRUE(cuda.ok) << cuda.error;
  EXPECT_EQ(Allocated(cuda, "fp32 mat_a"), 0);
}

Dtype DtypeOf(const testing::Run& run, const std::string& name) {
  for (TensorId t = 0; t < run.graph.tensors.size(); ++t)
    if (run.graph.tensors[t].name == name) return run.r.bound.metas[t].dtype;
  ADD_FAILURE() << "no tensor " << name;
  return Dtype::kFloat32;
}

SimOptions Amp(const std::string& profile) {
  SimOptions o = Opts(profile);
  o.amp = "bf16";
  return o;
}

// CPU autocast: Float8Linear leaves the fp32 input alone, but torchao's _to_copy handler gives the
// Float8TrainingTensors the autocast dtype as _orig_dtype: the output is bf16, and so are the
// backward's grad output (2-byte abs) and both grads, which validate_outputs casts to fp32.
TEST(Fp8RuleTest, CpuAutocastMakesTheOutputAndTheGradsBf16) {
  auto run = testing::Simulate(Fp8Linear("tensorwise", /*xrg=*/false), Amp("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(DtypeOf(run, "y"), Dtype::kBFloat16);
  EXPECT_EQ(DtypeOf(run, "x"), Dtype::kFloat32);
  EXPECT_EQ(testing::SavedActivationBytes(run, "y"), 0);  // x itself (an input), no cast copy
  const int64_t x = 32 * 64, w = 48 * 64, go = 32 * 48;
  // forward: x, Wᵀ in fp32; backward: go (bf16), Wᵀ (fp32), go (bf16), x (fp32)
  EXPECT_EQ(Allocated(run, "fp8 cast: abs"), 4 * (x + w) + 2 * go + 4 * w + 2 * go + 4 * x);
  EXPECT_EQ(Allocated(run, "fp8 cast: fp32 upcast"), 4 * 2 * go);
  EXPECT_EQ(Allocated(run, "unused grad"), 2 * x);
  EXPECT_EQ(Allocated(run, "w.grad"), 2 * w + 4 * w);  // bf16 from the GEMM, then its fp32 cast
}

// CUDA autocast: Float8Linear.forward casts the input itself (input.to(autocast dtype)), the node
// keeps that copy; the weight stays fp32.
TEST(Fp8RuleTest, CudaAutocastCastsTheInputOnly) {
  auto run = testing::Simulate(Fp8Linear("tensorwise", /*xrg=*/false), Amp("cuda"));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(DtypeOf(run, "y"), Dtype::kBFloat16);
  EXPECT_EQ(testing::SavedActivationBytes(run, "y"), 32 * 64 * 2);
  EXPECT_EQ(Allocated(run, "fp8 cast: abs"), 2 * 32 * 64 + 4 * 48 * 64 + 2 * 32 * 48 + 4 * 48 * 64 + 2 * 32 * 48 +
                                                 2 * 32 * 64);
}

// FSDP2's float8 all-gather hands the GEMMs a Float8TrainingTensor weight: no cast of it.
TEST(Fp8RuleTest, AFloat8WeightIsNotCastAgain) {
  std::string body = Fp8Linear("tensorwise");
  body.replace(body.find(R"("recipe": "tensorwise")"), 22, R"("recipe": "tensorwise", "weight": "float8")");
  auto run = testing::Simulate(body, Opts("cpu"));
  ASSERT_TRUE(run.ok) << run.error;
  const int64_t x = 32 * 64, go = 32 * 48;
  EXPECT_EQ(Allocated(run, "float8 bits"), x + (go + go + x));
  EXPECT_EQ(Allocated(run, "max's contiguous copy"), 0);
}

TEST(Fp8RuleTest, UnknownRecipeIsAnError) {
  auto run = testing::Simulate(Fp8Linear("delayed"), Opts("cpu"));
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.error.find("tensorwise, rowwise or te"), std::string::npos) << run.error;
}

}  // namespace
}  // namespace memsim
