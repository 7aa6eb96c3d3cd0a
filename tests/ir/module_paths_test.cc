// Repeated blocks and the @blocks selectors of --checkpoint and --wrap (Note [Block selectors]).
#include "lib/ir/module_paths.h"

#include <gtest/gtest.h>

#include "tests/testing/graph_builder.h"

namespace memsim {
namespace {

using testing::ZooGraph;

TEST(ModulePaths, RepeatedBlocksInNumericOrder) {
  Graph g = ZooGraph("cs336_small");
  std::vector<std::string> blocks = RepeatedBlocks(g);
  ASSERT_EQ(blocks.size(), 12u);
  EXPECT_EQ(blocks[0], "layers.0");
  EXPECT_EQ(blocks[2], "layers.2");  // before layers.10, unlike a sort of the names
  EXPECT_EQ(blocks[11], "layers.11");
}

TEST(ModulePaths, BlockSelectors) {
  Graph g = ZooGraph("cs336_small");
  ASSERT_TRUE(SelectBlocks(g, "@blocks"));
  EXPECT_EQ(SelectBlocks(g, "@blocks")->size(), 12u);
  // Hugging Face every_n_layers=3: layers 0, 3, 6, 9; torchtitan selective_ac_option "3": 2, 5, 8, 11.
  EXPECT_EQ(*SelectBlocks(g, "@blocks%3=0"), (std::vector<std::string>{"layers.0", "layers.3", "layers.6", "layers.9"}));
  EXPECT_EQ(*SelectBlocks(g, "@blocks%3=2"), (std::vector<std::string>{"layers.2", "layers.5", "layers.8", "layers.11"}));
  for (const char* bad : {"@block", "@blocks%3", "@blocks%0=0", "@blocks%2=2", "@blocks%x=1", "@blocks%2=-1",
                          "@blocks%9999999=1", "layers.*"})
    EXPECT_FALSE(SelectBlocks(g, bad)) << bad;
  EXPECT_TRUE(SelectBlocks(ZooGraph("mlp"), "@blocks")->empty());
}

}  // namespace
}  // namespace memsim
