// Scenarios S23-S25: sliding-window hit search and recycling, CachingMetrics.
#include <gtest/gtest.h>

#include "common/check.h"
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

// Admits `req` with a prefix-cache hit of several groups, computing n new tokens.
std::optional<std::vector<BlockId>> alloc_hit(KVCacheManager& kv, Request& req,
                                              const ComputedBlocks& hit, int n) {
  AllocateSlotsArgs args;
  args.num_new_tokens = n;
  args.num_new_computed_tokens = hit.num_computed_tokens;
  args.new_computed_blocks = hit.groups;
  return kv.allocate_slots(req, args);
}

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
    ASSERT_EQ(hit.block_ids().size(), 10u);
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(hit.block_ids()[i], kNullBlockId);
    EXPECT_EQ(hit.num_computed_tokens, 20);
    auto r = alloc(kv, b, 20, 20, hit.block_ids());
    EXPECT_EQ(r.has_value(), num_taken == 5) << "free=" << 20 - num_taken;
    if (r) {
      const auto table = ids(kv.get_block_ids("b"));
      ASSERT_EQ(table.size(), 20u);
      for (size_t i = 0; i < 5; ++i) EXPECT_EQ(table[i], kNullBlockId);
      for (size_t i = 5; i < 10; ++i) EXPECT_EQ(table[i], hit.block_ids()[i]);
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
    ASSERT_EQ(hit.block_ids().size(), 1u);
    auto r = alloc(kv, b, 2, 2, hit.block_ids());
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

// Hybrid KV cache groups (Gemma 2/3): group 0 full attention, group 1 a sliding window.
KVCacheConfig hybrid_config(int num_blocks, int bs, int window) {
  auto c = make_config(num_blocks, bs);
  c.groups = {KVCacheGroupSpec{}, KVCacheGroupSpec{window}};
  return c;
}

TEST(KvCacheHybrid, SlidingGroupHoldsOnlyTheWindowWhileTheFullGroupHoldsEverything) {
  const int bs = 2, window = 4, chunk = 4;
  KVCacheManager kv(hybrid_config(64, bs, window));
  ASSERT_EQ(kv.num_groups(), 2);
  Request r = make_request("r", iota_tokens(60), bs);
  const int bound = (window - 1 + chunk + bs - 1) / bs + 1;  // window plus one chunk
  while (r.num_computed_tokens < r.num_tokens()) {
    const int n = std::min(chunk, r.num_tokens() - r.num_computed_tokens);
    ASSERT_TRUE(alloc(kv, r, n).has_value());
    r.num_computed_tokens += n;
    const auto full = ids(kv.get_block_ids("r", 0));
    const auto sliding = ids(kv.get_block_ids("r", 1));
    ASSERT_EQ(full.size(), sliding.size());
    EXPECT_EQ(std::count(full.begin(), full.end(), kNullBlockId), 0);
    const auto held = std::count_if(sliding.begin(), sliding.end(),
                                    [](BlockId b) { return b != kNullBlockId; });
    EXPECT_LE(held, bound) << "at " << r.num_computed_tokens << " tokens";
    EXPECT_EQ(kv.num_held_blocks("r"), static_cast<int>(full.size() + static_cast<size_t>(held)));
  }
  // 60 tokens: 30 blocks in the full group, a bounded handful in the sliding one.
  EXPECT_EQ(kv.get_block_ids("r", 0).size(), 30u);
  EXPECT_LE(kv.num_held_blocks("r"), 30 + bound);
  kv.check_invariants();
  kv.free("r");
  EXPECT_EQ(kv.num_free_blocks(), 63);
}

TEST(KvCacheHybrid, PrefixHitIsTheShorterOfTheFullAndTheSlidingHit) {
  const int bs = 2, window = 4;
  KVCacheManager kv(hybrid_config(64, bs, window));
  Request a = make_request("a", iota_tokens(20), bs);
  ASSERT_TRUE(alloc(kv, a, 20).has_value());
  const auto a_full = ids(kv.get_block_ids("a", 0));
  const auto a_sliding = ids(kv.get_block_ids("a", 1));
  kv.free("a");

  // Everything cached: 10 blocks in both groups, the sliding group's first 8 outside the window.
  Request b = make_request("b", iota_tokens(21), bs);
  ComputedBlocks hit = kv.get_computed_blocks(b);
  EXPECT_EQ(hit.num_computed_tokens, 20);
  ASSERT_EQ(hit.groups.size(), 2u);
  EXPECT_EQ(hit.groups[0], a_full);
  ASSERT_EQ(hit.groups[1].size(), 10u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(hit.groups[1][i], kNullBlockId) << i;
  EXPECT_EQ(hit.groups[1][8], a_sliding[8]);
  EXPECT_EQ(hit.groups[1][9], a_sliding[9]);

  // The sliding group loses its last block: its hit ends one block earlier (blocks 7, 8 form
  // the run), and the full group's hit is cut to the same length.
  ASSERT_TRUE(kv.block_pool().block(a_sliding[9]).block_hash.has_value());
  KVCacheManager& mutable_kv = kv;
  ASSERT_TRUE(const_cast<BlockPool&>(mutable_kv.block_pool()).evict_cached_block(a_sliding[9]));
  hit = kv.get_computed_blocks(b);
  EXPECT_EQ(hit.num_computed_tokens, 18);
  ASSERT_EQ(hit.groups.size(), 2u);
  EXPECT_EQ(hit.groups[0], std::vector<BlockId>(a_full.begin(), a_full.begin() + 9));
  ASSERT_EQ(hit.groups[1].size(), 9u);
  EXPECT_EQ(hit.groups[1][7], a_sliding[7]);
  EXPECT_EQ(hit.groups[1][8], a_sliding[8]);

  // The full group losing a block in the middle cuts both hits there.
  ASSERT_TRUE(const_cast<BlockPool&>(mutable_kv.block_pool()).evict_cached_block(a_full[5]));
  hit = kv.get_computed_blocks(b);
  EXPECT_EQ(hit.num_computed_tokens, 10);
  EXPECT_EQ(hit.groups[0].size(), 5u);
  EXPECT_EQ(hit.groups[1].size(), 5u);

  // Admitting with the hit takes the cached blocks in both groups.
  ASSERT_TRUE(alloc_hit(kv, b, hit, 11).has_value());
  EXPECT_EQ(ids(kv.get_block_ids("b", 0)).front(), a_full[0]);
  kv.check_invariants();
}

TEST(KvCacheHybrid, ForkSwapAndFreeCoverEveryGroup) {
  const int bs = 2, window = 4;
  KVCacheConfig c = hybrid_config(64, bs, window);
  c.num_host_blocks = 32;
  KVCacheManager kv(c);
  Request p = make_request("p", iota_tokens(15), bs);
  ASSERT_TRUE(alloc(kv, p, 15).has_value());
  p.num_computed_tokens = 15;
  kv.fork("p", "c");
  for (int g = 0; g < 2; ++g) EXPECT_EQ(ids(kv.get_block_ids("c", g)), ids(kv.get_block_ids("p", g)));
  // The parent writes token 15 into its shared last block: one copy per group.
  p.append_output_token_ids(99);
  ASSERT_TRUE(alloc(kv, p, 1).has_value());
  EXPECT_EQ(kv.take_copy_on_writes().size(), 2u);
  kv.check_invariants();

  const std::vector<std::string> group{"p"};
  ASSERT_TRUE(kv.can_swap_out(group));
  const auto held = kv.num_held_blocks("p");
  const auto moves = kv.swap_out(group);
  EXPECT_EQ(static_cast<int>(moves.size()), held);
  const Request* back[] = {&p};
  ASSERT_EQ(kv.can_swap_in(back), AllocStatus::kOk);
  kv.swap_in(back);
  EXPECT_EQ(kv.num_held_blocks("p"), held);
  EXPECT_EQ(kv.get_block_ids("p", 1)[0], kNullBlockId);  // the recycled prefix stays recycled
  kv.check_invariants();
  kv.free("p");
  kv.free("c");
  EXPECT_EQ(kv.num_free_blocks(), 63);
  EXPECT_EQ(kv.num_free_host_blocks(), 32);
}

TEST(KvCacheHybrid, RejectsTwoDifferentSlidingWindows) {
  KVCacheConfig c = make_config(16, 2);
  c.groups = {KVCacheGroupSpec{4}, KVCacheGroupSpec{8}};
  EXPECT_THROW(KVCacheManager kv(c), vellum::Error);
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
