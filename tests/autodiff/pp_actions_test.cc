// The multi-stage pipeline schedules' action lists against the ones torch 2.13's own code computes
// (tests/data/pp_actions_2_13.txt, written by tests/oracle/kit/pp_actions.py; Note [Pipeline
// parallel] in docs/parallel.md).
#include "lib/autodiff/pp_actions.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/testing/test_data.h"

namespace memsim {
namespace {

PpMulti Named(const std::string& name) {
  if (name == "interleaved1f1b") return PpMulti::kInterleaved1F1B;
  if (name == "interleavedzb") return PpMulti::kInterleavedZeroBubble;
  if (name == "dualpipev") return PpMulti::kDualPipeV;
  return PpMulti::kZBVZeroBubble;
}

/// Every line of |file|: the action lists of the source against PpLowerWithComms(..., |fsdp|).
int CompareLists(const std::string& file, bool fsdp) {
  std::ifstream in(test_data::TestDataPath(file));
  EXPECT_TRUE(in.good()) << file;
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    std::istringstream head(line.substr(0, line.find(':')));
    std::string name;
    int ranks = 0, per_rank = 0, m = 0, rank = 0;
    head >> name >> ranks >> per_rank >> m >> rank;
    const std::vector<std::vector<PpAction>> lists = PpLowerWithComms(Named(name), ranks, per_rank, m, fsdp);
    if (static_cast<int>(lists.size()) != ranks) {
      ADD_FAILURE() << line;
      continue;
    }
    EXPECT_EQ(PpFormat(lists[rank]), line.substr(line.find(':') + 2)) << name << " " << ranks << "x" << per_rank << " m" << m << " rank " << rank;
    ++lines;
  }
  return lines;
}

TEST(PpActionsTest, EveryRankRunsTheSourcesActionList) { EXPECT_EQ(CompareLists("pp_actions_2_13.txt", false), 39); }

TEST(PpActionsTest, FsdpStagesAreUnshardedAheadAndReshardedWhenNoLongerAmongTheNextThree) {
  // _add_unshard_reshard (max_active_stages=3), as torch's own lists hold it.
  EXPECT_EQ(CompareLists("pp_actions_fsdp_2_13.txt", true), 39);
}

TEST(PpActionsTest, StagesGoToRanksLoopStyleOrAsAV) {
  EXPECT_EQ(PpStagesOfRank(PpMulti::kInterleaved1F1B, 4, 2, 1), (std::vector<int>{1, 5}));
  EXPECT_EQ(PpStagesOfRank(PpMulti::kZBVZeroBubble, 4, 2, 1), (std::vector<int>{1, 6}));
  EXPECT_EQ(PpRankOfStage(PpMulti::kZBVZeroBubble, 4, 2, 6), 1);
  EXPECT_EQ(PpStagesOfRank(PpMulti::kDualPipeV, 2, 2, 0), (std::vector<int>{0, 3}));
  EXPECT_EQ(PpRankOfStage(PpMulti::kInterleaved1F1B, 4, 2, 6), 2);
}

TEST(PpActionsTest, RefusesWhatTheConstructorsRefuse) {
  EXPECT_EQ(PpCheck(PpMulti::kInterleaved1F1B, 4, 2, 8), "");
  EXPECT_EQ(PpCheck(PpMulti::kInterleaved1F1B, 4, 2, 9),
            "Interleaved 1F1B requires the number of microbatches to be a multiple of the number of rounds (2), but got 9.");
  EXPECT_EQ(PpCheck(PpMulti::kZBVZeroBubble, 2, 3, 4), "ZBV requires exactly 2 stages per rank, but got 3.");
  EXPECT_EQ(PpCheck(PpMulti::kDualPipeV, 2, 2, 3),
            "DualPipeV requires at least as many microbatches as stages, but got 3 microbatches and 4 stages.");
  EXPECT_EQ(PpCheck(PpMulti::kDualPipeV, 2, 2, 4), "");
}

}  // namespace
}  // namespace memsim
