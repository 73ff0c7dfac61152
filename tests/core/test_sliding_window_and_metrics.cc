// Scenarios S23-S25: sliding-window hit search and recycling, CachingMetrics.
#include <gtest/gtest.h>

#include "core/prefix_cache_stats.h"
#include "core/sliding_window.h"
#include "core_test_util.h"

namespace vellum::core {
namespace {

using testing::alloc;
using testing::ids;
using testing::iota_tokens;
using testing::make_config;
using testing::make_request;

struct HitCase {
  std::vector<bool> cached;
  int expected_blocks;
};

TEST(KvCacheScenarios, S23_SlidingWindowHitSearch) {
  const std::vector<HitCase> cases = {
      {std::vector<bool>(10, false), 0},
      {{true}, 1},
      {{true, false}, 1},
      {{true, true}, 2},
      {{true, true, false}, 2},
      {{true, true, true}, 3},
      {{true, true, true, false}, 3},
      {{true, true, false, true, false, false, true, true, false, true, true, true}, 12},
      {{true, true, false, true, false, false, true, true, false, false, false}, 8},
      {{true, true, false, true, false, false, true, true, false, false, false, true}, 8},
  };
  for (const HitCase& c : cases) {
    std::vector<BlockHash> hashes(c.cached.size());
    for (size_t i = 0; i < hashes.size(); ++i) hashes[i].bytes[0] = static_cast<uint8_t>(i + 1);
    auto lookup = [&](const BlockHash& h) -> std::optional<BlockId> {
      const size_t i = h.bytes[0] - 1u;
      if (!c.cached[i]) return std::nullopt;
      return static_cast<BlockId>(100 + i);
    };
    const auto hit = find_longest_cache_hit_sliding_window(
        hashes, static_cast<int>(hashes.size()) * 2, /*sliding_window=*/4, /*block_size=*/2,
        /*use_eagle=*/false, lookup);
    ASSERT_EQ(static_cast<int>(hit.size()), c.expected_blocks);
    for (size_t i = 0; i < hit.size(); ++i) {
      if (i + 2 < hit.size()) {
        EXPECT_EQ(hit[i], kNullBlockId) << i;
      } else {
        EXPECT_EQ(hit[i], static_cast<BlockId>(100 + i)) << i;
      }
    }
  }
}

TEST(KvCacheScenarios, S24_SlidingWindowRemoveSkippedBlocks) {
  std::vector<BlockId> table;
  for (BlockId id = 1000; id <= 1010; ++id) table.push_back(id);
  const auto original = table;
  const int window = 4, bs = 2;

  EXPECT_TRUE(remove_skipped_blocks(table, 0, window, bs).empty());
  EXPECT_EQ(table, original);
  EXPECT_TRUE(remove_skipped_blocks(table, 4, window, bs).empty());
  EXPECT_EQ(table, original);

  EXPECT_EQ(remove_skipped_blocks(table, 5, window, bs), (std::vector<BlockId>{1000}));
  EXPECT_EQ(table[0], kNullBlockId);
  EXPECT_EQ(table[1], 1001);
  const auto after5 = table;
  EXPECT_TRUE(remove_skipped_blocks(table, 6, window, bs).empty());
  EXPECT_EQ(table, after5);

  EXPECT_EQ(remove_skipped_blocks(table, 7, window, bs), (std::vector<BlockId>{1001}));
  EXPECT_EQ(table[1], kNullBlockId);
  EXPECT_EQ(table[2], 1002);

  EXPECT_EQ(remove_skipped_blocks(table, 11, window, bs), (std::vector<BlockId>{1003, 1002}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(table[static_cast<size_t>(i)], kNullBlockId);
  EXPECT_EQ(table[4], 1004);
}

KVCacheConfig swa_config(int num_blocks, int bs, int window) {
  auto c = make_config(num_blocks, bs);
  c.sliding_window = window;
  return c;
}

// [null x 5 + 5 cached] hit blocks with 40 tokens needed: 10 new + 5 evictable = 15 blocks.
TEST(KvCacheScenarios, S24_SlidingWindowBlockCountWithNullPrefix) {
  for (int num_taken : {5, 6}) {
    KVCacheManager kv(swa_config(21, 2, 10));
    Request a = make_request("a", iota_tokens(20), 2);
    ASSERT_TRUE(alloc(kv, a, 20).has_value());
    kv.free("a");
    Request other = make_request("o", iota_tokens(2 * num_taken, 500), 2);
    ASSERT_TRUE(alloc(kv, other, 2 * num_taken).has_value());
    Request b = make_request("b", iota_tokens(41), 2);
    const auto hit = kv.get_computed_blocks(b);
    ASSERT_EQ(hit.block_ids.size(), 10u);
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(hit.block_ids[i], kNullBlockId);
    EXPECT_EQ(hit.num_computed_tokens, 20);
    auto r = alloc(kv, b, 20, 20, hit.block_ids);
    EXPECT_EQ(r.has_value(), num_taken == 5) << "free=" << 20 - num_taken;
    if (r) {
      const auto table = ids(kv.get_block_ids("b"));
      ASSERT_EQ(table.size(), 20u);
      for (size_t i = 0; i < 5; ++i) EXPECT_EQ(table[i], kNullBlockId);
      for (size_t i = 5; i < 10; ++i) EXPECT_EQ(table[i], hit.block_ids[i]);
    }
    kv.check_invariants();
  }
}

// Window 4, bs 2: 4 tokens with one evictable hit block need 2 free blocks; 1 is allocated.
TEST(KvCacheScenarios, S24_SlidingWindowEvictableHitNotDoubleAllocated) {
  for (bool take_one : {false, true}) {
    KVCacheManager kv(swa_config(3, 2, 4));
    Request a = make_request("a", {7, 8}, 2);
    ASSERT_TRUE(alloc(kv, a, 2).has_value());
    kv.free("a");
    if (take_one) {
      Request o = make_request("o", {1}, 2);
      ASSERT_TRUE(alloc(kv, o, 1).has_value());
    }
    Request b = make_request("b", {7, 8, 9, 10, 11}, 2);
    const auto hit = kv.get_computed_blocks(b);
    ASSERT_EQ(hit.block_ids.size(), 1u);
    auto r = alloc(kv, b, 2, 2, hit.block_ids);
    EXPECT_EQ(r.has_value(), !take_one);
    if (r) {
      EXPECT_EQ(r->size(), 1u);
      EXPECT_EQ(kv.get_block_ids("b").size(), 2u);
    }
    kv.check_invariants();
  }
}

TEST(KvCacheManagerTest, SlidingWindowRecyclesBlocksDuringDecode) {
  KVCacheManager kv(swa_config(20, 2, 4));
  Request r = make_request("r", iota_tokens(8), 2);
  ASSERT_TRUE(alloc(kv, r, 8).has_value());
  EXPECT_EQ(kv.num_free_blocks(), 15);
  r.num_computed_tokens = 8;
  r.append_output_token_ids(100);
  // 8 computed: tokens 0..4 are out of every future window, so blocks 0 and 1 are recycled.
  ASSERT_TRUE(alloc(kv, r, 1).has_value());
  const auto table = ids(kv.get_block_ids("r"));
  ASSERT_EQ(table.size(), 5u);
  EXPECT_EQ(table[0], kNullBlockId);
  EXPECT_EQ(table[1], kNullBlockId);
  EXPECT_NE(table[2], kNullBlockId);
  EXPECT_EQ(kv.num_free_blocks(), 19 - 3);
  kv.free("r");
  EXPECT_EQ(kv.num_free_blocks(), 19);
  kv.check_invariants();
}

TEST(KvCacheScenarios, S25_CachingMetricsWindow) {
  CachingMetrics m(5);
  auto obs = [&](int64_t r, int64_t q, int64_t h) {
    PrefixCacheStats s;
    s.requests = r;
    s.queries = q;
    s.hits = h;
    m.observe(s);
  };
  obs(1, 20, 9);
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.45);
  obs(4, 80, 16);
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.25);
  obs(1, 10, 2);
  EXPECT_EQ(m.aggregated_requests(), 5);
  EXPECT_EQ(m.aggregated_queries(), 90);
  EXPECT_EQ(m.aggregated_hits(), 18);
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.2);
  obs(0, 0, 0);
  EXPECT_EQ(m.aggregated_requests(), 5);
  obs(11, 20, 10);
  EXPECT_EQ(m.aggregated_requests(), 11);
  EXPECT_EQ(m.aggregated_queries(), 20);
  EXPECT_EQ(m.aggregated_hits(), 10);
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.5);
  obs(22, 40, 30);
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.75);
  m.reset();
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.0);

  // A snapshot flagged reset clears the window first.
  obs(1, 10, 10);
  PrefixCacheStats s;
  s.reset = true;
  s.requests = 1;
  s.queries = 10;
  s.hits = 0;
  m.observe(s);
  EXPECT_DOUBLE_EQ(m.hit_rate(), 0.0);
  EXPECT_EQ(m.aggregated_requests(), 1);
}

}  // namespace
}  // namespace vellum::core
