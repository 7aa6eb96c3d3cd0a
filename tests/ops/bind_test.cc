// Binding a graph to symbol values: what it refuses.
#include "lib/ops/bind.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/io/graph_json.h"
#include "lib/ops/profile.h"
#include "tests/testing/test_data.h"

namespace memsim {
namespace {

using ::testing::HasSubstr;

// loss.backward() needs a one-element loss (PyTorch: "grad can be implicitly created only for
// scalar outputs"); a [batch, 4] loss used to be accepted and simulated.
TEST(BindTest, LossThatIsNotOneElementIsRefused) {
  auto g = LoadGraph(test_data::TestDataPath("robustness/graph_loss_not_scalar.json"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  Bindings b = g->DefaultBindings();
  b[g->FindSymbol("batch")] = 8;
  const Profile profile = *FindProfile("cuda");
  BindOptions opt;
  opt.profile = &profile;
  auto bound = BindGraph(*g, b, opt);
  ASSERT_FALSE(bound.ok());
  EXPECT_THAT(bound.status().message(), HasSubstr("/loss: the loss \"y\" has 32 elements"));
  EXPECT_THAT(bound.status().message(), HasSubstr("graph_loss_not_scalar.json"));
}

}  // namespace
}  // namespace memsim
