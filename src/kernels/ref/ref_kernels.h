// Scalar reference kernels: the semantics of every function in kernels.h, written to be read.
// They are the fallback for Isa::kScalar, and the oracle in tests/kernels/.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace vellum::kernels::ref {

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

// Dequantizes one row of n elements stored as `type` into out (n floats).
void dequantize_row(float* out, const void* row, WeightType type, int64_t n);

void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType k_type, KvType v_type);

// Needs no workspace (may be null).
void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& params,
                     void* workspace);

// y (m, n_out) = x (m, n_in) · Wᵀ with W in GGML row layout (n_out rows of n_in elements).
// Accumulates in double: this is the oracle, not a fast path.
void matmul(float* y, const float* x, int64_t m, const void* w, WeightType type, int64_t n_out,
            int64_t n_in);

}  // namespace vellum::kernels::ref
