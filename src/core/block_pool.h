// BlockPool (spec §1.3): the device KV blocks as a flat array, the free queue, the prefix-cache
// index and lazy eviction. Block 0 is the null block. Works on block ids; `block(id)` exposes the
// metadata read-only.
//
// Free count includes cached blocks with ref_cnt 0 (they are evictable). A cached block keeps its
// hash while free and is evicted only when get_new_blocks reallocates it.
// Not thread-safe: owned by the engine core thread.
#pragma once

#include <span>
#include <vector>

#include "core/block_hash_index.h"
#include "core/free_block_queue.h"
#include "core/kv_cache_block.h"
#include "core/kv_events.h"

namespace vellum::core {

class Request;

struct BlockPoolConfig {
  int num_blocks = 0;  // including the null block; must be > 0
  bool enable_caching = true;
  bool enable_kv_cache_events = false;
};

class BlockPool {
 public:
  explicit BlockPool(const BlockPoolConfig& config);
  BlockPool(BlockPool&&) noexcept = default;
  BlockPool& operator=(BlockPool&&) noexcept = default;

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free_blocks() const { return free_queue_.num_free_blocks(); }
  bool enable_caching() const { return enable_caching_; }
  // 1 - free / (num_blocks - 1); 0 when num_blocks == 1.
  double usage() const;

  const KVCacheBlock& block(BlockId id) const;
  BlockId null_block_id() const { return kNullBlockId; }

  // Pops n blocks from the head of the free queue (evicting their cached hashes), each with
  // ref_cnt 1, in pop order. Throws kOutOfMemory "Cannot get n free blocks from the pool" and
  // changes nothing when n > num_free_blocks().
  std::vector<BlockId> get_new_blocks(int n);

  // Takes a reference on each block (a prefix-cache hit); blocks with ref_cnt 0 leave the free
  // queue. The null block is skipped.
  void touch(std::span<const BlockId> block_ids);

  // Drops a reference on each block; blocks reaching 0 are appended to the free queue in the
  // given order (so callers pass the eviction order: first given, first evicted). Hashes are kept.
  // Throws kInvalidArgument (and changes nothing) if a block is already free.
  void free_blocks(std::span<const BlockId> block_ids);

  // Caches the full blocks [num_cached_blocks, num_full_blocks) of `block_ids` under
  // request.block_hashes()[i] and `group_id`. Null blocks are skipped. No-op when
  // num_cached_blocks >= num_full_blocks.
  void cache_full_blocks(const Request& request, std::span<const BlockId> block_ids,
                         int num_cached_blocks, int num_full_blocks, int block_size,
                         int group_id = 0);

  // For each group id, the first block cached under (hash, group id); empty if any group misses.
  std::vector<BlockId> get_cached_block(const BlockHash& hash,
                                        std::span<const int> group_ids) const;
  // Single-group shortcut: the first block cached under (hash, group_id), or nullopt.
  std::optional<BlockId> get_cached_block(const BlockHash& hash, int group_id = 0) const;

  // Evicts the cached hash of a block (if any) without freeing it. Returns true if evicted.
  bool evict_cached_block(BlockId block_id);
  // evict_blocks (KV connectors): evicts the hash of each id. Throws on an id out of range.
  void evict_blocks(std::span<const BlockId> block_ids);

  // Clears the whole prefix cache. Returns false (and logs a warning) if any block other than the
  // null block is in use.
  bool reset_prefix_cache();

  // Queued events (only when enabled), oldest first; the queue is cleared.
  std::vector<KVCacheEvent> take_events();

  const BlockHashIndex& cached_block_index() const { return index_; }
  // Free queue, head (next evicted) to tail.
  std::vector<BlockId> free_block_ids() const;

  // Verifies the free count, ref counts, free-list links and index consistency. Throws kInternal
  // describing the first violation. O(num_blocks).
  void check_invariants() const;

 private:
  KVCacheBlock& mutable_block(BlockId id);
  bool maybe_evict_cached_block(KVCacheBlock& block);

  bool enable_caching_;
  bool enable_kv_cache_events_;
  std::vector<KVCacheBlock> blocks_;  // [num_blocks], index == block_id; never resized
  FreeBlockQueue free_queue_;
  BlockHashIndex index_;
  std::vector<KVCacheEvent> events_;
};

}  // namespace vellum::core
