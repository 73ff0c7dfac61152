// Scenarios §3 C (S10-S21, S26): KVCacheManager with full attention, one group.
#include <gtest/gtest.h>

#include "common/check.h"
#include "core_test_util.h"

namespace vellum::core {
namespace {

using testing::alloc;
using testing::concat;
using testing::ids;
using testing::iota_tokens;
using testing::make_config;
using testing::make_request;
using testing::repeat;

std::vector<TokenId> common_prefix() {
  return concat(concat(repeat(0, 16), repeat(1, 16)), repeat(2, 16));
}

// Ref counts of blocks [first, last].
std::vector<int> refs(const KVCacheManager& kv, std::span<const BlockId> block_ids) {
  std::vector<int> out;
  for (BlockId id : block_ids) out.push_back(kv.block_pool().block(id).ref_cnt);
  return out;
}

TEST(KvCacheScenarios, S10_PrefillShareFreeEvict) {
  KVCacheManager kv(make_config(11, 16));
  const auto common = common_prefix();

  Request req0 = make_request("0", concat(common, repeat(3, 7)), 16);
  ASSERT_EQ(req0.block_hashes().size(), 3u);
  auto hit0 = kv.get_computed_blocks(req0);
  EXPECT_TRUE(hit0.block_ids().empty());
  EXPECT_EQ(hit0.num_computed_tokens, 0);
  EXPECT_EQ(alloc(kv, req0, 55), (std::vector<BlockId>{1, 2, 3, 4}));
  for (BlockId id = 1; id <= 3; ++id) {
    const auto& b = kv.block_pool().block(id);
    ASSERT_TRUE(b.block_hash.has_value());
    EXPECT_EQ(b.block_hash->hash, req0.block_hashes()[static_cast<size_t>(id - 1)]);
    EXPECT_EQ(b.block_hash->group_id, 0);
    EXPECT_EQ(b.ref_cnt, 1);
  }
  EXPECT_FALSE(kv.block_pool().block(4).block_hash.has_value());
  EXPECT_EQ(kv.block_pool().block(4).ref_cnt, 1);

  Request req1 = make_request("1", concat(common, repeat(3, 5)), 16);
  auto hit1 = kv.get_computed_blocks(req1);
  EXPECT_EQ(hit1.block_ids(), (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(hit1.num_computed_tokens, 48);
  EXPECT_EQ(alloc(kv, req1, 5, 48, hit1.block_ids()), (std::vector<BlockId>{5}));
  EXPECT_EQ(req1.num_cached_tokens, 48);
  EXPECT_EQ(req0.num_cached_tokens, 0);
  const std::vector<BlockId> shared{1, 2, 3};
  EXPECT_EQ(refs(kv, shared), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(kv.num_free_blocks(), 5);

  EXPECT_TRUE(kv.free("0"));
  EXPECT_TRUE(kv.free("1"));
  EXPECT_EQ(kv.num_free_blocks(), 10);
  EXPECT_EQ(kv.block_pool().free_block_ids(), (std::vector<BlockId>{6, 7, 8, 9, 10, 4, 5, 3, 2, 1}));

  Request req2 = make_request("2", concat(common, repeat(3, 6)), 16);
  auto hit2 = kv.get_computed_blocks(req2);
  EXPECT_EQ(hit2.block_ids(), (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(alloc(kv, req2, 5, 48, hit2.block_ids()), (std::vector<BlockId>{6}));
  EXPECT_EQ(kv.num_free_blocks(), 6);
  for (BlockId id : kv.block_pool().free_block_ids()) EXPECT_EQ(kv.block_pool().block(id).ref_cnt, 0);

  EXPECT_TRUE(kv.free("2"));
  EXPECT_EQ(kv.block_pool().free_block_ids(), (std::vector<BlockId>{7, 8, 9, 10, 4, 5, 6, 3, 2, 1}));

  Request req3 = make_request("3", repeat(99, 160), 16);
  EXPECT_TRUE(kv.get_computed_blocks(req3).block_ids().empty());
  EXPECT_EQ(alloc(kv, req3, 160), (std::vector<BlockId>{7, 8, 9, 10, 4, 5, 6, 3, 2, 1}));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  EXPECT_TRUE(kv.block_pool().free_block_ids().empty());
  // The evicted blocks carry req3's hashes now, not the common prefix's.
  EXPECT_EQ(kv.block_pool().block(1).block_hash->hash, req3.block_hashes()[9]);
  kv.check_invariants();
}

TEST(KvCacheScenarios, S11_PromptLogprobsSkipReadingButStillWrite) {
  KVCacheManager kv(make_config(11, 16));
  const auto common = common_prefix();
  RequestParams plp;
  plp.skip_reading_prefix_cache = true;

  Request req0 = make_request("0", concat(common, repeat(3, 7)), 16, plp);
  EXPECT_TRUE(kv.get_computed_blocks(req0).block_ids().empty());
  EXPECT_EQ(alloc(kv, req0, 55), (std::vector<BlockId>{1, 2, 3, 4}));
  for (BlockId id = 1; id <= 3; ++id) EXPECT_TRUE(kv.block_pool().block(id).block_hash.has_value());

  Request req1 = make_request("1", concat(common, repeat(3, 5)), 16);
  auto hit1 = kv.get_computed_blocks(req1);
  EXPECT_EQ(hit1.block_ids(), (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(alloc(kv, req1, 5, 48, hit1.block_ids()), (std::vector<BlockId>{5}));
  kv.free("0");
  kv.free("1");

  Request req2 = make_request("2", concat(common, repeat(3, 6)), 16, plp);
  auto hit2 = kv.get_computed_blocks(req2);
  EXPECT_TRUE(hit2.block_ids().empty());
  EXPECT_EQ(hit2.num_computed_tokens, 0);
  auto blocks = alloc(kv, req2, 55);
  ASSERT_TRUE(blocks.has_value());
  ASSERT_EQ(blocks->size(), 4u);
  for (BlockId id : *blocks) EXPECT_TRUE(id < 1 || id > 4) << id;
  for (size_t i = 0; i < 3; ++i) {
    const auto& b = kv.block_pool().block((*blocks)[i]);
    ASSERT_TRUE(b.block_hash.has_value());
    EXPECT_EQ(b.block_hash->hash, req0.block_hashes()[i]);  // duplicates of blocks 1..3
    EXPECT_EQ(b.ref_cnt, 1);
  }
  kv.check_invariants();
}

TEST(KvCacheScenarios, S12_DecodeAppends) {
  KVCacheManager kv(make_config(11, 16));
  Request req0 = make_request("0", concat(common_prefix(), repeat(3, 7)), 16);
  EXPECT_EQ(alloc(kv, req0, 55), (std::vector<BlockId>{1, 2, 3, 4}));

  req0.num_computed_tokens = 55;
  for (int i = 0; i < 4; ++i) req0.append_output_token_ids(8);
  auto none = alloc(kv, req0, 4);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(kv.block_pool().block(kv.get_block_ids("0").back()).block_hash.has_value());

  req0.num_computed_tokens = 59;
  for (int i = 0; i < 19; ++i) req0.append_output_token_ids(8);
  ASSERT_EQ(req0.num_tokens(), 78);
  auto one = alloc(kv, req0, 19);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->size(), 1u);
  const auto table = ids(kv.get_block_ids("0"));
  ASSERT_EQ(table.size(), 5u);
  EXPECT_TRUE(kv.block_pool().block(table[3]).block_hash.has_value());
  EXPECT_EQ(kv.block_pool().block(table[3]).block_hash->hash, req0.block_hashes()[3]);
  EXPECT_FALSE(kv.block_pool().block(table[4]).block_hash.has_value());
  kv.check_invariants();
}

TEST(KvCacheScenarios, S14_FailedAllocationHasNoSideEffects) {
  KVCacheManager kv(make_config(11, 16));
  const auto common = common_prefix();
  Request req0 = make_request("0", common, 16);
  EXPECT_EQ(alloc(kv, req0, 48), (std::vector<BlockId>{1, 2, 3}));

  Request req1 = make_request("1", concat(common, common), 16);
  auto hit1 = kv.get_computed_blocks(req1);
  EXPECT_EQ(hit1.block_ids(), (std::vector<BlockId>{1, 2, 3}));
  auto new1 = alloc(kv, req1, 48, 48, hit1.block_ids());
  ASSERT_TRUE(new1.has_value());
  EXPECT_EQ(new1->size(), 3u);
  const auto req1_blocks = ids(kv.get_block_ids("1"));
  kv.free("1");
  EXPECT_EQ(refs(kv, req1_blocks), (std::vector<int>{1, 1, 1, 0, 0, 0}));

  Request req2 = make_request("2", repeat(7, 32), 16);
  auto new2 = alloc(kv, req2, 32);
  ASSERT_TRUE(new2.has_value());
  EXPECT_EQ(new2->size(), 2u);
  EXPECT_EQ(kv.num_free_blocks(), 5);

  Request req3 = make_request("3", concat(concat(common, common), common), 16);
  auto hit3 = kv.get_computed_blocks(req3);
  EXPECT_EQ(hit3.block_ids(), req1_blocks);
  EXPECT_EQ(hit3.num_computed_tokens, 96);
  const auto free_before = kv.block_pool().free_block_ids();
  EXPECT_EQ(alloc(kv, req3, 48, 96, hit3.block_ids()), std::nullopt);
  EXPECT_EQ(refs(kv, req1_blocks), (std::vector<int>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(kv.block_pool().free_block_ids(), free_before);
  EXPECT_FALSE(kv.is_resident("3"));
  EXPECT_EQ(req3.num_cached_tokens, -1);
  kv.check_invariants();
}

TEST(KvCacheScenarios, S16_ReusedBlockLosesStaleHash) {
  KVCacheManager kv(make_config(2, 16));
  Request a = make_request("a", iota_tokens(16), 16);
  EXPECT_EQ(alloc(kv, a, 16), (std::vector<BlockId>{1}));
  EXPECT_TRUE(kv.block_pool().block(1).block_hash.has_value());
  kv.free("a");
  EXPECT_TRUE(kv.block_pool().block(1).block_hash.has_value());  // lazy eviction

  Request b = make_request("b", iota_tokens(15, 100), 16);
  EXPECT_TRUE(kv.get_computed_blocks(b).block_ids().empty());
  EXPECT_EQ(alloc(kv, b, 15), (std::vector<BlockId>{1}));
  EXPECT_FALSE(kv.block_pool().block(1).block_hash.has_value());
  EXPECT_TRUE(kv.block_pool().cached_block_index().empty());
  kv.check_invariants();
}

TEST(KvCacheScenarios, S17_PrefixCachingDisabled) {
  KVCacheManager kv(make_config(5, 4, /*enable_caching=*/false));
  Request req1 = make_request("1", iota_tokens(10), 0);
  auto b1 = alloc(kv, req1, 10);
  ASSERT_TRUE(b1.has_value());
  EXPECT_EQ(b1->size(), 3u);
  kv.free("1");
  for (BlockId id = 1; id < 5; ++id) EXPECT_FALSE(kv.block_pool().block(id).block_hash.has_value());

  Request req2 = make_request("2", iota_tokens(16), 0);
  EXPECT_EQ(kv.get_computed_blocks(req2).num_computed_tokens, 0);
  auto b2 = alloc(kv, req2, 16);
  ASSERT_TRUE(b2.has_value());
  EXPECT_EQ(b2->size(), 4u);

  Request req3 = make_request("3", iota_tokens(4), 0);
  EXPECT_EQ(kv.get_computed_blocks(req3).num_computed_tokens, 0);
  EXPECT_EQ(alloc(kv, req3, 4), std::nullopt);
  kv.check_invariants();
}

TEST(KvCacheScenarios, S18_FullyCachedPromptRecomputesLastBlock) {
  for (bool eagle : {false, true}) {
    auto cfg = make_config(10, 16);
    cfg.use_eagle = eagle;
    KVCacheManager kv(cfg);
    Request x = make_request("x", repeat(0, 48), 16);
    ASSERT_TRUE(alloc(kv, x, 48).has_value());
    EXPECT_EQ(kv.block_pool().cached_block_index().num_keys(), 3);
    kv.free("x");
    Request y = make_request("y", repeat(0, 48), 16);
    const auto hit = kv.get_computed_blocks(y);
    EXPECT_EQ(hit.block_ids().size(), eagle ? 1u : 2u);
    EXPECT_EQ(hit.num_computed_tokens, eagle ? 16 : 32);
  }
}

TEST(KvCacheScenarios, S19_LookaheadSlots) {
  {
    KVCacheManager kv(make_config(10, 4));
    Request req = make_request("r", {}, 4);
    auto b = alloc(kv, req, 3, 0, {}, /*lookahead=*/2);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->size(), 2u);
  }
  {
    KVCacheManager kv(make_config(10, 4));
    Request req = make_request("r", {}, 4);
    auto b = alloc(kv, req, 3, 0, {}, /*lookahead=*/4);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->size(), 2u);
  }
  {
    // Lookahead slots are never cached: only tokens that exist are hashed.
    KVCacheManager kv(make_config(10, 4));
    Request req = make_request("r", iota_tokens(6), 4);
    auto b = alloc(kv, req, 6, 0, {}, /*lookahead=*/6);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->size(), 3u);
    EXPECT_EQ(kv.block_pool().cached_block_index().num_keys(), 1);
  }
}

TEST(KvCacheScenarios, S20_ResetPrefixCache) {
  KVCacheManager kv(make_config(11, 16));
  const auto common = common_prefix();
  Request req0 = make_request("0", concat(common, repeat(3, 7)), 16);
  EXPECT_EQ(alloc(kv, req0, 55), (std::vector<BlockId>{1, 2, 3, 4}));
  Request req1 = make_request("1", concat(common, repeat(3, 5)), 16);
  auto hit = kv.get_computed_blocks(req1);
  EXPECT_EQ(hit.block_ids().size(), 3u);
  EXPECT_EQ(alloc(kv, req1, 5, 48, hit.block_ids()), (std::vector<BlockId>{5}));

  EXPECT_FALSE(kv.reset_prefix_cache());
  EXPECT_FALSE(kv.block_pool().cached_block_index().empty());
  kv.free("0");
  kv.free("1");
  EXPECT_TRUE(kv.reset_prefix_cache());
  EXPECT_TRUE(kv.block_pool().cached_block_index().empty());
  for (BlockId id = 0; id < 11; ++id) EXPECT_FALSE(kv.block_pool().block(id).block_hash.has_value());
  kv.check_invariants();
}

TEST(KvCacheScenarios, S21_KvCacheEvents) {
  for (int n : {2, 3, 10}) {
    SCOPED_TRACE(n);
    auto cfg = make_config(n + 1, 16);
    cfg.enable_kv_cache_events = true;
    KVCacheManager kv(cfg);
    Request req0 = make_request("0", iota_tokens(16 * n), 16);
    ASSERT_TRUE(alloc(kv, req0, 16 * n).has_value());
    auto events = kv.take_events();
    ASSERT_FALSE(events.empty());
    const auto* stored = std::get_if<BlockStored>(&events.back());
    ASSERT_NE(stored, nullptr);
    EXPECT_EQ(stored->block_hashes.size(), static_cast<size_t>(n));
    EXPECT_EQ(stored->token_ids.size(), static_cast<size_t>(16 * n));
    EXPECT_EQ(stored->block_size, 16);
    EXPECT_EQ(stored->parent_block_hash, std::nullopt);
    EXPECT_EQ(stored->extra_keys.size(), static_cast<size_t>(n));
    EXPECT_EQ(kv.block_pool().cached_block_index().num_keys(), n);
    EXPECT_TRUE(kv.take_events().empty());
    const std::vector<BlockHash> stored_hashes = stored->block_hashes;

    kv.free("0");
    Request req1 = make_request("1", iota_tokens(16 * n), 16);
    ASSERT_TRUE(alloc(kv, req1, 16 * n).has_value());  // no hit lookup: evicts and re-stores
    events = kv.take_events();
    ASSERT_EQ(events.size(), static_cast<size_t>(n + 1));
    for (int i = 0; i < n; ++i) {
      const auto* removed = std::get_if<BlockRemoved>(&events[static_cast<size_t>(i)]);
      ASSERT_NE(removed, nullptr);
      ASSERT_EQ(removed->block_hashes.size(), 1u);
      EXPECT_NE(std::find(stored_hashes.begin(), stored_hashes.end(), removed->block_hashes[0]),
                stored_hashes.end());
    }
    const auto* restored = std::get_if<BlockStored>(&events.back());
    ASSERT_NE(restored, nullptr);
    EXPECT_EQ(restored->block_hashes.size(), static_cast<size_t>(n));

    kv.free("1");
    EXPECT_TRUE(kv.reset_prefix_cache());
    events = kv.take_events();
    ASSERT_FALSE(events.empty());
    EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events.back()));
    EXPECT_TRUE(kv.block_pool().cached_block_index().empty());
  }
}

TEST(KvCacheScenarios, S21_StoredEventParentHashOfIncrementalCaching) {
  auto cfg = make_config(10, 4);
  cfg.enable_kv_cache_events = true;
  KVCacheManager kv(cfg);
  Request req = make_request("r", iota_tokens(8), 4);
  ASSERT_TRUE(alloc(kv, req, 4).has_value());  // chunk 1 caches block 0
  req.num_computed_tokens = 4;
  ASSERT_TRUE(alloc(kv, req, 4).has_value());  // chunk 2 caches block 1
  auto events = kv.take_events();
  ASSERT_EQ(events.size(), 2u);
  const auto& second = std::get<BlockStored>(events[1]);
  EXPECT_EQ(second.parent_block_hash, std::optional<BlockHash>(req.block_hashes()[0]));
  EXPECT_EQ(second.token_ids, (std::vector<TokenId>{4, 5, 6, 7}));
}

TEST(KvCacheScenarios, S26_FullSequenceAdmissionGate) {
  KVCacheManager kv(make_config(5, 16));
  Request big = make_request("big", iota_tokens(256), 16);
  AllocateSlotsArgs args;
  args.num_new_tokens = 16;
  args.full_sequence_must_fit = true;
  EXPECT_EQ(kv.allocate_slots(big, args), std::nullopt);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  args.full_sequence_must_fit = false;
  EXPECT_TRUE(kv.allocate_slots(big, args).has_value());  // the first chunk alone fits
  kv.free("big");

  Request ok = make_request("ok", iota_tokens(64, 1000), 16);
  args.full_sequence_must_fit = true;
  auto b = kv.allocate_slots(ok, args);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->size(), 1u);
  kv.check_invariants();
}

// S24's block counts for full attention (test_get_num_blocks_to_allocate): needing 40 tokens
// (20 blocks) with 10 cached blocks at ref 0 takes 20 free blocks — observed at the boundary.
TEST(KvCacheScenarios, S24_EvictableHitBlocksCountAgainstFreeCapacity) {
  for (int num_usable : {20, 19}) {
    KVCacheManager kv(make_config(num_usable + 1, 2));
    Request a = make_request("a", iota_tokens(20), 2);
    ASSERT_TRUE(alloc(kv, a, 20).has_value());
    kv.free("a");
    Request b = make_request("b", iota_tokens(41), 2);
    auto hit = kv.get_computed_blocks(b);
    ASSERT_EQ(hit.block_ids().size(), 10u);
    auto r = alloc(kv, b, 20, 20, hit.block_ids());
    EXPECT_EQ(r.has_value(), num_usable == 20) << num_usable;
    if (r) {
      EXPECT_EQ(kv.get_block_ids("b").size(), 20u);
    }
    kv.check_invariants();
  }
}

TEST(KvCacheManagerTest, UsageAndCommonPrefixBlocks) {
  KVCacheManager kv(make_config(11, 16));
  Request a = make_request("a", concat(common_prefix(), repeat(5, 3)), 16);
  ASSERT_TRUE(alloc(kv, a, 51).has_value());
  EXPECT_DOUBLE_EQ(kv.usage(), 0.4);
  Request b = make_request("b", concat(common_prefix(), repeat(6, 3)), 16);
  auto hit = kv.get_computed_blocks(b);
  ASSERT_TRUE(alloc(kv, b, 3, 48, hit.block_ids()).has_value());
  EXPECT_EQ(kv.get_num_common_prefix_blocks("a"), 3);
  EXPECT_EQ(kv.get_num_common_prefix_blocks("nope"), 0);
  EXPECT_EQ(kv.num_resident_requests(), 2);
}

TEST(KvCacheManagerTest, PrefixCacheStatsSeparateNewAndPreempted) {
  auto cfg = make_config(11, 16);
  cfg.log_stats = true;
  KVCacheManager kv(cfg);
  Request a = make_request("a", concat(common_prefix(), repeat(5, 3)), 16);
  (void)kv.get_computed_blocks(a);
  ASSERT_TRUE(alloc(kv, a, 51).has_value());
  Request b = make_request("b", concat(common_prefix(), repeat(6, 3)), 16);
  b.num_preemptions = 1;
  (void)kv.get_computed_blocks(b);
  auto stats = kv.make_prefix_cache_stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->requests, 1);
  EXPECT_EQ(stats->queries, 51);
  EXPECT_EQ(stats->hits, 0);
  EXPECT_EQ(stats->preempted_requests, 1);
  EXPECT_EQ(stats->preempted_queries, 51);
  EXPECT_EQ(stats->preempted_hits, 48);
  EXPECT_FALSE(stats->reset);
  EXPECT_EQ(kv.make_prefix_cache_stats()->requests, 0);  // reset by the snapshot
  kv.free("a");
  EXPECT_TRUE(kv.reset_prefix_cache());
  EXPECT_TRUE(kv.make_prefix_cache_stats()->reset);

  KVCacheManager quiet(make_config(11, 16));
  EXPECT_EQ(quiet.make_prefix_cache_stats(), std::nullopt);
}

TEST(KvCacheManagerTest, DelayCacheBlocksThenCacheBlocks) {
  KVCacheManager kv(make_config(11, 4));
  Request r = make_request("r", iota_tokens(10), 4);
  AllocateSlotsArgs args;
  args.num_new_tokens = 10;
  args.delay_cache_blocks = true;
  ASSERT_TRUE(kv.allocate_slots(r, args).has_value());
  EXPECT_TRUE(kv.block_pool().cached_block_index().empty());
  kv.cache_blocks(r, 10);
  EXPECT_EQ(kv.block_pool().cached_block_index().num_keys(), 2);
  kv.check_invariants();
}

TEST(KvCacheErrors, FreeUnknownRequestIsANoOp) {
  KVCacheManager kv(make_config(5, 4));
  EXPECT_FALSE(kv.free("never-admitted"));
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.check_invariants();
}

TEST(KvCacheErrors, DoubleFreeReturnsFalseAndChangesNothing) {
  KVCacheManager kv(make_config(5, 4));
  Request r = make_request("r", iota_tokens(6), 4);
  ASSERT_TRUE(alloc(kv, r, 6).has_value());
  EXPECT_TRUE(kv.free("r"));
  const auto order = kv.block_pool().free_block_ids();
  EXPECT_FALSE(kv.free("r"));
  EXPECT_EQ(kv.block_pool().free_block_ids(), order);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.check_invariants();
}

TEST(KvCacheErrors, BadAllocateArgumentsThrow) {
  KVCacheManager kv(make_config(5, 4));
  Request r = make_request("r", iota_tokens(6), 4);
  try {
    (void)alloc(kv, r, 0);
    FAIL() << "num_new_tokens == 0 must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  ASSERT_TRUE(alloc(kv, r, 4).has_value());
  r.num_computed_tokens = 4;
  // A running request cannot take prefix-cache hits.
  EXPECT_THROW((void)alloc(kv, r, 2, 4, {1}), Error);
  // A request without hashes cannot be looked up while caching is on.
  Request unhashed = make_request("u", iota_tokens(6), 0);
  EXPECT_THROW((void)kv.get_computed_blocks(unhashed), Error);
  // Hit tokens that do not match the hit blocks.
  Request mismatched = make_request("m", iota_tokens(6), 4);
  EXPECT_THROW((void)alloc(kv, mismatched, 2, 4, {}), Error);
  EXPECT_FALSE(kv.is_resident("m"));
  // num_computed_tokens that disagrees with the blocks held.
  Request stale = make_request("stale", iota_tokens(6), 4);
  stale.num_computed_tokens = 4;  // e.g. not reset after a recompute preemption
  EXPECT_THROW((void)alloc(kv, stale, 2), Error);
  r.num_computed_tokens = 9;  // r holds 1 block (4 tokens)
  EXPECT_THROW((void)alloc(kv, r, 1), Error);
  r.num_computed_tokens = 4;
  // A request hashed with another seed would silently never hit: rejected.
  Request other_seed("s", iota_tokens(6), RequestParams{}, BlockHasher(4, "other"));
  EXPECT_THROW((void)kv.get_computed_blocks(other_seed), Error);
  Request same_seed("t", iota_tokens(6), RequestParams{}, kv.block_hasher());
  EXPECT_EQ(kv.get_computed_blocks(same_seed).num_computed_tokens, 4);
  // cache_blocks for a request that holds no blocks.
  EXPECT_THROW(kv.cache_blocks(unhashed, 4), Error);
  kv.check_invariants();
}

TEST(KvCacheErrors, ExceedingThePoolReturnsNulloptWithoutChanges) {
  KVCacheManager kv(make_config(3, 4));
  Request r = make_request("r", iota_tokens(12), 4);
  EXPECT_EQ(alloc(kv, r, 12), std::nullopt);
  EXPECT_FALSE(kv.is_resident("r"));
  EXPECT_EQ(kv.num_free_blocks(), 2);
  kv.check_invariants();
}

}  // namespace
}  // namespace vellum::core
