// The GPU catalog (sim/gpus.h): names as memsim writes them and as torch.cuda.get_device_name()
// prints them, and the suggestion for a name that is not there.
#include "sim/gpus.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

TEST(GpusTest, CatalogAndDeviceNamesFindTheSameGpu) {
  ASSERT_TRUE(FindGpu("A100-40GB"));
  EXPECT_EQ(FindGpu("a100-40gb")->name, "A100-40GB");
  EXPECT_EQ(FindGpu("NVIDIA A100-SXM4-40GB")->name, "A100-40GB");
  EXPECT_EQ(FindGpu("NVIDIA A100 80GB PCIe")->name, "A100-80GB");
  EXPECT_EQ(FindGpu("Tesla V100-SXM2-16GB")->name, "V100-16GB");
  EXPECT_EQ(FindGpu("Tesla T4")->name, "T4");
  EXPECT_EQ(FindGpu("NVIDIA GeForce RTX 4090")->name, "RTX4090");
  EXPECT_EQ(FindGpu("NVIDIA H100 80GB HBM3")->name, "H100-80GB");
  EXPECT_EQ(FindGpu("nvidia h100 80gb hbm3")->memory_bytes, FindGpu("H100-80GB")->memory_bytes);
  EXPECT_FALSE(FindGpu("NVIDIA A100"));  // which one: 40 or 80 GB
}

TEST(GpusTest, NearestNameIsSuggestedWithinThreeEdits) {
  EXPECT_EQ(NearestGpuName("A100-40G"), "A100-40GB");
  EXPECT_EQ(NearestGpuName("v100-16gb"), "V100-16GB");
  EXPECT_EQ(NearestGpuName("RTX-4090"), "RTX4090");
  EXPECT_EQ(NearestGpuName("TPUv5"), "");
}

}  // namespace
}  // namespace memsim
