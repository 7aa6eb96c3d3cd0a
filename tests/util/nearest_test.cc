// lib/util/nearest: edit distance and the nearest name ("did you mean").
#include "lib/util/nearest.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

TEST(NearestTest, EditDistanceCountsInsertionsDeletionsSubstitutionsIgnoringCase) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("run", "RUN"), 0u);
  EXPECT_EQ(EditDistance("rn", "run"), 1u);
  EXPECT_EQ(EditDistance("fp61", "fp16"), 2u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(NearestTest, NearestNameWithinTheLimitFirstOfTies) {
  const std::vector<std::string_view> names = {"--optimizer", "--offload", "--batch"};
  EXPECT_EQ(NearestName("--optimiser", names), "--optimizer");
  EXPECT_EQ(NearestName("--btach", names, 2), "--batch");
  EXPECT_EQ(NearestName("--zzzz", names), "");
  EXPECT_EQ(NearestName("ab", {"cd", "ab"}, 0), "ab");
  EXPECT_EQ(NearestName("x", {"a", "b"}, 1), "a");
}

}  // namespace
}  // namespace memsim
