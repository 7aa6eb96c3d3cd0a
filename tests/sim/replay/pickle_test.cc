#include "sim/replay/pickle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

std::string B(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

// {'a': 1, 'b': [2, 3]} as pickle.dumps(..., protocol=2) writes it.
const std::string kSmall = std::string("\x80\x02}q\x00(X\x01\x00\x00\x00", 11) + "aK\x01" +
                           std::string("X\x01\x00\x00\x00", 5) + "b]q\x01(K\x02K\x03" + "eu.";

std::string ErrorOf(const std::string& data, PickleLimits limits = {}) {
  auto r = ParsePickle(data, limits);
  EXPECT_FALSE(r.ok()) << "accepted hostile input";
  return r.ok() ? "" : r.status().message();
}

TEST(PickleTest, ParsesPlainDataProtocol2) {
  auto r = ParsePickle(kSmall);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PyValue& root = r->root();
  ASSERT_TRUE(root.is_dict());
  ASSERT_NE(root.Get("a"), nullptr);
  EXPECT_EQ(root.Get("a")->as_int(), 1);
  const PyValue* b = root.Get("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->items().size(), 2u);
  EXPECT_EQ(b->items()[1]->as_int(), 3);
  EXPECT_EQ(root.Get("zzz"), nullptr);
}

TEST(PickleTest, ParsesScalarsTuplesAndMemoSharing) {
  // (None, True, False, -2, 2**40, 2**70, 1.5, b'xy', 'é', (), (1, 2), l, l) with l = [7]
  std::string d = B({0x80, 0x04, 0x95}) + std::string(8, '\0') + "(N" + B({0x88, 0x89}) + "J" +
                  B({0xfe, 0xff, 0xff, 0xff}) + B({0x8a, 0x06, 0, 0, 0, 0, 0, 1}) +
                  B({0x8a, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x40}) + "G" +
                  B({0x3f, 0xf8, 0, 0, 0, 0, 0, 0}) + "C" + B({2}) + "xy" +
                  B({0x8c, 2, 0xc3, 0xa9}) + ")K" + B({1}) + "K" + B({2}) + B({0x86}) + "]" +
                  B({0x94}) + "K" + B({7}) + "a" + "h" + B({0}) + "t.";
  auto r = ParsePickle(d);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& it = r->root().items();
  ASSERT_EQ(it.size(), 13u);
  EXPECT_TRUE(it[0]->is_none());
  EXPECT_EQ(it[1]->kind(), PyValue::Kind::kBool);
  EXPECT_TRUE(it[1]->as_bool());
  EXPECT_FALSE(it[2]->as_bool());
  EXPECT_EQ(it[3]->as_int(), -2);
  EXPECT_EQ(it[4]->as_int(), int64_t{1} << 40);
  EXPECT_EQ(it[5]->kind(), PyValue::Kind::kBigInt);
  EXPECT_DOUBLE_EQ(it[6]->as_float(), 1.5);
  EXPECT_EQ(it[7]->kind(), PyValue::Kind::kBytes);
  EXPECT_EQ(it[7]->as_str(), "xy");
  EXPECT_EQ(it[8]->as_str(), "\xc3\xa9");
  EXPECT_EQ(it[9]->kind(), PyValue::Kind::kTuple);
  EXPECT_EQ(it[10]->items().size(), 2u);
  EXPECT_EQ(it[11], it[12]);
  EXPECT_EQ(it[11]->items().size(), 1u);
}

TEST(PickleTest, MemoGetSharesObjects) {
  // [l, l] where l = [7]: both entries are the same object.
  std::string d = B({0x80, 0x02}) + "](]q" + B({1}) + "K" + B({7}) + "ah" + B({1}) + "e.";
  auto r = ParsePickle(d);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->root().items().size(), 2u);
  EXPECT_EQ(r->root().items()[0], r->root().items()[1]);
}

TEST(PickleTest, RefusesEveryImportOrCallOpcode) {
  const std::pair<int, const char*> refused[] = {
      {'c', "GLOBAL"},    {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},          {'b', "BUILD"},
      {'i', "INST"},      {'o', "OBJ"},           {0x81, "NEWOBJ"},         {0x92, "NEWOBJ_EX"},
      {0x82, "EXT1"},     {0x83, "EXT2"},         {0x84, "EXT4"},           {'P', "PERSID"},
      {'Q', "BINPERSID"}, {0x97, "NEXT_BUFFER"},  {0x98, "READONLY_BUFFER"}};
  for (auto [op, name] : refused) {
    std::string msg = ErrorOf(B({0x80, 0x02, 'N', op}) + ".");
    EXPECT_THAT(msg, HasSubstr(name));
    EXPECT_THAT(msg, HasSubstr("only plain data"));
    EXPECT_THAT(msg, HasSubstr("offset 3"));
  }
  // The classic exploit: os.system via GLOBAL + REDUCE.
  EXPECT_THAT(ErrorOf("\x80\x02"
                      "cos\nsystem\nX\x02\x00\x00\x00id\x85R."),
              HasSubstr("GLOBAL"));
}

TEST(PickleTest, EveryTruncationIsAnError) {
  for (size_t n = 0; n < kSmall.size(); ++n) {
    auto r = ParsePickle(kSmall.substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes accepted";
  }
}

TEST(PickleTest, UnknownOpcodesAndBadProtocol) {
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 0xff})), HasSubstr("unknown opcode 0xff"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 0x00})), HasSubstr("unknown opcode 0x00"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x09, 'N', '.'})), HasSubstr("protocol 9"));
}

TEST(PickleTest, HugeLengthClaimsFailWithoutAllocating) {
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 'X', 0xff, 0xff, 0xff, 0xff, 'a', '.'})),
              HasSubstr("truncated"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x04, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '.'})),
              HasSubstr("truncated"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x04, 0x8e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '.'})),
              HasSubstr("truncated"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 0x8b, 0xff, 0xff, 0xff, 0x7f, '.'})), HasSubstr("truncated"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 0x8b, 0xff, 0xff, 0xff, 0xff, '.'})), HasSubstr("negative"));
  EXPECT_THAT(
      ErrorOf(B({0x80, 0x04, 0x95, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 'N', '.'})),
      HasSubstr("FRAME"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 'j', 0xff, 0xff, 0xff, 0xff, '.'})), HasSubstr("memo key"));
}

TEST(PickleTest, DeepNestingIsRejected) {
  auto nested = [](int depth) {
    std::string d = B({0x80, 0x02});
    for (int k = 0; k < depth; ++k) d += "]";
    for (int k = 1; k < depth; ++k) d += "a";
    return d + ".";
  };
  EXPECT_TRUE(ParsePickle(nested(50)).ok());
  EXPECT_THAT(ErrorOf(nested(101)), HasSubstr("nesting deeper than 100"));
  PickleLimits dense;  // one value per byte allowed, so the nesting check is what refuses it
  dense.bytes_per_value = 1;
  EXPECT_THAT(ErrorOf(nested(100000), dense), HasSubstr("nesting"));
  // With the default budget, 100,000 containers in 200 kB are refused even earlier.
  EXPECT_THAT(ErrorOf(nested(100000)), HasSubstr("more values than a pickle of 200002 bytes"));
}

// Found by snapshot_fuzz: a protocol-0 INT opcode ('L') whose line ran over 5 KB of the file
// was quoted whole in the message (4,370 bytes).
TEST(PickleTest, LongBadIntegerLineIsQuotedAsAnExcerpt) {
  const std::string data = B({0x80, 0x04}) + "L6666{" + std::string(5000, '6') + "\n.";
  const std::string m = ErrorOf(data);
  EXPECT_THAT(m, HasSubstr("bad integer '6666{6666"));
  EXPECT_LT(m.size(), 120u);
}

TEST(PickleTest, RecursiveStructureIsRejected) {
  // l = []; l.append(l)
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, ']', 'q', 0, 'h', 0, 'a', '.'})), HasSubstr("recursive"));
}

TEST(PickleTest, StackMisuseIsAnError) {
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 'a', '.'})), HasSubstr("underflow"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 'N', 'N', '.'})), HasSubstr("STOP with 2"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, '}', '(', 'N', 'u', '.'})), HasSubstr("odd"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, '}', 'N', 'a', '.'})), HasSubstr("APPEND"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, '}', ']', 'N', 's', '.'})), HasSubstr("unhashable"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, 'e', '.'})), HasSubstr("MARK"));
  EXPECT_THAT(ErrorOf(B({0x80, 0x02, '(', 'N', '.'})), HasSubstr("STOP"));
}

TEST(PickleTest, InputSizeLimit) {
  PickleLimits limits;
  limits.max_bytes = 8;
  EXPECT_THAT(ErrorOf(kSmall, limits), HasSubstr("too large"));
}

// Random mutations of valid pickles (fixed seed): any outcome but a crash is fine.
TEST(PickleTest, FuzzedInputNeverCrashes) {
  std::vector<std::string> seeds = {kSmall};
  std::ifstream real(test_data::TestDataPath("gpu/transformer_small_ctx256_bs32_fwd_bwd_warm.pickle"),
                     std::ios::binary);
  ASSERT_TRUE(real.good()) << "tests/data/gpu is part of the repository";
  {
    std::ostringstream buf;
    buf << real.rdbuf();
    seeds.push_back(buf.str().substr(0, 4096));
  }
  std::mt19937_64 rng(301);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string d = seeds[iter % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !d.empty(); ++k) {
      const size_t at = rng() % d.size();
      switch (rng() % 3) {
        case 0:
          d[at] = static_cast<char>(rng());
          break;
        case 1:
          d.erase(at, 1 + rng() % 8);
          break;
        default:
          d.insert(at, 1, static_cast<char>(rng()));
          break;
      }
    }
    auto r = ParsePickle(d);
    parsed += r.ok();
  }
  SUCCEED() << parsed << " mutants parsed";
}

}  // namespace
}  // namespace memsim
