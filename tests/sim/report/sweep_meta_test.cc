#include <gtest/gtest.h>

#include "sim/report/sweep_report.h"

namespace memsim {
namespace {

TEST(SweepMetaTest, MetaLineRoundTripsWithAnyOptionsText) {
  SweepMeta m{"mlp", 12, SweepFingerprint("{graph}", "--batch=1,2"), 2, 3,
              "--checkpoint=a, shard 9/9, options \"x\" --batch=1,2"};
  for (SweepFormat f : {SweepFormat::kCsv, SweepFormat::kJsonl}) {
    std::string line = SweepMetaLine(m, f);
    line.pop_back();  // the newline
    auto back = ParseSweepMetaLine(line, f);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->model, "mlp");
    EXPECT_EQ(back->configurations, 12u);
    EXPECT_EQ(back->fingerprint, m.fingerprint);
    EXPECT_EQ(back->shard, 2u);
    EXPECT_EQ(back->shards, 3u);
    EXPECT_EQ(back->options, m.options);
  }
}

TEST(SweepMetaTest, FingerprintCoversGraphContentAndEveryOption) {
  const std::string a = SweepFingerprint("{graph}", "--batch=1,2");
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, SweepFingerprint("{graph}", "--batch=1,2"));
  EXPECT_NE(a, SweepFingerprint("{graph }", "--batch=1,2"));
  EXPECT_NE(a, SweepFingerprint("{graph}", "--batch=1,2 --steps=2"));
}

TEST(SweepMetaTest, MismatchNamesTheFirstDifference) {
  SweepMeta run{"mlp", 6, SweepFingerprint("g", "--batch=1,2 --steps=2"), 1, 1, "--batch=1,2 --steps=2"};
  SweepMeta file = run;
  EXPECT_EQ(SweepMetaMismatch(file, run), "");
  file.options = "--batch=1,2";
  file.fingerprint = SweepFingerprint("g", file.options);
  EXPECT_EQ(SweepMetaMismatch(file, run), "options: this sweep has --steps=2, it does not");
  file.options = run.options;
  file.fingerprint = SweepFingerprint("h", file.options);
  EXPECT_EQ(SweepMetaMismatch(file, run), "the same options on a graph file whose content differs");
  file.configurations = 7;
  EXPECT_EQ(SweepMetaMismatch(file, run), "7 configurations, this sweep's 6");
}

}  // namespace
}  // namespace memsim
