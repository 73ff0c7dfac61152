// Front end of the kernels in kernels.h: picks the ISA version (AVX-512, AVX2, or the scalar
// reference) once per call from cpu::selected_isa() (a relaxed atomic load).
#include "kernels/kernels.h"

#include <algorithm>
#include <cstring>

#include "common/half.h"
#include "cpu/isa.h"
#include "kernels/attention_plan.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

// The best compiled level at or below the selected one.
enum class Level { kScalar, kAvx2, kAvx512 };
Level level() {
  const cpu::Isa isa = cpu::selected_isa();
  if (isa >= cpu::Isa::kAvx512) return Level::kAvx512;
  if (isa >= cpu::Isa::kAvx2) return Level::kAvx2;
  return Level::kScalar;
}

// The version of a kernel for the selected level (all three share one signature).
template <class Fn>
Fn* pick(Fn* avx512_fn, Fn* avx2_fn, Fn* ref_fn) {
  switch (level()) {
    case Level::kAvx512: return avx512_fn;
    case Level::kAvx2: return avx2_fn;
    case Level::kScalar: break;
  }
  return ref_fn;
}

}  // namespace

size_t kv_type_size(KvType type) { return type == KvType::kF32 ? 4 : 2; }

size_t weight_row_bytes(WeightType type, int64_t n) {
  const WeightTypeInfo& info = weight_type_info(type);
  return static_cast<size_t>(n / info.block_elems) * info.block_bytes;
}

int64_t weight_block_elems(WeightType type) { return weight_type_info(type).block_elems; }

void rms_norm(float* out, const float* x, const float* weight, int64_t n_rows, int64_t dim,
              float eps) {
  pick(avx512::rms_norm, avx2::rms_norm, ref::rms_norm)(out, x, weight, n_rows, dim, eps);
}

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  pick(avx512::silu_mul, avx2::silu_mul, ref::silu_mul)(out, gate, up, n);
}

void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
  pick(avx512::gelu_tanh_mul, avx2::gelu_tanh_mul, ref::gelu_tanh_mul)(out, gate, up, n);
}

void add_inplace(float* x, const float* y, int64_t n) {
  pick(avx512::add_inplace, avx2::add_inplace, ref::add_inplace)(x, y, n);
}

void rope_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                  int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                  const float* inv_freq) {
  auto* fn = pick(avx512::rope_inplace, avx2::rope_inplace, ref::rope_inplace);
  fn(x, token_stride, num_tokens, num_heads, head_dim, rot_dim, positions, inv_freq);
}

void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq) {
  auto* fn = pick(avx512::rope_neox_inplace, avx2::rope_neox_inplace, ref::rope_neox_inplace);
  fn(x, token_stride, num_tokens, num_heads, head_dim, rot_dim, positions, inv_freq);
}

void get_rows(float* out, const void* table, WeightType type, int64_t dim, const int32_t* ids,
              int64_t num_ids) {
  pick(avx512::get_rows, avx2::get_rows, ref::get_rows)(out, table, type, dim, ids, num_ids);
}

void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType type) {
  auto* fn = pick(avx512::reshape_and_cache, avx2::reshape_and_cache, ref::reshape_and_cache);
  fn(k, k_stride, v, v_stride, k_cache, v_cache, slot_mapping, num_tokens, num_kv_heads, head_dim,
     block_size, type);
}

void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& params,
                     void* workspace) {
  if (params.num_seqs <= 0) return;
  const Level lv = level();
  if (lv == Level::kAvx512 && params.head_dim <= avx512::kMaxAttentionHeadDim) {
    return avx512::paged_attention(out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
                                   query_start_loc, params, workspace);
  }
  if (lv == Level::kAvx2 && params.head_dim <= avx2::kMaxAttentionHeadDim) {
    return avx2::paged_attention(out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
                                 query_start_loc, params, workspace);
  }
  ref::paged_attention(out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
                       query_start_loc, params, workspace);
}

size_t paged_attention_workspace_bytes(const PagedAttentionParams& params, int64_t max_seq_len,
                                       int num_threads) {
  // Only the vector kernels use workspace (their per-thread tiles live on the stack); the AVX-512
  // and AVX2 versions share one layout (attention_plan.h).
  return attention::workspace_bytes(params, max_seq_len, num_threads) + 64;
}

void copy_blocks(void* pool, int64_t block_bytes, const int32_t* src, const int32_t* dst,
                 int64_t num_pairs) {
  auto* base = static_cast<uint8_t*>(pool);
  const auto bytes = static_cast<size_t>(block_bytes);
  // Parallel only when there is enough to copy to pay for waking the team.
#pragma omp parallel for schedule(static) if (num_pairs * block_bytes >= (int64_t{1} << 20))
  for (int64_t i = 0; i < num_pairs; ++i) {
    std::memcpy(base + static_cast<size_t>(dst[i]) * bytes,
                base + static_cast<size_t>(src[i]) * bytes, bytes);
  }
}

void swap_blocks(void* dst_pool, const void* src_pool, int64_t block_bytes, const int32_t* src,
                 const int32_t* dst, int64_t num_pairs) {
  auto* dst_base = static_cast<uint8_t*>(dst_pool);
  const auto* src_base = static_cast<const uint8_t*>(src_pool);
  const auto bytes = static_cast<size_t>(block_bytes);
#pragma omp parallel for schedule(static) if (num_pairs * block_bytes >= (int64_t{1} << 20))
  for (int64_t i = 0; i < num_pairs; ++i) {
    std::memcpy(dst_base + static_cast<size_t>(dst[i]) * bytes,
                src_base + static_cast<size_t>(src[i]) * bytes, bytes);
  }
}

}  // namespace vellum::kernels
