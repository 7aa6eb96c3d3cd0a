// lib/util/text_limits: nesting check without recursion, short excerpts, clear file errors.
#include "lib/util/text_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

TEST(TextLimitsTest, DepthWithinLimitPasses) {
  EXPECT_TRUE(CheckJsonDepth(R"({"a": [[1], {"b": [2]}]})", "f").ok());
  // Brackets inside strings do not count, escaped quotes do not end a string.
  EXPECT_TRUE(CheckJsonDepth("\"[[[[\\\"[[[[\"", "f", 2).ok());
}

TEST(TextLimitsTest, DeepNestingNamesLineAndColumn) {
  const std::string deep = "{\n \"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  Status s = CheckJsonDepth(deep, "g.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("g.json:2:"));
  EXPECT_THAT(s.message(), HasSubstr("nested deeper than 64"));
  EXPECT_LT(s.message().size(), 120u);
}

TEST(TextLimitsTest, ExcerptCutsLongTextAndKeepsUtf8Whole) {
  EXPECT_EQ(Excerpt("short"), "short");
  const std::string e = Excerpt(std::string(1000, 'x'), 10);
  EXPECT_EQ(e, "xxxxxxxxxx...");
  // "é" is two bytes; a cut inside it backs up to before it.
  EXPECT_EQ(Excerpt("abcdefghi\xc3\xa9z", 10), "abcdefghi...");
}

TEST(TextLimitsTest, LineColumnCountsNewlines) {
  EXPECT_EQ(LineColumn("ab\ncd", 4), "2:2");
  EXPECT_EQ(LineColumn("", 0), "1:1");
}

TEST(TextLimitsTest, DirectoryIsReportedAsADirectory) {
  auto r = ReadInputFile(test_data::TestDataPath(""));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is a directory"));
}

TEST(TextLimitsTest, MissingFileIsNotFound) {
  auto r = ReadInputFile("/nonexistent/file.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/file.json"));
}

TEST(TextLimitsTest, ReadsRegularFileAndEnforcesTheSizeLimit) {
  auto ok = ReadInputFile(test_data::TestDataPath("README.md"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_THAT(*ok, HasSubstr("stands alone"));
  auto big = ReadInputFile(test_data::TestDataPath("README.md"), 10);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("too large"));
}

TEST(TextLimitsTest, EscapeControlKeepsANameOnOneLine) {
  EXPECT_EQ(EscapeControl("mlp"), "mlp");
  EXPECT_EQ(EscapeControl("a\nb\tc\\d\x7f"), "a\\x0ab\\x09c\\\\d\\x7f");
  EXPECT_EQ(EscapeControl("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 kept
}

TEST(TextLimitsTest, CsvFieldQuotesAsRfc4180) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField(" padded"), "\" padded\"");
  EXPECT_EQ(CsvField(""), "");
}

TEST(TextLimitsTest, NonRegularFileIsCappedWhileReading) {
  // /dev/zero never ends: without a cap checked while reading, this would read 2 GiB.
  auto r = ReadInputFile("/dev/zero");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("/dev/zero: input larger than 67108864 bytes"));
  EXPECT_THAT(r.status().message(), HasSubstr("pipe or device"));
}

}  // namespace
}  // namespace memsim
