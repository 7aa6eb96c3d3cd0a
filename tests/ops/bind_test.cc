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

// Sizes are checked before anything adds them up: a 2^62-byte tensor used to overflow the peak
// analysis (UBSan, make test-sanitize). An input past 2^50 bytes and an op output that grows past
// it from small inputs are both refused, each naming its JSON pointer.
TEST(BindTest, TensorsPastTheModelledSizeAreRefusedWithTheirPointer) {
  const Profile profile = *FindProfile("cuda");
  BindOptions opt;
  opt.profile = &profile;  // required (make test-sanitize: UBSan saw a null one bound to a reference)
  auto in = ParseGraph(R"({"format": "memsim-graph", "version": 1, "name": "t",
    "inputs": [{"name": "x", "shape": [1099511627776, 1048576]}],
    "ops": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}]})", "in.json");
  ASSERT_TRUE(in.ok()) << in.status().message();
  auto bound = BindGraph(*in, in->DefaultBindings(), opt);
  ASSERT_FALSE(bound.ok());
  EXPECT_THAT(bound.status().message(),
              HasSubstr("in.json: /inputs/0/name: \"x\" is too large (4611686018427387904 bytes"));

  // [2^25, 1] x [1, 2^25] = 2^50 elements, 2^52 bytes: each input is 128 MiB.
  auto out = ParseGraph(R"({"format": "memsim-graph", "version": 1, "name": "t",
    "inputs": [{"name": "a", "shape": [33554432, 1]}, {"name": "b", "shape": [1, 33554432]}],
    "ops": [{"op": "matmul", "inputs": ["a", "b"], "outputs": ["c"]}]})", "out.json");
  ASSERT_TRUE(out.ok()) << out.status().message();
  bound = BindGraph(*out, out->DefaultBindings(), opt);
  ASSERT_FALSE(bound.ok());
  EXPECT_THAT(bound.status().message(),
              HasSubstr("out.json: /ops/0: output \"c\" is too large (4503599627370496 bytes"));
}

}  // namespace
}  // namespace memsim
