// lib/stream: reference-counted storages emit the event stream.
#include "lib/stream/ledger.h"

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

}  // namespace
}  // namespace memsim
