// The swap tier (spec §2.10, V0): a secondary pool of blocks in host memory with its own
// capacity. Plain reference-counted blocks, no prefix caching. Host block ids are their own id
// space [0, num_blocks); the bytes live in the model's host KV buffer.
// Not thread-safe: owned by the engine core thread.
#pragma once

#include <deque>
#include <vector>

#include "core/kv_cache_block.h"

namespace vellum::core {

class HostBlockPool {
 public:
  explicit HostBlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(ref_cnts_.size()); }
  int num_free_blocks() const { return static_cast<int>(free_ids_.size()); }
  int ref_cnt(BlockId id) const;

  // n blocks with ref_cnt 1, lowest free ids first (freed ids are reused in FIFO order).
  // Throws kOutOfMemory and changes nothing if n > num_free_blocks().
  std::vector<BlockId> allocate(int n);
  void incref(BlockId id);
  // Drops one reference; the block is free again at 0. Throws kInvalidArgument on a free block.
  void free(BlockId id);

  void check_invariants() const;

 private:
  std::vector<int32_t> ref_cnts_;  // [num_blocks]
  std::deque<BlockId> free_ids_;
};

}  // namespace vellum::core
