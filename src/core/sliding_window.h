// Sliding-window attention helpers (spec §1.7). Pure functions on block ids so they can be
// tested without a pool.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/block_hash.h"
#include "core/kv_cache_block.h"

namespace vellum::core {

// Tokens before this position are outside the window of every future query.
inline int sliding_window_num_skipped_tokens(int num_computed_tokens, int sliding_window) {
  return num_computed_tokens - sliding_window + 1 > 0 ? num_computed_tokens - sliding_window + 1 : 0;
}

// Replaces the blocks wholly outside the window with kNullBlockId, walking from the highest
// skipped index down and stopping at the first null. Returns the removed ids in the order they
// must be freed (higher index first, so it is evicted earlier).
std::vector<BlockId> remove_skipped_blocks(std::vector<BlockId>& block_ids, int num_computed_tokens,
                                           int sliding_window, int block_size);

// Longest usable prefix-cache hit for a sliding-window layer: scanning right to left, the first
// run of cdiv(window-1, bs) (+1 with eagle) contiguous cached blocks; positions before the run are
// kNullBlockId. Without a complete run, the run of cached blocks at the very start.
// `lookup` returns the cached block for a hash, or nullopt.
std::vector<BlockId> find_longest_cache_hit_sliding_window(
    std::span<const BlockHash> block_hashes, int max_length, int sliding_window, int block_size,
    bool use_eagle, const std::function<std::optional<BlockId>(const BlockHash&)>& lookup);

}  // namespace vellum::core
