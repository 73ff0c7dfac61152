// The bytes of the paged KV cache (the block bookkeeping lives in core/).
//
// Per layer, one K pool and one V pool, each (num_blocks, num_kv_heads, block_size, head_dim) of
// KvType (DESIGN.md §3). Block ids are shared by all layers: block b of a request is block b in
// every layer's pools. A SwapSpace is a second set of pools with its own block ids, in host
// memory, that preempted requests' blocks are copied to and back from.
//
// Thread-safety: owned and mutated by the engine core thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "common/aligned_buffer.h"
#include "kernels/kernels.h"

namespace vellum::model {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  kernels::KvType type = kernels::KvType::kF32;

  // Bytes of one block in one pool (one layer's K or V).
  int64_t pool_block_bytes() const;
  // Bytes one block id costs across all layers, K and V: what the memory budget divides by.
  int64_t bytes_per_block() const;
};

class KvCache {
 public:
  KvCache(const KvCacheShape& shape, int64_t num_blocks);

  const KvCacheShape& shape() const { return shape_; }
  int64_t num_blocks() const { return num_blocks_; }
  void* k_pool(int64_t layer) { return k_pools_[layer].data(); }
  void* v_pool(int64_t layer) { return v_pools_[layer].data(); }
  const void* k_pool(int64_t layer) const { return k_pools_[layer].data(); }
  const void* v_pool(int64_t layer) const { return v_pools_[layer].data(); }

  // For each i, block dst[i] := block src[i] in every layer's K and V pools (copy-on-write).
  void copy_blocks(const int32_t* src, const int32_t* dst, int64_t num_pairs);
  // Block bytes move between two caches of the same shape (swap out: this -> host; swap in:
  // host -> this): to.block[dst[i]] := from.block[src[i]].
  static void swap_blocks(KvCache& to, const KvCache& from, const int32_t* src, const int32_t* dst,
                          int64_t num_pairs);

 private:
  KvCacheShape shape_;
  int64_t num_blocks_ = 0;
  std::vector<AlignedBuffer> k_pools_;  // (num_layers) each num_blocks * pool_block_bytes
  std::vector<AlignedBuffer> v_pools_;
};

}  // namespace vellum::model
