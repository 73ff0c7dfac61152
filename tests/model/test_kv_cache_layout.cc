// KvCacheLayout: vLLM's hybrid allocator grouping (one page size for every group).
#include <gtest/gtest.h>

#include <set>

#include "model/kv_cache.h"

namespace vellum::model {
namespace {

std::vector<bool> pattern(int num_layers, int period) {
  std::vector<bool> sliding;
  for (int l = 0; l < num_layers; ++l) sliding.push_back(l % period < period - 1);
  return sliding;
}

TEST(KvCacheLayout, SingleGroupKeepsOneSlotPerLayer) {
  const KvCacheLayout a = KvCacheLayout::single_group(pattern(6, 2), 32);
  EXPECT_EQ(a.group_windows, (std::vector<int64_t>{0}));  // mixed: the window is not recycled
  EXPECT_EQ(a.num_slots, 6);
  EXPECT_EQ(a.layer_slot, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  const KvCacheLayout all = KvCacheLayout::single_group(std::vector<bool>(4, true), 32);
  EXPECT_EQ(all.group_windows, (std::vector<int64_t>{32}));
  // A model without sliding layers is one group even when asked for hybrid groups.
  const KvCacheLayout dense = KvCacheLayout::hybrid(std::vector<bool>(4, false), 0);
  EXPECT_EQ(dense.group_windows, (std::vector<int64_t>{0}));
  EXPECT_EQ(dense.num_slots, 4);
}

TEST(KvCacheLayout, Gemma2AlternatingLayersMakeTwoGroups) {
  const KvCacheLayout l = KvCacheLayout::hybrid(pattern(26, 2), 4096);
  EXPECT_EQ(l.group_windows, (std::vector<int64_t>{0, 4096}));
  EXPECT_EQ(l.num_slots, 13);
  for (int layer = 0; layer < 26; ++layer) {
    EXPECT_EQ(l.layer_group[static_cast<size_t>(layer)], layer % 2 == 0 ? 1 : 0) << layer;
    EXPECT_EQ(l.layer_slot[static_cast<size_t>(layer)], layer / 2) << layer;
  }
}

TEST(KvCacheLayout, Gemma3FiveToOnePatternMakesGroupsOfTheFullLayerCount) {
  // 26 layers, every sixth global: 22 sliding, 4 full -> groups of 4 layers: one full group and
  // six sliding ones (the last holds 2 layers and 2 padding slots).
  const KvCacheLayout l = KvCacheLayout::hybrid(pattern(26, 6), 512);
  ASSERT_EQ(l.num_slots, 4);
  ASSERT_EQ(l.num_groups(), 7);
  EXPECT_EQ(l.group_windows[0], 0);
  for (size_t g = 1; g < 7; ++g) EXPECT_EQ(l.group_windows[g], 512);
  // Every (group, slot) pair is used by at most one layer.
  std::set<std::pair<int, int>> used;
  for (size_t layer = 0; layer < 26; ++layer) {
    EXPECT_TRUE(used.insert({l.layer_group[layer], l.layer_slot[layer]}).second) << layer;
    EXPECT_EQ(l.group_windows[static_cast<size_t>(l.layer_group[layer])] > 0, layer % 6 < 5);
  }
  EXPECT_EQ(l.layer_group[5], 0);
  EXPECT_EQ(l.layer_slot[11], 1);
}

TEST(KvCacheLayout, NearlyEqualCountsUseTheLargerGroupSize) {
  // 9 sliding and 8 full layers: 9 < 1.25 * 8, so groups of 9 (two groups, one padding slot).
  std::vector<bool> sliding(17, false);
  for (int i = 0; i < 9; ++i) sliding[static_cast<size_t>(i)] = true;
  const KvCacheLayout l = KvCacheLayout::hybrid(sliding, 64);
  EXPECT_EQ(l.num_slots, 9);
  EXPECT_EQ(l.num_groups(), 2);
}

}  // namespace
}  // namespace vellum::model
