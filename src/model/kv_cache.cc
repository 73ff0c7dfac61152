#include "model/kv_cache.h"

#include <algorithm>

#include "common/check.h"

namespace vellum::model {

int64_t KvCacheShape::k_pool_block_bytes() const {
  return num_kv_heads * block_size * static_cast<int64_t>(kernels::kv_row_bytes(dtype.k, head_dim));
}

int64_t KvCacheShape::v_pool_block_bytes() const {
  return num_kv_heads * block_size * static_cast<int64_t>(kernels::kv_row_bytes(dtype.v, head_dim));
}

void KvCacheShape::check_dtype() const {
  for (const kernels::KvType type : {dtype.k, dtype.v}) {
    VELLUM_CHECK(head_dim % kernels::kv_block_elems(type) == 0, ErrorCode::kInvalidArgument,
                 "a quantized KV cache type stores blocks of {} values, but this model's head "
                 "dim is {}; use --kv-cache-dtype bf16 (or f16, or fp8) for it",
                 kernels::kv_block_elems(type), head_dim);
  }
  VELLUM_CHECK(!dtype.rotate_k || (head_dim > 0 && (head_dim & (head_dim - 1)) == 0),
               ErrorCode::kInvalidArgument,
               "rotating K by a Hadamard matrix needs a power-of-two head dim, this model's is {}; "
               "use --kv-cache-rotate-k off",
               head_dim);
}

int64_t KvCacheShape::bytes_per_block() const {
  return num_slots() * (k_pool_block_bytes() + v_pool_block_bytes());
}

KvCacheLayout KvCacheLayout::single_group(const std::vector<bool>& layer_is_sliding,
                                          int64_t sliding_window) {
  KvCacheLayout out;
  const auto num_layers = static_cast<int64_t>(layer_is_sliding.size());
  const bool all_sliding =
      sliding_window > 0 && num_layers > 0 &&
      std::all_of(layer_is_sliding.begin(), layer_is_sliding.end(), [](bool b) { return b; });
  out.group_windows = {all_sliding ? sliding_window : 0};
  out.layer_group.assign(static_cast<size_t>(num_layers), 0);
  for (int64_t l = 0; l < num_layers; ++l) out.layer_slot.push_back(static_cast<int>(l));
  out.num_slots = num_layers;
  return out;
}

KvCacheLayout KvCacheLayout::hybrid(const std::vector<bool>& layer_is_sliding,
                                    int64_t sliding_window) {
  std::vector<int> full, sliding;
  for (size_t l = 0; l < layer_is_sliding.size(); ++l) {
    (layer_is_sliding[l] && sliding_window > 0 ? sliding : full).push_back(static_cast<int>(l));
  }
  if (full.empty() || sliding.empty()) return single_group(layer_is_sliding, sliding_window);
  const size_t min_layers = std::min(full.size(), sliding.size());
  const size_t max_layers = std::max(full.size(), sliding.size());
  // vLLM (_get_kv_cache_groups_uniform_page_size): few padding layers beat many groups.
  const size_t group_size =
      static_cast<double>(max_layers) < 1.25 * static_cast<double>(min_layers) ? max_layers
                                                                              : min_layers;
  KvCacheLayout out;
  out.layer_group.assign(layer_is_sliding.size(), 0);
  out.layer_slot.assign(layer_is_sliding.size(), 0);
  out.num_slots = static_cast<int64_t>(group_size);
  // Full-attention groups first (vLLM orders types by first appearance; the order does not
  // change any result, and group 0 is then the full-attention table).
  for (const auto* layers : {&full, &sliding}) {
    for (size_t i = 0; i < layers->size(); i += group_size) {
      const int group = static_cast<int>(out.group_windows.size());
      out.group_windows.push_back(layers == &full ? 0 : sliding_window);
      for (size_t j = i; j < std::min(i + group_size, layers->size()); ++j) {
        out.layer_group[static_cast<size_t>((*layers)[j])] = group;
        out.layer_slot[static_cast<size_t>((*layers)[j])] = static_cast<int>(j - i);
      }
    }
  }
  return out;
}

KvCache::KvCache(const KvCacheShape& shape, int64_t num_blocks)
    : shape_(shape), num_blocks_(num_blocks) {
  VELLUM_CHECK(num_blocks > 0, ErrorCode::kInvalidArgument,
               "a KV cache needs at least one block, got {}", num_blocks);
  VELLUM_CHECK(shape.num_slots() > 0 &&
                   static_cast<int64_t>(shape.layout.layer_slot.size()) == shape.layout.num_layers(),
               ErrorCode::kInternal, "KV cache layout without slots");
  shape.check_dtype();
  const auto k_pool_bytes = static_cast<size_t>(num_blocks * shape.k_pool_block_bytes());
  const auto v_pool_bytes = static_cast<size_t>(num_blocks * shape.v_pool_block_bytes());
  k_pools_.reserve(static_cast<size_t>(shape.num_slots()));
  v_pools_.reserve(static_cast<size_t>(shape.num_slots()));
  for (int64_t s = 0; s < shape.num_slots(); ++s) {
    k_pools_.emplace_back(k_pool_bytes);
    v_pools_.emplace_back(v_pool_bytes);
  }
}

void KvCache::copy_blocks(const int32_t* src, const int32_t* dst, int64_t num_pairs) {
  if (num_pairs == 0) return;
  const int64_t k_block_bytes = shape_.k_pool_block_bytes();
  const int64_t v_block_bytes = shape_.v_pool_block_bytes();
  for (size_t s = 0; s < k_pools_.size(); ++s) {
    kernels::copy_blocks(k_pools_[s].data(), k_block_bytes, src, dst, num_pairs);
    kernels::copy_blocks(v_pools_[s].data(), v_block_bytes, src, dst, num_pairs);
  }
}

void KvCache::swap_blocks(KvCache& to, const KvCache& from, const int32_t* src, const int32_t* dst,
                          int64_t num_pairs) {
  if (num_pairs == 0) return;
  const KvCacheShape& a = to.shape_;
  const KvCacheShape& b = from.shape_;
  // The host pool holds the same (quantized) bytes: a swapped block comes back unchanged.
  VELLUM_CHECK(a.num_slots() == b.num_slots() && a.dtype == b.dtype &&
                   a.k_pool_block_bytes() == b.k_pool_block_bytes() &&
                   a.v_pool_block_bytes() == b.v_pool_block_bytes(),
               ErrorCode::kInternal, "swap between KV caches of different shapes");
  const int64_t k_block_bytes = a.k_pool_block_bytes();
  const int64_t v_block_bytes = a.v_pool_block_bytes();
  for (size_t s = 0; s < to.k_pools_.size(); ++s) {
    kernels::swap_blocks(to.k_pools_[s].data(), from.k_pools_[s].data(), k_block_bytes, src, dst,
                         num_pairs);
    kernels::swap_blocks(to.v_pools_[s].data(), from.v_pools_[s].data(), v_block_bytes, src, dst,
                         num_pairs);
  }
}

}  // namespace vellum::model
