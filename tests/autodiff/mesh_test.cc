// --mesh parsing and rank coordinates (Note [Device mesh] in docs/parallel.md).
#include "lib/autodiff/setups/mesh.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

TEST(Mesh, ParsesAnyOrderAndPrintsInMeshOrder) {
  Result<MeshDims> d = ParseMesh("--mesh", "tp=2,dp_shard=4,pp=2");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->tp, 2);
  EXPECT_EQ(d->dp_shard, 4);
  EXPECT_EQ(d->pp, 2);
  EXPECT_EQ(d->world(), 16);
  EXPECT_EQ(d->ToString(), "pp=2,dp_shard=4,tp=2");
  EXPECT_TRUE(d->enabled());
  EXPECT_FALSE(MeshDims{}.enabled());
}

TEST(Mesh, ExpertParallelBorrowsDataAndContextRanks) {
  Result<MeshDims> d = ParseMesh("--mesh", "dp_shard=4,cp=2,ep=8");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->world(), 8);
  Result<MeshDims> bad = ParseMesh("--mesh", "dp_shard=4,ep=3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ep=3 must divide dp_shard*cp = 4"), std::string::npos);
  // alone (no dp_shard or cp to borrow), the ep ranks are the world (Note [Expert parallel])
  Result<MeshDims> alone = ParseMesh("--mesh", "ep=4");
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->world(), 4);
  EXPECT_EQ(alone->ToString(), "ep=4");
}

TEST(Mesh, EpCoordinatesFollowTorchtitansSparseMesh) {
  // (efsdp, ep) over the flattened dp_shard ranks, ep innermost: rank 5 of dp_shard=8,ep=2 is
  // ep rank 1 of efsdp group 2; efsdp has 4 ranks.
  Result<MeshDims> d = ParseMesh("--mesh", "dp_shard=8,ep=2");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(EpCoordOf(*d, 5).ep, 1);
  EXPECT_EQ(EpCoordOf(*d, 5).efsdp, 2);
  EXPECT_EQ(EfsdpDegree(*d), 4);
  // ep alone: the ep index is the rank, efsdp one rank
  Result<MeshDims> alone = ParseMesh("--mesh", "ep=4");
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(EpCoordOf(*alone, 3).ep, 3);
  EXPECT_EQ(EpCoordOf(*alone, 3).efsdp, 0);
  EXPECT_EQ(EfsdpDegree(*alone), 1);
}

TEST(Mesh, RefusesBadItemsWithOneLineNamingThem) {
  struct Case { const char* text; const char* expect; };
  const Case cases[] = {
      {"", "--mesh: empty"},
      {"tp", "'tp' has no '='"},
      {"dp_shrd=2", "unknown dimension 'dp_shrd' (did you mean dp_shard?)"},
      {"tp=2,tp=4", "'tp' is given twice"},
      {"tp=0", "--mesh tp"},
      {"tp=x", "--mesh tp"},
      {"tp=99999999999999999999", "--mesh tp"},
      {"tp=2,", "'' has no '='"},
      {"tp=1000000,pp=1000000", "at most 2^31"},
  };
  for (const Case& c : cases) {
    Result<MeshDims> d = ParseMesh("--mesh", c.text);
    ASSERT_FALSE(d.ok()) << c.text;
    EXPECT_NE(d.status().message().find(c.expect), std::string::npos) << c.text << ": " << d.status().message();
    EXPECT_EQ(d.status().message().find('\n'), std::string::npos);
  }
}

TEST(Mesh, CoordinatesAreRowMajorWithTpInnermost) {
  MeshDims d;
  d.pp = 2;
  d.dp_shard = 2;
  d.tp = 2;
  EXPECT_EQ(CoordOf(d, 0), (MeshCoord{}));
  EXPECT_EQ(CoordOf(d, 1), (MeshCoord{.tp = 1}));
  EXPECT_EQ(CoordOf(d, 2), (MeshCoord{.dp_shard = 1}));
  EXPECT_EQ(CoordOf(d, 5), (MeshCoord{.pp = 1, .tp = 1}));
  EXPECT_EQ(CoordOf(d, 7), (MeshCoord{.pp = 1, .dp_shard = 1, .tp = 1}));
}

}  // namespace
}  // namespace memsim
