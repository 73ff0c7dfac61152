#include "core/block_pool.h"

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "core/request.h"

namespace vellum::core {
namespace {

std::vector<KVCacheBlock*> pointers_to(std::vector<KVCacheBlock>& blocks) {
  std::vector<KVCacheBlock*> out;
  out.reserve(blocks.size());
  for (KVCacheBlock& b : blocks) out.push_back(&b);
  return out;
}

std::vector<KVCacheBlock> make_blocks(int num_blocks) {
  VELLUM_CHECK(num_blocks > 0, ErrorCode::kInvalidArgument,
               "BlockPool needs num_blocks > 0 (block 0 is the null block), got {}", num_blocks);
  std::vector<KVCacheBlock> blocks(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) blocks[static_cast<size_t>(i)].block_id = i;
  return blocks;
}

}  // namespace

BlockPool::BlockPool(const BlockPoolConfig& config)
    : enable_caching_(config.enable_caching),
      enable_kv_cache_events_(config.enable_kv_cache_events),
      blocks_(make_blocks(config.num_blocks)),
      free_queue_(pointers_to(blocks_)) {
  KVCacheBlock* null_block = free_queue_.popleft();
  VELLUM_ASSERT(null_block->block_id == kNullBlockId);
  null_block->is_null = true;
}

double BlockPool::usage() const {
  const int num_usable = num_blocks() - 1;
  if (num_usable == 0) return 0.0;
  return 1.0 - static_cast<double>(num_free_blocks()) / num_usable;
}

const KVCacheBlock& BlockPool::block(BlockId id) const {
  VELLUM_CHECK(id >= 0 && id < num_blocks(), ErrorCode::kInvalidArgument,
               "block id {} is out of range [0, {})", id, num_blocks());
  return blocks_[static_cast<size_t>(id)];
}

KVCacheBlock& BlockPool::mutable_block(BlockId id) {
  VELLUM_CHECK(id >= 0 && id < num_blocks(), ErrorCode::kInvalidArgument,
               "block id {} is out of range [0, {})", id, num_blocks());
  return blocks_[static_cast<size_t>(id)];
}

std::vector<BlockId> BlockPool::get_new_blocks(int n) {
  VELLUM_CHECK(n >= 0, ErrorCode::kInvalidArgument, "cannot get a negative number ({}) of blocks", n);
  VELLUM_CHECK(n <= num_free_blocks(), ErrorCode::kOutOfMemory,
               "Cannot get {} free blocks from the pool ({} free); check the free count before "
               "allocating", n, num_free_blocks());
  std::vector<KVCacheBlock*> popped = free_queue_.popleft_n(n);
  std::vector<BlockId> ids;
  ids.reserve(popped.size());
  for (KVCacheBlock* b : popped) {
    if (enable_caching_) maybe_evict_cached_block(*b);
    VELLUM_ASSERT(b->ref_cnt == 0);
    b->ref_cnt = 1;
    ids.push_back(b->block_id);
  }
  return ids;
}

bool BlockPool::maybe_evict_cached_block(KVCacheBlock& block) {
  if (!block.block_hash) return false;
  if (!index_.pop(*block.block_hash, block.block_id)) return false;
  if (enable_kv_cache_events_) {
    events_.emplace_back(BlockRemoved{{block.block_hash->hash}, block.block_hash->group_id});
  }
  block.reset_hash();
  return true;
}

void BlockPool::touch(std::span<const BlockId> block_ids) {
  for (BlockId id : block_ids) mutable_block(id);  // validate ids before mutating
  for (BlockId id : block_ids) {
    KVCacheBlock& b = blocks_[static_cast<size_t>(id)];
    if (b.is_null) continue;
    if (b.ref_cnt == 0) free_queue_.remove(&b);
    ++b.ref_cnt;
  }
}

void BlockPool::free_blocks(std::span<const BlockId> block_ids) {
  for (BlockId id : block_ids) {
    const KVCacheBlock& b = mutable_block(id);
    VELLUM_CHECK(b.is_null || b.ref_cnt > 0, ErrorCode::kInvalidArgument,
                 "double free: block {} is already free", id);
  }
  for (BlockId id : block_ids) {
    KVCacheBlock& b = blocks_[static_cast<size_t>(id)];
    if (b.is_null) continue;
    VELLUM_CHECK(b.ref_cnt > 0, ErrorCode::kInvalidArgument,
                 "double free: block {} is listed more times than it is referenced", id);
    --b.ref_cnt;
  }
  for (BlockId id : block_ids) {
    KVCacheBlock& b = blocks_[static_cast<size_t>(id)];
    // prev_free == nullptr guards a block listed twice that reached 0 on the first occurrence.
    if (!b.is_null && b.ref_cnt == 0 && b.prev_free == nullptr) free_queue_.append(&b);
  }
}

void BlockPool::cache_full_blocks(const Request& request, std::span<const BlockId> block_ids,
                                  int num_cached_blocks, int num_full_blocks, int block_size,
                                  int group_id) {
  if (num_cached_blocks >= num_full_blocks) return;
  VELLUM_CHECK(num_full_blocks <= static_cast<int>(block_ids.size()), ErrorCode::kInternal,
               "cache_full_blocks: {} full blocks but the table has {}", num_full_blocks,
               block_ids.size());
  auto hashes = request.block_hashes();
  VELLUM_CHECK(num_full_blocks <= static_cast<int>(hashes.size()), ErrorCode::kInternal,
               "cache_full_blocks: request {} has {} block hashes, {} full blocks asked; build the "
               "Request with a BlockHasher of block_size {}",
               request.request_id(), hashes.size(), num_full_blocks, block_size);
  BlockStored stored;
  for (int i = num_cached_blocks; i < num_full_blocks; ++i) {
    KVCacheBlock& b = mutable_block(block_ids[static_cast<size_t>(i)]);
    if (b.is_null) continue;
    BlockHashWithGroupId key{hashes[static_cast<size_t>(i)], group_id};
    // A block shared with a forked sibling may already have been cached by the sibling.
    if (b.block_hash && *b.block_hash == key) continue;
    b.set_block_hash(key);
    index_.insert(key, b.block_id);
    if (enable_kv_cache_events_) stored.block_hashes.push_back(key.hash);
  }
  if (!enable_kv_cache_events_) return;
  if (num_cached_blocks > 0) stored.parent_block_hash = hashes[static_cast<size_t>(num_cached_blocks - 1)];
  auto tokens = request.all_token_ids().subspan(
      static_cast<size_t>(num_cached_blocks) * static_cast<size_t>(block_size),
      static_cast<size_t>(num_full_blocks - num_cached_blocks) * static_cast<size_t>(block_size));
  stored.token_ids.assign(tokens.begin(), tokens.end());
  stored.block_size = block_size;
  if (request.params().lora_id != 0) stored.lora_id = request.params().lora_id;
  const ExtraKeySources sources = request.extra_key_sources();
  int mm_idx = 0;
  for (int i = num_cached_blocks; i < num_full_blocks; ++i) {
    ExtraKeysResult extra = generate_block_hash_extra_keys(
        sources, int64_t{i} * block_size, int64_t{i + 1} * block_size, mm_idx);
    mm_idx = extra.next_mm_idx;
    stored.extra_keys.push_back(std::move(extra.keys));
  }
  stored.group_idx = group_id;
  events_.emplace_back(std::move(stored));
}

std::vector<BlockId> BlockPool::get_cached_block(const BlockHash& hash,
                                                 std::span<const int> group_ids) const {
  std::vector<BlockId> out;
  out.reserve(group_ids.size());
  for (int gid : group_ids) {
    auto id = index_.get_one_block({hash, gid});
    if (!id) return {};
    out.push_back(*id);
  }
  return out;
}

std::optional<BlockId> BlockPool::get_cached_block(const BlockHash& hash, int group_id) const {
  return index_.get_one_block({hash, group_id});
}

bool BlockPool::evict_cached_block(BlockId block_id) {
  return maybe_evict_cached_block(mutable_block(block_id));
}

void BlockPool::evict_blocks(std::span<const BlockId> block_ids) {
  for (BlockId id : block_ids) mutable_block(id);
  for (BlockId id : block_ids) maybe_evict_cached_block(blocks_[static_cast<size_t>(id)]);
}

bool BlockPool::reset_prefix_cache() {
  const int num_used = num_blocks() - num_free_blocks();
  if (num_used != 1) {
    VELLUM_LOG_WARN("Failed to reset the prefix cache: {} blocks are still in use (only the null "
                    "block may be); free all requests first", num_used - 1);
    return false;
  }
  index_.clear();
  for (KVCacheBlock& b : blocks_) b.reset_hash();
  if (enable_kv_cache_events_) events_.emplace_back(AllBlocksCleared{});
  return true;
}

std::vector<KVCacheEvent> BlockPool::take_events() {
  std::vector<KVCacheEvent> out;
  out.swap(events_);
  return out;
}

std::vector<BlockId> BlockPool::free_block_ids() const {
  std::vector<BlockId> ids;
  for (KVCacheBlock* b : free_queue_.get_all_free_blocks()) ids.push_back(b->block_id);
  return ids;
}

void BlockPool::check_invariants() const {
  const KVCacheBlock& null_block = blocks_[kNullBlockId];
  VELLUM_CHECK(null_block.is_null && null_block.ref_cnt == 0 && !null_block.block_hash &&
                   null_block.prev_free == nullptr && null_block.next_free == nullptr,
               ErrorCode::kInternal, "null block 0 is in use, cached or linked");
  // Walk the free list: links consistent, members have ref 0, count matches.
  int num_linked = 0;
  const KVCacheBlock* prev = free_queue_.head_sentinel();
  for (const KVCacheBlock* b = prev->next_free; b != free_queue_.tail_sentinel(); b = b->next_free) {
    VELLUM_CHECK(b != nullptr, ErrorCode::kInternal, "free list is broken after block {}",
                 prev->block_id);
    VELLUM_CHECK(b->prev_free == prev, ErrorCode::kInternal,
                 "free list prev link of block {} does not point at block {}", b->block_id,
                 prev->block_id);
    VELLUM_CHECK(b->block_id > 0 && b->block_id < num_blocks() &&
                     &blocks_[static_cast<size_t>(b->block_id)] == b,
                 ErrorCode::kInternal, "free list holds a foreign block {}", b->block_id);
    VELLUM_CHECK(b->ref_cnt == 0, ErrorCode::kInternal, "free block {} has ref_cnt {}",
                 b->block_id, b->ref_cnt);
    ++num_linked;
    VELLUM_CHECK(num_linked <= num_blocks(), ErrorCode::kInternal, "free list has a cycle");
    prev = b;
  }
  VELLUM_CHECK(free_queue_.tail_sentinel()->prev_free == prev, ErrorCode::kInternal,
               "tail sentinel prev link is stale");
  VELLUM_CHECK(num_linked == free_queue_.num_free_blocks(), ErrorCode::kInternal,
               "free count {} but {} blocks linked", free_queue_.num_free_blocks(), num_linked);
  // Every non-null block is either linked (ref 0) or referenced (ref > 0).
  int num_cached = 0;
  for (const KVCacheBlock& b : blocks_) {
    if (b.is_null) continue;
    const bool linked = b.prev_free != nullptr;
    VELLUM_CHECK(b.ref_cnt >= 0, ErrorCode::kInternal, "block {} has ref_cnt {}", b.block_id,
                 b.ref_cnt);
    VELLUM_CHECK(linked == (b.ref_cnt == 0), ErrorCode::kInternal,
                 "block {} has ref_cnt {} but is {}in the free list", b.block_id, b.ref_cnt,
                 linked ? "" : "not ");
    VELLUM_CHECK(linked == (b.next_free != nullptr), ErrorCode::kInternal,
                 "block {} has only one free-list link", b.block_id);
    if (b.block_hash) {
      VELLUM_CHECK(enable_caching_, ErrorCode::kInternal,
                   "block {} has a hash although caching is disabled", b.block_id);
      auto ids = index_.get_all_blocks(*b.block_hash);
      VELLUM_CHECK(std::find(ids.begin(), ids.end(), b.block_id) != ids.end(),
                   ErrorCode::kInternal, "block {} has a hash missing from the index", b.block_id);
      ++num_cached;
    }
  }
  VELLUM_CHECK(num_cached == index_.num_blocks(), ErrorCode::kInternal,
               "{} blocks carry a hash but the index holds {}", num_cached, index_.num_blocks());
  index_.for_each([&](const BlockHashWithGroupId& key, BlockId id) {
    VELLUM_CHECK(id > 0 && id < num_blocks(), ErrorCode::kInternal,
                 "index holds an out-of-range block {}", id);
    const KVCacheBlock& b = blocks_[static_cast<size_t>(id)];
    VELLUM_CHECK(b.block_hash && *b.block_hash == key, ErrorCode::kInternal,
                 "index maps a key to block {} which carries another hash", id);
  });
}

}  // namespace vellum::core
