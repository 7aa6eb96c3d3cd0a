// The profile table (Note [Version profiles]): each device × release profile has the rows that
// PyTorch's sources and the 1.13 and 2.13 traces decide, and nothing else.
#include "lib/ops/profile.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

namespace memsim {
namespace {

TEST(ProfileTest, Cpu113KeepsThe113Rules) {
  Profile p = *FindProfile("cpu", "1.13");
  EXPECT_EQ(p.name, "cpu");
  EXPECT_EQ(p.torch, "1.13");
  EXPECT_FALSE(p.cuda);
  EXPECT_TRUE(p.mean_keeps_input);
  EXPECT_FALSE(p.linear_nd_addmm);
  EXPECT_FALSE(p.accumulate_inplace);
  EXPECT_TRUE(p.record_function_scratch);
  EXPECT_FALSE(p.checkpoint_early_stop);
  EXPECT_FALSE(p.fused_sdpa);
  EXPECT_TRUE(p.onednn_conv_reorders);
  EXPECT_EQ(p.autocast_table, AutocastTable::kCpu113);
  EXPECT_EQ(p.alloc_conf_env, "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(FindProfile("cuda", "2.13")->alloc_conf_env, "PYTORCH_ALLOC_CONF");
}

TEST(ProfileTest, Cpu213HasThe2xReleaseRowsAndTheCpuDeviceRows) {
  Profile p = *FindProfile("cpu", "2.13");
  EXPECT_EQ(p.torch, "2.13");
  EXPECT_FALSE(p.cuda);
  // release rows: as on CUDA 2.x (the 2.13 CPU traces: MeanBackward keeps no input, no
  // record_function scratch in optimizer.step())
  EXPECT_FALSE(p.mean_keeps_input);
  EXPECT_TRUE(p.linear_nd_addmm);
  EXPECT_TRUE(p.accumulate_inplace);  // can_accumulate_inplace, no dispatch mode (Note [InputBuffer])
  EXPECT_FALSE(p.dispatch_mode);
  EXPECT_FALSE(p.record_function_scratch);
  EXPECT_TRUE(p.checkpoint_early_stop);
  EXPECT_TRUE(p.fused_sdpa);
  // device rows: as on the 1.13 CPU
  EXPECT_TRUE(p.dropout_keeps_noise);
  EXPECT_FALSE(p.optimizer_foreach);
  EXPECT_TRUE(p.onednn_conv_reorders);
  EXPECT_EQ(p.cublas_workspace_bytes, 0);
  EXPECT_EQ(p.checkpoint_rng_state_bytes, 5056);
}

TEST(ProfileTest, Cuda213IsTheDefaults) {
  Profile p = *FindProfile("cuda");
  Profile d;
  EXPECT_EQ(p.torch, "2.13");
  EXPECT_TRUE(p.cuda);
  EXPECT_EQ(p.mean_keeps_input, d.mean_keeps_input);
  EXPECT_EQ(p.optimizer_foreach, d.optimizer_foreach);
  EXPECT_EQ(p.cublas_workspace_bytes, d.cublas_workspace_bytes);
  EXPECT_EQ(p.autocast_table, AutocastTable::kCuda2x);
  Profile old = *FindProfile("cuda", "1.13");
  EXPECT_TRUE(old.cuda);
  EXPECT_TRUE(old.mean_keeps_input);
  EXPECT_FALSE(old.record_function_scratch);  // a CPU 1.13 row only
}

TEST(ProfileTest, UnknownDeviceOrReleaseIsRefused) {
  EXPECT_FALSE(FindProfile("tpu").has_value());
  EXPECT_FALSE(FindProfile("cpu", "2.0").has_value());
  EXPECT_FALSE(FindProfile("cuda", "").has_value());
}

// --cpu-isa: avx512 and amx run bf16 convolutions and GEMMs through oneDNN; amx takes the AMX
// matmul's scratchpads only where oneDNN 3.x runs (2.x), not under 1.13's oneDNN 2.6.
TEST(ProfileTest, CpuIsaSetsTheOneDnnPaths) {
  Profile p = *FindProfile("cpu", "2.13");
  EXPECT_FALSE(ApplyCpuIsa("sse2", &p));
  ASSERT_TRUE(ApplyCpuIsa("amx", &p));
  EXPECT_TRUE(p.bf16_conv_onednn);
  EXPECT_TRUE(p.bf16_gemm_amx);
  ASSERT_TRUE(ApplyCpuIsa("avx512", &p));
  EXPECT_TRUE(p.bf16_conv_onednn);
  EXPECT_FALSE(p.bf16_gemm_amx);
  ASSERT_TRUE(ApplyCpuIsa("avx2", &p));
  EXPECT_FALSE(p.bf16_conv_onednn);
  Profile old = *FindProfile("cpu", "1.13");
  ASSERT_TRUE(ApplyCpuIsa("amx", &old));
  EXPECT_TRUE(old.bf16_conv_onednn);
  EXPECT_FALSE(old.bf16_gemm_amx);
}

TEST(ProfileTest, EveryRowIsOneFieldForOneDeviceAndReleaseWithItsSource) {
  std::set<std::tuple<std::string_view, std::string_view, std::string_view>> seen;
  for (const ProfileRow& r : ProfileRows()) {
    EXPECT_TRUE(seen.insert({r.field, r.device, r.torch}).second) << r.field;
    EXPECT_FALSE(r.source.empty()) << r.field;
    EXPECT_TRUE(r.device.empty() || r.device == "cpu" || r.device == "cuda") << r.field;
    EXPECT_TRUE(r.torch.empty() || r.torch == "1.13" || r.torch == "2.13") << r.field;
  }
}

TEST(ProfileTest, TorchVersionStringsMapToTheReleaseWithRules) {
  EXPECT_EQ(TorchReleaseFor("2.13.0"), "2.13");
  EXPECT_EQ(TorchReleaseFor("2.11.0+cu128"), "2.13");
  EXPECT_EQ(TorchReleaseFor("1.13.0a0"), "1.13");
  EXPECT_FALSE(TorchReleaseFor("").has_value());
  EXPECT_FALSE(TorchReleaseFor("abc").has_value());
  EXPECT_FALSE(TorchReleaseFor("3.0.0").has_value());
  EXPECT_FALSE(TorchReleaseFor("2").has_value());
}

}  // namespace
}  // namespace memsim
