#include "kernels/kv_quant.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels::ref {

void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType k_type, KvType v_type) {
  const size_t k_row_bytes = kv_row_bytes(k_type, head_dim);
  const size_t v_row_bytes = kv_row_bytes(v_type, head_dim);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding token
    const int64_t block_id = slot / block_size;
    const int64_t offset = slot % block_size;
    for (int64_t h = 0; h < num_kv_heads; ++h) {
      // Row (block_id, h, offset) of the (num_blocks, num_kv_heads, block_size) rows.
      const auto row = static_cast<size_t>((block_id * num_kv_heads + h) * block_size + offset);
      quantize_kv_row(static_cast<uint8_t*>(k_cache) + row * k_row_bytes,
                      k + t * k_stride + h * head_dim, head_dim, k_type);
      quantize_kv_row(static_cast<uint8_t*>(v_cache) + row * v_row_bytes,
                      v + t * v_stride + h * head_dim, head_dim, v_type);
    }
  }
}

}  // namespace vellum::kernels::ref
