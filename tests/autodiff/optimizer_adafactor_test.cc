// torch.optim.Adafactor: factored second moments and the for-loop's temporaries (Note [Adafactor]).
#include "lib/autodiff/optimizer_adafactor.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace memsim {
namespace {

OptParam Param(std::vector<int64_t> sizes, uint32_t grad = 0) {
  int64_t n = 1;
  for (int64_t d : sizes) n *= d;
  return OptParam{"w", 4 * n, grad, sizes, 4};
}

TEST(AdafactorTest, MatricesKeepRowAndColumnFactorsVectorsAFullVariance) {
  EXPECT_EQ(AdafactorStateBytes(Param({100, 1000})), (std::vector<int64_t>{100 * 4, 1000 * 4}));
  // ≥3-D: the last two dimensions are factored, the leading ones kept.
  EXPECT_EQ(AdafactorStateBytes(Param({64, 32, 5, 3})), (std::vector<int64_t>{64 * 32 * 5 * 4, 64 * 32 * 3 * 4}));
  EXPECT_EQ(AdafactorStateBytes(Param({100})), (std::vector<int64_t>{400}));
  EXPECT_EQ(AdafactorStateBytes(OptParam{"flat", 4000, 0}), (std::vector<int64_t>{4000}));
}

TEST(AdafactorTest, FirstStepMakesStepAndFactorsThenAFullSizeEstimate) {
  Ledger l;
  std::vector<Ledger::StorageId> states;
  const Profile cpu = *FindProfile("cpu", "2.13");
  RunAdafactorStep(cpu, /*first_step=*/true, {Param({100, 1000}), Param({100})}, &l, &states);
  int64_t state = 0;
  for (auto s : states) state += l.bytes(s);
  EXPECT_EQ(state, 4 + 400 + 4000 + 4 + 400);
  EventStream s = std::move(l).Finish();
  int64_t live = 0, peak = 0;
  for (const MemEvent& e : s.events) {
    live += (e.kind == EventKind::kAlloc ? 1 : -1) * s.bytes(e);
    peak = std::max(peak, live);
  }
  // The matrix's row_mean, col_mean and row_var @ col_var are still held (by the loop's names)
  // when the vector makes grad * grad and variance.clone(); its estimate goes only after the clone.
  EXPECT_EQ(peak, state + 400 + 4000 + 400000 + 400 + 400);
  EXPECT_EQ(live, state);  // every temporary gone at the return
}

}  // namespace
}  // namespace memsim
