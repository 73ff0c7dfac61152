#include "core/free_block_queue.h"

#include "common/check.h"

namespace vellum::core {

FreeBlockQueue::FreeBlockQueue(std::span<KVCacheBlock* const> blocks)
    : sentinels_(std::make_unique<KVCacheBlock[]>(2)) {
  KVCacheBlock* head = head_sentinel();
  KVCacheBlock* tail = tail_sentinel();
  head->block_id = tail->block_id = -1;
  head->next_free = tail;
  tail->prev_free = head;
  append_n(blocks);
}

KVCacheBlock* FreeBlockQueue::front() const {
  KVCacheBlock* b = head_sentinel()->next_free;
  return b == tail_sentinel() ? nullptr : b;
}

KVCacheBlock* FreeBlockQueue::back() const {
  KVCacheBlock* b = tail_sentinel()->prev_free;
  return b == head_sentinel() ? nullptr : b;
}

KVCacheBlock* FreeBlockQueue::popleft() {
  KVCacheBlock* head = head_sentinel();
  KVCacheBlock* first = head->next_free;
  VELLUM_CHECK(first != tail_sentinel(), ErrorCode::kOutOfMemory,
               "No free blocks available: the KV block pool is exhausted; free requests first");
  VELLUM_CHECK(first != nullptr && first->next_free != nullptr, ErrorCode::kInternal,
               "free block queue is corrupted: head block has no next link");
  head->next_free = first->next_free;
  first->next_free->prev_free = head;
  first->prev_free = first->next_free = nullptr;
  --num_free_blocks_;
  return first;
}

std::vector<KVCacheBlock*> FreeBlockQueue::popleft_n(int n) {
  VELLUM_CHECK(n >= 0 && n <= num_free_blocks_, ErrorCode::kOutOfMemory,
               "cannot pop {} blocks from a free queue holding {}", n, num_free_blocks_);
  std::vector<KVCacheBlock*> out;
  out.reserve(static_cast<size_t>(n));
  KVCacheBlock* head = head_sentinel();
  KVCacheBlock* cur = head->next_free;
  for (int i = 0; i < n; ++i) {
    KVCacheBlock* next = cur->next_free;
    cur->prev_free = cur->next_free = nullptr;
    out.push_back(cur);
    cur = next;
  }
  head->next_free = cur;
  cur->prev_free = head;
  num_free_blocks_ -= n;
  return out;
}

void FreeBlockQueue::remove(KVCacheBlock* block) {
  VELLUM_CHECK(block->prev_free != nullptr && block->next_free != nullptr, ErrorCode::kInternal,
               "remove() of block {} which is not in the free queue", block->block_id);
  block->prev_free->next_free = block->next_free;
  block->next_free->prev_free = block->prev_free;
  block->prev_free = block->next_free = nullptr;
  --num_free_blocks_;
}

void FreeBlockQueue::append(KVCacheBlock* block) {
  VELLUM_CHECK(block->prev_free == nullptr && block->next_free == nullptr, ErrorCode::kInternal,
               "append() of block {} which is already linked in a free queue", block->block_id);
  KVCacheBlock* tail = tail_sentinel();
  KVCacheBlock* last = tail->prev_free;
  last->next_free = block;
  block->prev_free = last;
  block->next_free = tail;
  tail->prev_free = block;
  ++num_free_blocks_;
}

void FreeBlockQueue::append_n(std::span<KVCacheBlock* const> blocks) {
  for (KVCacheBlock* b : blocks) append(b);
}

std::vector<KVCacheBlock*> FreeBlockQueue::get_all_free_blocks() const {
  std::vector<KVCacheBlock*> out;
  out.reserve(static_cast<size_t>(num_free_blocks_));
  for (KVCacheBlock* b = head_sentinel()->next_free; b != tail_sentinel() && b != nullptr;
       b = b->next_free) {
    out.push_back(b);
  }
  return out;
}

}  // namespace vellum::core
