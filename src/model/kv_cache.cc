#include "model/kv_cache.h"

#include "common/check.h"

namespace vellum::model {

int64_t KvCacheShape::pool_block_bytes() const {
  return num_kv_heads * block_size * head_dim * static_cast<int64_t>(kernels::kv_type_size(type));
}

int64_t KvCacheShape::bytes_per_block() const { return 2 * num_layers * pool_block_bytes(); }

KvCache::KvCache(const KvCacheShape& shape, int64_t num_blocks)
    : shape_(shape), num_blocks_(num_blocks) {
  VELLUM_CHECK(num_blocks > 0, ErrorCode::kInvalidArgument,
               "a KV cache needs at least one block, got {}", num_blocks);
  const size_t pool_bytes = static_cast<size_t>(num_blocks * shape.pool_block_bytes());
  k_pools_.reserve(shape.num_layers);
  v_pools_.reserve(shape.num_layers);
  for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
    k_pools_.emplace_back(pool_bytes);
    v_pools_.emplace_back(pool_bytes);
  }
}

void KvCache::copy_blocks(const int32_t* src, const int32_t* dst, int64_t num_pairs) {
  if (num_pairs == 0) return;
  const int64_t block_bytes = shape_.pool_block_bytes();
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer) {
    kernels::copy_blocks(k_pools_[layer].data(), block_bytes, src, dst, num_pairs);
    kernels::copy_blocks(v_pools_[layer].data(), block_bytes, src, dst, num_pairs);
  }
}

void KvCache::swap_blocks(KvCache& to, const KvCache& from, const int32_t* src, const int32_t* dst,
                          int64_t num_pairs) {
  if (num_pairs == 0) return;
  const KvCacheShape& a = to.shape_;
  const KvCacheShape& b = from.shape_;
  VELLUM_CHECK(a.num_layers == b.num_layers && a.pool_block_bytes() == b.pool_block_bytes(),
               ErrorCode::kInternal, "swap between KV caches of different shapes");
  const int64_t block_bytes = a.pool_block_bytes();
  for (int64_t layer = 0; layer < a.num_layers; ++layer) {
    kernels::swap_blocks(to.k_pools_[layer].data(), from.k_pools_[layer].data(), block_bytes, src,
                         dst, num_pairs);
    kernels::swap_blocks(to.v_pools_[layer].data(), from.v_pools_[layer].data(), block_bytes, src,
                         dst, num_pairs);
  }
}

}  // namespace vellum::model
