// Small activation ops the decoder needs beyond kernels/kernels.h (which has NEOX RoPE and GeGLU):
// per-head RMSNorm, softcap, bias and scale. Plain loops on raw pointers, parallelised over
// tokens; they move to kernels/ when a profile says they matter.
#pragma once

#include <cstdint>

namespace vellum::model::ops {

// RMSNorm over each head of each token, in place: x[t, h, :] = rms_norm(x[t, h, :]) * weight.
// x: (num_tokens, num_heads, head_dim) with token_stride; weight: (head_dim), shared by heads.
void rms_norm_heads(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                    int64_t head_dim, const float* weight, float eps);

// x[i] = cap * tanh(x[i] / cap)
void softcap_inplace(float* x, int64_t n, float cap);

// x[r, :row_len] += bias for each of num_rows rows, row_stride elements apart.
void add_bias(float* x, int64_t num_rows, int64_t row_len, int64_t row_stride, const float* bias);

// x[i] *= scale
void scale_inplace(float* x, int64_t n, float scale);

}  // namespace vellum::model::ops
