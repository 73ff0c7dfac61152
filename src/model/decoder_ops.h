// Small activation ops the decoder needs beyond kernels/kernels.h: NEOX RoPE, GeGLU, per-head
// RMSNorm, softcap, bias and scale. Plain loops on raw pointers, parallelised over tokens.
//
// TODO(kernels): rope_neox_inplace and gelu_tanh_mul move to kernels/ (ref + AVX-512/AVX2 versions
// are being added there with these exact signatures); the decoder then calls the kernels and
// these two go. The others may follow when a profile says they matter.
#pragma once

#include <cstdint>

namespace vellum::model::ops {

// Rotary embedding in NEOX / HF rotate_half layout: (x[i], x[i + rot_dim/2]) rotate together
// by angle positions[t] * inv_freq[i]. Same arguments as kernels::rope_inplace.
// x: (num_tokens, num_heads, head_dim) with token_stride (elements) between tokens.
void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq);

// out[i] = gelu_tanh(gate[i]) * up[i], GELU's tanh approximation computed in f32;
// out may alias gate or up.
void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n);

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
