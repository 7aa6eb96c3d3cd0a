#include "sim/allocator/ideal_packing.h"

#include <gtest/gtest.h>

namespace memsim {
namespace {

TEST(IdealPackerTest, BestFitReusesSmallestGap) {
  IdealPacker p;
  int64_t a = p.Allocate(3000);  // 3072
  int64_t b = p.Allocate(512);
  int64_t c = p.Allocate(1024);
  int64_t d = p.Allocate(512);
  p.Free(a, 3000);
  p.Free(c, 1024);
  EXPECT_EQ(p.Allocate(1000), c);  // 1024 gap beats the 3072 gap
  EXPECT_EQ(p.Allocate(2000), a);
  EXPECT_EQ(p.peak_arena_bytes(), 3072 + 512 + 1024 + 512);
  (void)b;
  (void)d;
}

TEST(IdealPackerTest, MergesGapsAndShrinksTop) {
  IdealPacker p;
  int64_t a = p.Allocate(512), b = p.Allocate(512), c = p.Allocate(512);
  p.Free(a, 512);
  p.Free(b, 512);
  EXPECT_EQ(p.Allocate(1024), 0);  // a and b merged
  p.Free(c, 512);
  EXPECT_EQ(p.arena_bytes(), 1024);
  EXPECT_EQ(p.Allocate(2048), 1024);  // extends from the (shrunk) top
  EXPECT_EQ(p.peak_arena_bytes(), 3072);
}

}  // namespace
}  // namespace memsim
