// lib/ir: symbolic dims, dtypes, the op vocabulary, module apply order.
#include <gtest/gtest.h>

#include "lib/ir/dim.h"
#include "lib/ir/dtype.h"
#include "lib/ir/graph.h"
#include "lib/ir/op_kind.h"

namespace memsim {
namespace {

TEST(DimExprTest, EvaluatesProductsAndRefusesUnboundOrOverflowingOnes) {
  DimExpr d{12, {0, 1}};
  EXPECT_EQ(d.Eval({int64_t{4}, int64_t{3}}), 144);
  EXPECT_EQ(d.Eval({int64_t{4}, std::nullopt}), std::nullopt);
  EXPECT_EQ((DimExpr{1, {0, 0}}.Eval({int64_t{1} << 32})), std::nullopt) << "2^64 overflows";
  EXPECT_EQ(d.ToString({"batch", "seq"}), "12*batch*seq");
  EXPECT_EQ(DimExpr::Const(7).ToString({}), "7");
  EXPECT_TRUE(DimExpr::Const(7).is_const());
}

TEST(DtypeTest, SizesNamesAndFloatingKinds) {
  for (const char* name : {"float32", "float16", "bfloat16", "int64", "bool"}) {
    auto t = ParseDtype(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(DtypeName(*t), name);
  }
  EXPECT_EQ(ElementSize(*ParseDtype("float16")), 2);
  EXPECT_EQ(ElementSize(*ParseDtype("int64")), 8);
  EXPECT_TRUE(IsFloating(*ParseDtype("bfloat16")));
  EXPECT_FALSE(IsFloating(*ParseDtype("int64")));
  EXPECT_FALSE(ParseDtype("float128").has_value());
}

TEST(OpKindTest, EveryKindRoundTripsThroughItsName) {
  ASSERT_GT(kNumOpKinds, 50u);
  for (size_t k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    auto parsed = ParseOpKind(OpKindName(kind));
    ASSERT_TRUE(parsed.has_value()) << OpKindName(kind);
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_FALSE(ParseOpKind("no_such_op").has_value());
}

TEST(ModuleApplyOrderTest, ChildrenFirstThenOwnParametersThenBuffers) {
  Graph g;
  auto add = [&](const std::string& name, TensorRole role) {
    g.tensors.push_back(Tensor{name, role});
    TensorId t = static_cast<TensorId>(g.tensors.size() - 1);
    (role == TensorRole::kParameter ? g.parameters : g.buffers).push_back(t);
    return t;
  };
  TensorId top_w = add("w", TensorRole::kParameter);
  TensorId a_w = add("a.weight", TensorRole::kParameter);
  TensorId a_b = add("a.running_mean", TensorRole::kBuffer);
  TensorId b_w = add("b.c.weight", TensorRole::kParameter);
  std::vector<TensorId> order = ModuleApplyOrder(g);
  EXPECT_EQ(order, (std::vector<TensorId>{a_w, a_b, b_w, top_w}));
}

}  // namespace
}  // namespace memsim
