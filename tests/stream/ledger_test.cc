// lib/stream: reference-counted storages emit the event stream.
#include "lib/stream/ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memsim {
namespace {

TEST(LedgerTest, FreesWhenTheLastReferenceGoesAndTagsPhaseAndOp) {
  Ledger l;
  l.set_phase(Phase::kForward);
  l.set_op(3);
  auto a = l.Alloc(100, "a", Category::kActivation, "m");
  l.Ref(a);
  l.Unref(a);
  EXPECT_EQ(l.refs(a), 1);
  l.set_phase(Phase::kBackward);
  l.Unref(a);
  EventStream s = std::move(l).Finish();
  ASSERT_EQ(s.events.size(), 2u);
  EXPECT_EQ(s.events[0].kind, EventKind::kAlloc);
  EXPECT_EQ(s.events[0].phase, Phase::kForward);
  EXPECT_EQ(s.events[0].op, 3u);
  EXPECT_EQ(s.events[1].kind, EventKind::kFree);
  EXPECT_EQ(s.events[1].phase, Phase::kBackward);
  EXPECT_EQ(s.buffers[a].module, "m");
  EXPECT_EQ(s.bytes(s.events[0]), 100);
}

TEST(LedgerTest, ZeroByteStoragesEmitNothingAndProbeSeesTheState) {
  Ledger l;
  auto z = l.Alloc(0, "empty", Category::kTemporary);
  size_t live_at_probe = 0;
  l.set_probe(0, [&] { live_at_probe = l.Live().size(); });
  auto a = l.Alloc(8, "a", Category::kTemporary);
  l.Unref(z);
  l.Unref(a);
  EventStream s = std::move(l).Finish();
  EXPECT_EQ(s.events.size(), 2u);
  EXPECT_EQ(live_at_probe, 1u) << "the probe runs after event 0; a zero-byte storage is never live memory";
}

// The step's storages are summed by the analyses: one past 2^50 bytes, or a total past 2^62, is
// an error naming the storage (the tensor's name when names are recorded), not an overflow.
TEST(LedgerTest, StoragesPastTheModelledSizesAreAnErrorNamingThem) {
  Ledger ok;
  ok.set_record_names(true);
  ok.Alloc(int64_t{1} << 50, "big", Category::kActivation);
  EXPECT_TRUE(ok.CheckBytes().ok());

  Ledger one;
  one.set_record_names(true);
  one.Alloc(8, "a", Category::kActivation);
  one.Alloc((int64_t{1} << 50) + 1, "huge", Category::kActivation);
  ASSERT_FALSE(one.CheckBytes().ok());
  EXPECT_THAT(one.CheckBytes().message(), ::testing::HasSubstr("tensor \"huge\": 1125899906842625 bytes"));

  Ledger total;
  total.set_record_names(false);  // names off (sweep rows): the storage's index; 4096 x 2^50 = 2^62 is still fine
  for (int i = 0; i <= 4096; ++i) total.Alloc(int64_t{1} << 50, {}, Category::kActivation);
  ASSERT_FALSE(total.CheckBytes().ok());
  EXPECT_THAT(total.CheckBytes().message(),
              ::testing::HasSubstr("buffer 4096: the bytes requested by the whole step exceed 2^62"));
}

}  // namespace
}  // namespace memsim
