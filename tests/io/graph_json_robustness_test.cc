// Regression tests for hostile graph files (tests/data/robustness/graph_*.json, one per class
// found by the fuzzing and hand-crafted-input campaign; docs/robustness.md lists them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& name) {
  auto g = LoadGraph(test_data::TestDataPath("robustness/" + name));
  EXPECT_FALSE(g.ok()) << name << " was accepted";
  if (g.ok()) return "";
  EXPECT_LT(g.status().message().size(), 600u) << "messages quote a short excerpt only";
  EXPECT_THAT(g.status().message(), HasSubstr(name));
  return g.status().message();
}

TEST(GraphJsonRobustnessTest, DeepNestingIsRefusedBeforeParsing) {
  EXPECT_THAT(ErrorOf("graph_deep_nesting.json"), HasSubstr("nested deeper than 64 levels"));
}

TEST(GraphJsonRobustnessTest, DimensionProductThatWrapsNamesTheTensor) {
  const std::string m = ErrorOf("graph_dim_product_wraps.json");
  EXPECT_THAT(m, HasSubstr("/inputs/0/shape/0: dimension \"4294967296*4294967296\" is too large"));
  EXPECT_THAT(m, HasSubstr("(tensor \"x\")"));
}

TEST(GraphJsonRobustnessTest, IntegerBeyond64BitsIsNotAnInteger) {
  EXPECT_THAT(ErrorOf("graph_int_beyond_64_bits.json"), HasSubstr("too large or not an integer"));
}

TEST(GraphJsonRobustnessTest, UnsignedAttributeDoesNotWrapToMinusOne) {
  EXPECT_THAT(ErrorOf("graph_unsigned_attr_wraps.json"), HasSubstr("/ops/0/attrs/dim/0"));
}

TEST(GraphJsonRobustnessTest, LossMustBeComputedByAnOp) {
  EXPECT_THAT(ErrorOf("graph_loss_is_input.json"), HasSubstr("/loss: the loss \"x\" must be computed"));
}

TEST(GraphJsonRobustnessTest, LongValuesAreQuotedAsAnExcerpt) {
  EXPECT_THAT(ErrorOf("graph_long_name_excerpt.json"), HasSubstr("unknown dtype \"fffff"));
}

TEST(GraphJsonRobustnessTest, DirectoryIsReportedAsADirectory) {
  auto g = LoadGraph(test_data::TestDataPath(""));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("is a directory"));
}

TEST(GraphJsonRobustnessTest, EmptyFileSaysSo) {
  auto g = ParseGraph("", "e.json");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("e.json:1:1: invalid JSON: the file is empty"));
}

TEST(GraphJsonRobustnessTest, InvalidUtf8InAValueIsReportedNotThrown) {
  const std::string text = std::string(R"({"format": "memsim-graph", "version": 1, "name": "x",
    "inputs": [{"name": "x", "shape": [2], "dtype": ")") + "\xff\xfe" + R"("}], "ops": []})";
  auto g = ParseGraph(text, "u.json");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("u.json"));
}

}  // namespace
}  // namespace memsim
