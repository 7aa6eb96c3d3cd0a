// F.scaled_dot_product_attention's backend choice per device and release (Note [SDPA backends]).
#include "lib/ops/sdpa_backend.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

SdpaBackend Choose(const char* device, const char* torch, SdpaCall call, const char* arch = "ampere") {
  Profile p = *FindProfile(device, torch);
  p.gpu_arch = arch;
  return ChooseSdpaBackend(p, call);
}

SdpaCall Call(Dtype dt, bool mask = false, double dropout = 0, int64_t hd = 64, int64_t hd_v = 64) {
  SdpaCall c;
  c.dtype = dt;
  c.has_mask = mask;
  c.dropout_p = dropout;
  c.head_dim_qk = hd;
  c.head_dim_v = hd_v;
  return c;
}

TEST(SdpaBackendTest, CpuRunsFlashUnlessDropoutOrUnequalHeadDims) {
  EXPECT_EQ(Choose("cpu", "2.13", Call(Dtype::kFloat32)), SdpaBackend::kFlash);
  EXPECT_EQ(Choose("cpu", "2.13", Call(Dtype::kBFloat16)), SdpaBackend::kFlash);
  EXPECT_EQ(Choose("cpu", "2.13", Call(Dtype::kFloat32, true)), SdpaBackend::kFlash);  // masks accepted
  EXPECT_EQ(Choose("cpu", "2.13", Call(Dtype::kFloat32, false, 0.1)), SdpaBackend::kMath);
  EXPECT_EQ(Choose("cpu", "2.13", Call(Dtype::kFloat32, false, 0, 64, 32)), SdpaBackend::kMath);
}

TEST(SdpaBackendTest, CudaPrefersCudnnOnHopperThenFlashThenEfficient) {
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kBFloat16), "hopper"), SdpaBackend::kCudnn);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kBFloat16, false, 0, 256, 256), "hopper"), SdpaBackend::kFlash);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kBFloat16), "ampere"), SdpaBackend::kFlash);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kFloat16, false, 0.1), "ampere"), SdpaBackend::kFlash);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kFloat32), "ampere"), SdpaBackend::kEfficient);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kBFloat16, true), "ampere"), SdpaBackend::kEfficient);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kFloat16), "volta"), SdpaBackend::kEfficient);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kBFloat16, false, 0, 12, 12), "ampere"), SdpaBackend::kMath);
  EXPECT_EQ(Choose("cuda", "2.13", Call(Dtype::kFloat64), "ampere"), SdpaBackend::kMath);
}

TEST(SdpaBackendTest, Torch113HasNoFusedAttention) {
  EXPECT_EQ(Choose("cpu", "1.13", Call(Dtype::kFloat32)), SdpaBackend::kMath);
  EXPECT_EQ(Choose("cuda", "1.13", Call(Dtype::kBFloat16), "ampere"), SdpaBackend::kMath);
}

TEST(SdpaBackendTest, NamesRoundTrip) {
  for (SdpaBackend b : {SdpaBackend::kFlash, SdpaBackend::kEfficient, SdpaBackend::kCudnn, SdpaBackend::kMath})
    EXPECT_EQ(ParseSdpaBackend(SdpaBackendName(b)), b);
  EXPECT_FALSE(ParseSdpaBackend("fast").has_value());
}

}  // namespace
}  // namespace memsim
