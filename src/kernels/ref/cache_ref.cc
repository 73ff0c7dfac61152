#include <cstring>

#include "common/half.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels::ref {
namespace {

void store_row(void* dst, const float* src, int64_t n, KvType type) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = float_to_fp16(src[i]);
      return;
    }
    case KvType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = float_to_bf16(src[i]);
      return;
    }
  }
}

}  // namespace

void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType type) {
  const size_t elem = kv_type_size(type);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding token
    const int64_t block_id = slot / block_size;
    const int64_t offset = slot % block_size;
    for (int64_t h = 0; h < num_kv_heads; ++h) {
      // Element index of (block_id, h, offset, 0) in (num_blocks, num_kv_heads, block_size, head_dim).
      const int64_t dst = ((block_id * num_kv_heads + h) * block_size + offset) * head_dim;
      store_row(static_cast<uint8_t*>(k_cache) + dst * elem, k + t * k_stride + h * head_dim,
                head_dim, type);
      store_row(static_cast<uint8_t*>(v_cache) + dst * elem, v + t * v_stride + h * head_dim,
                head_dim, type);
    }
  }
}

}  // namespace vellum::kernels::ref
