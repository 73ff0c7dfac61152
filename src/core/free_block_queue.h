// FreeBlockQueue (spec §1.2): intrusive doubly linked list of free blocks with fake head and tail
// sentinels. O(1) popleft / remove / append; the _n variants are O(n). The head is evicted first;
// recently freed blocks are appended at the tail, so the queue is LRU.
//
// Ownership: the queue links blocks it does not own (the BlockPool's array, or a test's blocks);
// they must outlive the queue. Movable (the sentinels are heap-allocated), not copyable.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/kv_cache_block.h"

namespace vellum::core {

class FreeBlockQueue {
 public:
  // Links `blocks` in the given order.
  explicit FreeBlockQueue(std::span<KVCacheBlock* const> blocks);
  FreeBlockQueue(FreeBlockQueue&&) noexcept = default;
  FreeBlockQueue& operator=(FreeBlockQueue&&) noexcept = default;

  int num_free_blocks() const { return num_free_blocks_; }

  // Removes and returns the head. Throws kOutOfMemory "No free blocks available" when empty.
  KVCacheBlock* popleft();
  // The first n blocks in order, links cleared. Throws if n > num_free_blocks().
  std::vector<KVCacheBlock*> popleft_n(int n);
  // Unlinks a block from anywhere in the queue. Throws kInternal if it is not in a queue.
  void remove(KVCacheBlock* block);
  void append(KVCacheBlock* block);
  void append_n(std::span<KVCacheBlock* const> blocks);

  // Head to tail (tests, invariant checks).
  std::vector<KVCacheBlock*> get_all_free_blocks() const;
  KVCacheBlock* head_sentinel() const { return &sentinels_[0]; }
  KVCacheBlock* tail_sentinel() const { return &sentinels_[1]; }
  // First / last real block, nullptr when empty.
  KVCacheBlock* front() const;
  KVCacheBlock* back() const;

 private:
  int num_free_blocks_ = 0;
  std::unique_ptr<KVCacheBlock[]> sentinels_;  // [0] fake head, [1] fake tail, both id -1
};

}  // namespace vellum::core
