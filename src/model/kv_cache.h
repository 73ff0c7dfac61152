// The bytes of the paged KV cache (the block bookkeeping lives in core/).
//
// Per pool slot, one K pool and one V pool, each (num_blocks, num_kv_heads, block_size) cache rows
// of head_dim values in their KvType (DESIGN.md §3; K and V may differ, quantized types keep their
// scales inside the rows, so blocks move as plain bytes); KvCacheLayout maps layers to slots (one slot per layer unless the
// model mixes attention types). Block ids are shared by all slots. A SwapSpace is a second set of pools with its own block ids, in host
// memory, that preempted requests' blocks are copied to and back from.
//
// Thread-safety: owned and mutated by the engine core thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "common/aligned_buffer.h"
#include "kernels/kernels.h"

namespace vellum::model {

// How the layers share the paged KV cache: KV cache groups, each with its own block table (vLLM's
// kv_cache_groups). All groups take block ids from one pool, and a block id names one page in
// each of `num_slots` K and V pools; layer l keeps its KV in pool slot layer_slot[l] at the block
// ids of group layer_group[l].
//
// Without mixed attention types there is one group of all layers (slot l = layer l). With full
// and sliding-window layers mixed (Gemma 2/3), vLLM's hybrid allocator rule: the layers of each
// type are cut, in layer order, into groups of the same size (the smaller type's layer count, or
// the larger one's when within 25 %), the last group of a type padded; a sliding group's blocks
// outside its window go back to the pool.
struct KvCacheLayout {
  std::vector<int64_t> group_windows;  // per group: sliding window in tokens, 0 = full attention
  std::vector<int> layer_group;        // per layer
  std::vector<int> layer_slot;         // per layer
  int64_t num_slots = 0;

  int64_t num_groups() const { return static_cast<int64_t>(group_windows.size()); }
  int64_t num_layers() const { return static_cast<int64_t>(layer_group.size()); }

  // One group of every layer; its window is `sliding_window` when every layer slides, else 0
  // (sliding layers then attend within their window but keep the whole KV).
  static KvCacheLayout single_group(const std::vector<bool>& layer_is_sliding,
                                    int64_t sliding_window);
  // The hybrid layout above; a single group when the layers are all of one type.
  static KvCacheLayout hybrid(const std::vector<bool>& layer_is_sliding, int64_t sliding_window);
};

// Storage types of the K and V pools (--kv-cache-dtype sets both, --cache-type-k / -v one each).
struct KvCacheDtype {
  kernels::KvType k = kernels::KvType::kF32;
  kernels::KvType v = kernels::KvType::kF32;
  // K (and every query with it) is stored rotated by the Walsh-Hadamard matrix of order head_dim
  // (kernels::hadamard_rotate; scores unchanged), so that a 4-bit K block does not spend its
  // scale on one outlier dimension. Needs a power-of-two head dim.
  bool rotate_k = false;

  KvCacheDtype() = default;
  KvCacheDtype(kernels::KvType k_type, kernels::KvType v_type) : k(k_type), v(v_type) {}
  // One type for both (implicit: a single KvType reads as "K and V alike").
  KvCacheDtype(kernels::KvType both) : k(both), v(both) {}  // NOLINT(google-explicit-constructor)
  bool operator==(const KvCacheDtype&) const = default;
};

struct KvCacheShape {
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  KvCacheDtype dtype;
  KvCacheLayout layout;

  int64_t num_slots() const { return layout.num_slots; }
  // Bytes of one block in one slot's K pool, and in its V pool.
  int64_t k_pool_block_bytes() const;
  int64_t v_pool_block_bytes() const;
  // Throws vellum::Error naming the fix when the dtype does not fit head_dim (a 32-value block
  // type on another head dim, a Hadamard rotation on a head dim that is not a power of two).
  void check_dtype() const;
  // Bytes one block id costs across all slots, K and V: what the memory budget divides by.
  int64_t bytes_per_block() const;
};

class KvCache {
 public:
  KvCache(const KvCacheShape& shape, int64_t num_blocks);

  const KvCacheShape& shape() const { return shape_; }
  int64_t num_blocks() const { return num_blocks_; }
  // The pools of a layer (its slot in the layout).
  void* k_pool(int64_t layer) { return k_pools_[slot(layer)].data(); }
  void* v_pool(int64_t layer) { return v_pools_[slot(layer)].data(); }
  const void* k_pool(int64_t layer) const { return k_pools_[slot(layer)].data(); }
  const void* v_pool(int64_t layer) const { return v_pools_[slot(layer)].data(); }

  // For each i, block dst[i] := block src[i] in every slot's K and V pools (copy-on-write).
  void copy_blocks(const int32_t* src, const int32_t* dst, int64_t num_pairs);
  // Block bytes move between two caches of the same shape (swap out: this -> host; swap in:
  // host -> this): to.block[dst[i]] := from.block[src[i]].
  static void swap_blocks(KvCache& to, const KvCache& from, const int32_t* src, const int32_t* dst,
                          int64_t num_pairs);

 private:
  size_t slot(int64_t layer) const {
    return static_cast<size_t>(shape_.layout.layer_slot[static_cast<size_t>(layer)]);
  }

  KvCacheShape shape_;
  int64_t num_blocks_ = 0;
  std::vector<AlignedBuffer> k_pools_;  // (num_slots) each num_blocks * k_pool_block_bytes
  std::vector<AlignedBuffer> v_pools_;  // (num_slots) each num_blocks * v_pool_block_bytes
};

}  // namespace vellum::model
