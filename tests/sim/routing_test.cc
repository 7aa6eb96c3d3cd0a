// MoE routing bindings (sim/routing.h, Notes [Routed token counts] and [Expert parallel]): the
// policies, every rank's counts as the kit writes them, and the rows each ep rank receives.
#include "sim/routing.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

TEST(Routing, PoliciesSplitTheRoutedRows) {
  EXPECT_EQ(*RoutedCounts("balanced", 10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(*RoutedCounts("hot=2", 64, 4), (std::vector<int64_t>{32, 11, 11, 10}));
  Result<std::vector<int64_t>> bad = RoutedCounts("skewed", 64, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ranks=C0:C1"), std::string::npos);
}

TEST(Routing, ParsesEveryRanksCountsAsTheKitWritesThem) {
  auto r = ParseRankCounts("ranks=21,6,0,13,13,2,2,7/0,11,14,1,2,25,4,7:21,6,0,15,11,0,1,10/1,14,10,3,0,27,3,6");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1][0], (std::vector<int64_t>{21, 6, 0, 15, 11, 0, 1, 10}));
  EXPECT_EQ((*r)[0][1].size(), 8u);
  EXPECT_TRUE(ParseRankCounts("balanced")->empty());
  Result<std::vector<std::vector<std::vector<int64_t>>>> bad = ParseRankCounts("ranks=1,2:3,x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"3,x\" in rank 1"), std::string::npos) << bad.status().message();
}

TEST(Routing, EachRankReceivesItsLocalExpertsRowsFromEverySource) {
  // moe_mlp_b64_sgd_ep4: one expert per rank; the ranks receive 223, 78, 16 and 195 rows
  const std::vector<std::vector<int64_t>> sources = {{58, 21, 5, 44}, {54, 17, 5, 52}, {57, 20, 2, 49}, {54, 20, 4, 50}};
  const int64_t expect[] = {223, 78, 16, 195};
  for (int rank = 0; rank < 4; ++rank) {
    const auto rows = ReceivedRows(sources, 4, rank);
    ASSERT_EQ(rows.size(), 4u);
    int64_t sum = 0;
    for (const auto& from : rows) {
      ASSERT_EQ(from.size(), 1u);
      sum += from[0];
    }
    EXPECT_EQ(sum, expect[rank]) << "rank " << rank;
  }
  // two local experts per rank: rank 1 of 2 holds experts 2 and 3
  const auto two = ReceivedRows({{29, 9, 2, 24}, {29, 9, 1, 25}}, 2, 1);
  EXPECT_EQ(two[0], (std::vector<int64_t>{2, 24}));
  EXPECT_EQ(two[1], (std::vector<int64_t>{1, 25}));
}

}  // namespace
}  // namespace memsim
