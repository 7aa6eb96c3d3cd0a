// NCCL communicator buffers outside the allocator (Note [NCCL buffers] in docs/device-memory.md).
#include "sim/nccl.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(Nccl, OneCommunicatorPerDataParallelGroup) {
  ParallelOptions p;
  EXPECT_TRUE(CommunicatorsOf(p).empty());
  p.world = 8;
  p.ddp = true;
  std::vector<NcclCommunicator> c = CommunicatorsOf(p);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].ranks, 8);
  EXPECT_EQ(c[0].kind, "collective");
}

TEST(Nccl, Fsdp2WithContextParallelUsesTheFlattenedDpShardCpGroup) {
  ParallelOptions p;
  p.mesh.dp_shard = 2;
  p.mesh.cp = 4;
  p.world = 8;
  std::vector<NcclCommunicator> c = CommunicatorsOf(p);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, "dp_shard_cp");  // torchtitan's fully_shard mesh: dp_shard × cp
  EXPECT_EQ(c[0].ranks, 8);
  EXPECT_EQ(c[1].name, "cp");  // the ring's all-gather and all-to-all
  EXPECT_EQ(c[1].ranks, 4);
}

TEST(Nccl, MeshDimensionsAndPipelinePeersByStage) {
  ParallelOptions p;
  p.mesh.pp = 4;
  p.mesh.dp_shard = 2;
  p.mesh.tp = 2;
  p.world = 16;
  p.rank = 0;  // the first stage: one pipeline peer
  std::vector<NcclCommunicator> c = CommunicatorsOf(p);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].name, "dp_shard");
  EXPECT_EQ(c[1].name, "tp");
  EXPECT_EQ(c[2].name, "pp");
  EXPECT_EQ(c[2].peers, 1);
  p.rank = 5;  // stage 1 of 4: two peers
  EXPECT_EQ(CommunicatorsOf(p)[2].peers, 2);
  p.mesh = MeshDims{};
  p.mesh.dp_shard = 8;
  p.mesh.ep = 8;
  c = CommunicatorsOf(p);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].kind, "p2p");
  EXPECT_EQ(c[1].peers, 7);  // all-to-all connects every peer
}

TEST(Nccl, MeasuredSizesAndRanges) {
  NcclBuffers two = EstimateNcclBuffers({{"data parallel", 2, "collective", 0}}, "ampere");
  EXPECT_EQ(two.bytes, 544 * kMiB);  // nccl#964
  EXPECT_EQ(two.low, 544 * kMiB);
  EXPECT_EQ(two.high, 1600 * kMiB);  // nccl#864, GPU not stated: widens the range
  NcclBuffers four = EstimateNcclBuffers({{"dp_shard", 4, "collective", 0}, {"tp", 2, "collective", 0}}, "ampere");
  EXPECT_EQ(four.bytes, (688 + 544) * kMiB);
  EXPECT_NE(four.source.find("nccl#964"), std::string::npos);
  // An H100 all-to-all over 8 ranks: 7 peers of 32 channels (nccl#1685).
  NcclBuffers a2a = EstimateNcclBuffers({{"ep", 8, "p2p", 7}}, "hopper");
  EXPECT_EQ(a2a.bytes, 7 * 447 * kMiB);
  // No hopper collective row: ampere's point estimate, said so.
  NcclBuffers h = EstimateNcclBuffers({{"data parallel", 8, "collective", 0}}, "hopper");
  EXPECT_EQ(h.bytes, 688 * kMiB);
  EXPECT_NE(h.source.find("no hopper row, ampere's"), std::string::npos);
}

}  // namespace
}  // namespace memsim
