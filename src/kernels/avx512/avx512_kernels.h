// AVX-512 versions of the kernels. Each .cc in this directory is compiled with its own
// -mavx512* flags (see ../CMakeLists.txt); call these only when cpu::selected_isa() allows:
//   >= Isa::kAvx512     everything here except the *_bf16 dot and VNNI kernels
//   >= Isa::kAvx512Bf16 gemm_bf16_dot, gemm_q8_0_vnni, gemm_q8_0_bf16
//   (convert_f32_to_bf16 and convert_rows_to_bf16 need only AVX-512F)
// Semantics are those of the same-named functions in kernels.h / ref/ref_kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/input_rows.h"
#include "kernels/kernels.h"
#include "kernels/onednn_matmul.h"
#include "kernels/packed_weights.h"

namespace vellum::kernels::avx512 {

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
// Round-to-nearest-even f32 -> bf16 bits, NaN kept quiet (matches float_to_bf16).
void convert_f32_to_bf16(uint16_t* out, const float* x, int64_t n);
// The m rows of x rounded as convert_f32_to_bf16 into out (m, n_in); produced rows one at a time.
void convert_rows_to_bf16(uint16_t* out, const InputRows& x, int64_t m);

// Head dims above this go to the reference (per-thread tiles are sized for it).
inline constexpr int64_t kMaxAttentionHeadDim = 256;
void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& params,
                     void* workspace);

// y (m, n_out) = x (m, n_in) · Wᵀ on detail::PackedWeights.
void gemm_f32(float* y, const float* x, int64_t m, const detail::PackedWeights& w);
void gemm_f16(float* y, const float* x, int64_t m, const detail::PackedWeights& w);
// bf16 weights widened to f32 and FMA (for AVX-512 without AVX512-BF16).
void gemm_bf16_fma(float* y, const float* x, int64_t m, const detail::PackedWeights& w);
// bf16 weights with _mm512_dpbf16_ps; x is rounded to bf16 into scratch (row by row).
void gemm_bf16_dot(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                   void* scratch);
size_t gemm_bf16_scratch_bytes(int64_t m, int64_t n_in);
// Q8_0 with VNNI on the panel layout, any m: x is quantized per 32-block to int8 in scratch.
void gemm_q8_0_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                    void* scratch);
size_t gemm_q8_0_scratch_bytes(int64_t m, int64_t n_in);
// The other quantized types with VNNI on their panel layouts, any m; scratch:
// gemm_q8_0_scratch_bytes. Q4_K, Q5_K and IQ4_XS (32-input sub-blocks):
void gemm_q45_k_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                     void* scratch);
// Q6_K, Q3_K and Q2_K (16-input sub-blocks):
void gemm_k16_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                   void* scratch);
// Q4_0, Q4_1, IQ4_NL, Q5_0 and Q5_1 (one scale per 32):
void gemm_q4_legacy_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                         void* scratch);
// Q8_0 for large m (needs AVX512-BF16): weight slabs dequantized to bf16, oneDNN product.
void gemm_q8_0_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                    const detail::OnednnPlainBf16Matmul& onednn, void* scratch);
size_t gemm_q8_0_bf16_scratch_bytes(int64_t m, int64_t n_in, int64_t n_out);

}  // namespace vellum::kernels::avx512
