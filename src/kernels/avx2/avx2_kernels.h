// AVX2 + FMA + F16C versions of the kernels (the level of most laptops, desktops and AMD Zen 2/3
// servers). Each .cc in this directory is compiled with -mavx2 -mfma -mf16c (../CMakeLists.txt);
// call these only when cpu::selected_isa() >= Isa::kAvx2.
// Semantics are those of the same-named functions in kernels.h / ref/ref_kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/packed_weights.h"

namespace vellum::kernels::avx2 {

// Streaming read of a 64-byte aligned buffer (the read-bandwidth probe, bandwidth.h); returns a
// value that depends on every byte so the loads cannot be dropped.
uint64_t read_stream(const uint8_t* data, size_t bytes);

void rms_norm(float* out, const float* x, const float* weight, int64_t n_rows, int64_t dim,
              float eps);
void add_rms_norm(float* x, const float* delta, float* out, const float* weight, int64_t n_rows,
                  int64_t dim, float eps);
void silu_mul(float* out, const float* gate, const float* up, int64_t n);
void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n);
void add_inplace(float* x, const float* y, int64_t n);
void rope_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                  int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                  const float* inv_freq);
void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq);
void get_rows(float* out, const void* table, WeightType type, int64_t dim, const int32_t* ids,
              int64_t num_ids);
void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType k_type, KvType v_type);

// Head dims above this go to the reference (per-thread tiles are sized for it).
inline constexpr int64_t kMaxAttentionHeadDim = 256;
void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& params,
                     void* workspace);

// y (m, n_out) = x (m, n_in) · Wᵀ on detail::PackedWeights of type kF32, kF16 or kBF16
// (weights widened to f32, FMA, f32 accumulation). f32 and f16 need no scratch; bf16 takes
// gemm_bf16_scratch_bytes (its activations rearranged to match the weights' pairs).
void gemm_f32(float* y, const float* x, int64_t m, const detail::PackedWeights& w);
void gemm_f16(float* y, const float* x, int64_t m, const detail::PackedWeights& w);
size_t gemm_bf16_scratch_bytes(int64_t m, int64_t n_in);
void gemm_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
               void* scratch);

}  // namespace vellum::kernels::avx2
