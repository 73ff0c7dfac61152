// Scenarios §3 A (S01-S06) and S22: free queue, block pool, cache index.
#include <gtest/gtest.h>

#include <array>

#include "common/check.h"
#include "core/block_hash_index.h"
#include "core/block_pool.h"
#include "core/free_block_queue.h"
#include "core_test_util.h"

namespace vellum::core {
namespace {

using testing::iota_tokens;
using testing::make_request;

std::vector<KVCacheBlock> make_blocks(int n) {
  std::vector<KVCacheBlock> blocks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) blocks[static_cast<size_t>(i)].block_id = i;
  return blocks;
}

std::vector<int> ids_of(const std::vector<KVCacheBlock*>& bs) {
  std::vector<int> out;
  for (auto* b : bs) out.push_back(b->block_id);
  return out;
}

TEST(KvCacheScenarios, S01_FreeQueueOperations) {
  auto b = make_blocks(5);
  std::vector<KVCacheBlock*> ptrs{&b[0], &b[1], &b[2], &b[3], &b[4]};
  FreeBlockQueue q(ptrs);
  EXPECT_EQ(q.num_free_blocks(), 5);
  EXPECT_EQ(q.front(), &b[0]);
  EXPECT_EQ(q.back(), &b[4]);

  EXPECT_EQ(q.popleft(), &b[0]);
  EXPECT_EQ(q.num_free_blocks(), 4);
  EXPECT_EQ(q.front(), &b[1]);
  EXPECT_EQ(b[0].prev_free, nullptr);
  EXPECT_EQ(b[0].next_free, nullptr);

  q.remove(&b[2]);
  EXPECT_EQ(q.num_free_blocks(), 3);
  EXPECT_EQ(b[1].next_free, &b[3]);

  q.append(&b[2]);
  EXPECT_EQ(q.num_free_blocks(), 4);
  EXPECT_EQ(q.back(), &b[2]);
  EXPECT_EQ(b[2].prev_free, &b[4]);
  EXPECT_EQ(ids_of(q.get_all_free_blocks()), (std::vector<int>{1, 3, 4, 2}));

  for (int i = 0; i < 4; ++i) q.popleft();
  EXPECT_EQ(q.num_free_blocks(), 0);
  EXPECT_EQ(q.head_sentinel()->next_free, q.tail_sentinel());
  EXPECT_EQ(q.tail_sentinel()->prev_free, q.head_sentinel());
  try {
    q.popleft();
    FAIL() << "popleft on an empty queue must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("No free blocks available"), std::string::npos);
  }

  // A queue of one block has head == tail == that block.
  auto one = make_blocks(1);
  std::vector<KVCacheBlock*> one_ptr{&one[0]};
  FreeBlockQueue single(one_ptr);
  EXPECT_EQ(single.front(), &one[0]);
  EXPECT_EQ(single.back(), &one[0]);
}

TEST(KvCacheScenarios, S01_RemoveOfUnlinkedBlockThrows) {
  auto b = make_blocks(2);
  std::vector<KVCacheBlock*> ptrs{&b[0]};
  FreeBlockQueue q(ptrs);
  EXPECT_THROW(q.remove(&b[1]), Error);
  EXPECT_EQ(q.num_free_blocks(), 1);
}

TEST(KvCacheScenarios, S02_PopleftNKeepsQueueOrder) {
  auto b = make_blocks(6);
  std::vector<KVCacheBlock*> ptrs{&b[1], &b[3], &b[5], &b[4], &b[0], &b[2]};
  FreeBlockQueue q(ptrs);
  EXPECT_TRUE(q.popleft_n(0).empty());
  EXPECT_EQ(q.num_free_blocks(), 6);
  EXPECT_EQ(ids_of(q.popleft_n(1)), (std::vector<int>{1}));
  EXPECT_EQ(q.num_free_blocks(), 5);
  EXPECT_EQ(ids_of(q.popleft_n(2)), (std::vector<int>{3, 5}));
  EXPECT_EQ(q.num_free_blocks(), 3);
  EXPECT_EQ(ids_of(q.popleft_n(3)), (std::vector<int>{4, 0, 2}));
  EXPECT_EQ(q.num_free_blocks(), 0);
  for (auto& blk : b) {
    EXPECT_EQ(blk.prev_free, nullptr);
    EXPECT_EQ(blk.next_free, nullptr);
  }
  EXPECT_THROW(q.popleft_n(1), Error);
}

TEST(KvCacheScenarios, S03_AppendN) {
  auto b = make_blocks(6);
  FreeBlockQueue q(std::span<KVCacheBlock* const>{});
  q.append_n({});
  EXPECT_EQ(q.num_free_blocks(), 0);
  std::vector<KVCacheBlock*> first{&b[0]};
  q.append_n(first);
  EXPECT_EQ(ids_of(q.get_all_free_blocks()), (std::vector<int>{0}));
  std::vector<KVCacheBlock*> second{&b[4], &b[5]};
  q.append_n(second);
  EXPECT_EQ(ids_of(q.get_all_free_blocks()), (std::vector<int>{0, 4, 5}));
  std::vector<KVCacheBlock*> third{&b[1], &b[2], &b[3]};
  q.append_n(third);
  EXPECT_EQ(ids_of(q.get_all_free_blocks()), (std::vector<int>{0, 4, 5, 1, 2, 3}));
  EXPECT_EQ(q.num_free_blocks(), 6);
}

TEST(KvCacheScenarios, S04_PoolInitUsageOverAllocation) {
  BlockPool pool(BlockPoolConfig{.num_blocks = 11});
  EXPECT_TRUE(pool.block(0).is_null);
  EXPECT_EQ(pool.null_block_id(), 0);
  EXPECT_EQ(pool.num_free_blocks(), 10);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);

  EXPECT_EQ(pool.get_new_blocks(5), (std::vector<BlockId>{1, 2, 3, 4, 5}));
  for (BlockId id = 1; id <= 5; ++id) EXPECT_EQ(pool.block(id).ref_cnt, 1);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.5);

  const auto free_before = pool.free_block_ids();
  try {
    (void)pool.get_new_blocks(6);
    FAIL() << "over-allocation must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("Cannot get 6 free blocks from the pool"),
              std::string::npos);
  }
  EXPECT_EQ(pool.free_block_ids(), free_before);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  pool.check_invariants();

  BlockPool tiny(BlockPoolConfig{.num_blocks = 1});
  EXPECT_DOUBLE_EQ(tiny.usage(), 0.0);
  EXPECT_THROW(BlockPool(BlockPoolConfig{.num_blocks = 0}), Error);
}

BlockHashWithGroupId key_of(uint8_t tag, int group = 0) {
  BlockHashWithGroupId k;
  k.hash.bytes[0] = tag;
  k.group_id = group;
  return k;
}

TEST(KvCacheScenarios, S05_CacheIndexSingleBlockPerKey) {
  BlockHashIndex index;
  const auto k0 = key_of(0), k1 = key_of(1);
  index.insert(k0, 0);
  index.insert(k1, 1);
  EXPECT_EQ(index.pop(k0, 100), std::nullopt);
  EXPECT_EQ(index.get_one_block(k0), std::optional<BlockId>(0));
  EXPECT_EQ(index.pop(k0, 0), std::optional<BlockId>(0));
  EXPECT_EQ(index.get_one_block(k0), std::nullopt);
  EXPECT_EQ(index.pop(k0, 1), std::nullopt);
  EXPECT_EQ(index.pop(k1, 1), std::optional<BlockId>(1));
  EXPECT_EQ(index.get_one_block(k0), std::nullopt);
  EXPECT_EQ(index.get_one_block(k1), std::nullopt);
  EXPECT_TRUE(index.empty());
}

TEST(KvCacheScenarios, S05_CacheIndexMultiBlocksPerKey) {
  BlockHashIndex index;
  const auto k0 = key_of(0), k1 = key_of(1);
  index.insert(k0, 0);
  index.insert(k0, 1);
  index.insert(k1, 10);
  index.insert(k1, 11);
  EXPECT_EQ(index.get_one_block(k0), std::optional<BlockId>(0));
  EXPECT_EQ(index.pop(k0, 0), std::optional<BlockId>(0));
  EXPECT_EQ(index.get_one_block(k0), std::optional<BlockId>(1));
  EXPECT_EQ(index.pop(k0, 1), std::optional<BlockId>(1));
  EXPECT_EQ(index.get_one_block(k0), std::nullopt);
  EXPECT_EQ(index.pop(k0, 2), std::nullopt);

  EXPECT_EQ(index.get_one_block(k1), std::optional<BlockId>(10));
  EXPECT_EQ(index.pop(k1, 10), std::optional<BlockId>(10));
  EXPECT_EQ(index.get_one_block(k1), std::optional<BlockId>(11));
  EXPECT_EQ(index.pop(k1, 11), std::optional<BlockId>(11));
  EXPECT_EQ(index.get_one_block(k1), std::nullopt);
  EXPECT_EQ(index.pop(k1, 12), std::nullopt);
  EXPECT_TRUE(index.empty());
}

// Upstream sets hashes on blocks 0..3 of a 4-block pool, including the null block. Here block 0
// is never cacheable, so the same trace runs on blocks 1..4 (every id shifted by one).
TEST(KvCacheScenarios, S06_EvictingDuplicateHashRemovesOnlyThatBlock) {
  BlockPool pool(BlockPoolConfig{.num_blocks = 5});
  Request req = make_request("r", iota_tokens(12), 4);
  ASSERT_EQ(req.block_hashes().size(), 3u);
  const auto h0 = req.block_hashes()[0], h1 = req.block_hashes()[1], h2 = req.block_hashes()[2];
  const auto blocks = pool.get_new_blocks(4);
  ASSERT_EQ(blocks, (std::vector<BlockId>{1, 2, 3, 4}));
  pool.cache_full_blocks(req, std::span(blocks).first(3), 0, 3, 4);
  pool.cache_full_blocks(req, std::span(blocks).subspan(3), 0, 1, 4);  // block 4 duplicates h0
  const auto& index = pool.cached_block_index();
  auto all = [&](const BlockHash& h) { return index.get_all_blocks({h, 0}); };
  EXPECT_EQ(all(h0), (std::vector<BlockId>{1, 4}));
  EXPECT_EQ(all(h1), (std::vector<BlockId>{2}));
  EXPECT_EQ(all(h2), (std::vector<BlockId>{3}));

  EXPECT_TRUE(pool.evict_cached_block(2));
  EXPECT_EQ(index.num_keys(), 2);
  EXPECT_TRUE(all(h1).empty());
  EXPECT_TRUE(pool.evict_cached_block(1));
  EXPECT_EQ(all(h0), (std::vector<BlockId>{4}));
  EXPECT_EQ(all(h2), (std::vector<BlockId>{3}));
  EXPECT_TRUE(pool.evict_cached_block(3));
  EXPECT_EQ(index.num_keys(), 1);
  EXPECT_EQ(all(h0), (std::vector<BlockId>{4}));
  EXPECT_TRUE(pool.evict_cached_block(4));
  EXPECT_TRUE(index.empty());
  EXPECT_FALSE(pool.evict_cached_block(4));  // nothing left to evict
  EXPECT_FALSE(pool.block(1).block_hash.has_value());
  pool.check_invariants();
}

TEST(KvCacheScenarios, S22_CacheBlocksIncrementally) {
  BlockPool pool(BlockPoolConfig{.num_blocks = 10});
  Request req = make_request("r", iota_tokens(14), 4);
  ASSERT_EQ(req.block_hashes().size(), 3u);
  const auto blocks = pool.get_new_blocks(3);
  pool.cache_full_blocks(req, std::span(blocks).first(2), 0, 2, 4);
  EXPECT_EQ(pool.cached_block_index().num_keys(), 2);
  pool.cache_full_blocks(req, blocks, 2, 3, 4);
  EXPECT_EQ(pool.cached_block_index().num_keys(), 3);
  pool.cache_full_blocks(req, blocks, 3, 3, 4);  // nothing new: no-op
  EXPECT_EQ(pool.cached_block_index().num_keys(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(pool.block(blocks[static_cast<size_t>(i)]).block_hash->hash,
              req.block_hashes()[static_cast<size_t>(i)]);
  }
  pool.check_invariants();
}

TEST(KvCacheScenarios, S22_CacheBlocksMultiGroup) {
  BlockPool pool(BlockPoolConfig{.num_blocks = 10});
  Request req = make_request("r", iota_tokens(14), 4);
  const auto g0 = pool.get_new_blocks(2);
  const auto g1 = pool.get_new_blocks(3);
  pool.cache_full_blocks(req, g0, 0, 2, 4, /*group_id=*/0);
  pool.cache_full_blocks(req, g1, 0, 3, 4, /*group_id=*/1);
  EXPECT_EQ(pool.cached_block_index().num_keys(), 5);
  const auto h2 = req.block_hashes()[2];
  const std::array<int, 1> only0{0}, only1{1};
  const std::array<int, 2> both{0, 1};
  EXPECT_TRUE(pool.get_cached_block(h2, only0).empty());
  EXPECT_EQ(pool.get_cached_block(h2, only1), (std::vector<BlockId>{g1[2]}));
  EXPECT_TRUE(pool.get_cached_block(h2, both).empty());
  const auto h0 = req.block_hashes()[0];
  EXPECT_EQ(pool.get_cached_block(h0, both), (std::vector<BlockId>{g0[0], g1[0]}));
  pool.check_invariants();
}

TEST(KvCacheErrors, PoolDoubleFreeThrowsAndChangesNothing) {
  BlockPool pool(BlockPoolConfig{.num_blocks = 4});
  const auto blocks = pool.get_new_blocks(2);
  pool.free_blocks(blocks);
  const auto before = pool.free_block_ids();
  try {
    pool.free_blocks(blocks);
    FAIL() << "double free must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(pool.free_block_ids(), before);
  pool.check_invariants();
  const std::array<BlockId, 1> bad{7};
  EXPECT_THROW(pool.free_blocks(bad), Error);
  EXPECT_THROW(pool.touch(bad), Error);
  pool.check_invariants();
}

TEST(KvCacheErrors, SettingASecondHashIsAnError) {
  KVCacheBlock b;
  b.block_id = 3;
  b.set_block_hash(key_of(1));
  EXPECT_THROW(b.set_block_hash(key_of(2)), Error);
  b.reset_hash();
  b.set_block_hash(key_of(2));
  EXPECT_EQ(b.block_hash->hash.bytes[0], 2);
}

}  // namespace
}  // namespace vellum::core
