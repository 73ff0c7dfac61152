#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels::ref {

void rms_norm(float* out, const float* x, const float* weight, int64_t n_rows, int64_t dim,
              float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;  // (dim)
    float* outr = out + r * dim;    // (dim), may be xr
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += double{xr[i]} * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / dim) + eps);
    for (int64_t i = 0; i < dim; ++i) outr[i] = xr[i] * inv * weight[i];
  }
}

void add_rms_norm(float* x, const float* delta, float* out, const float* weight, int64_t n_rows,
                  int64_t dim, float eps) {
  add_inplace(x, delta, n_rows * dim);
  rms_norm(out, x, weight, n_rows, dim, eps);
}

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    out[i] = gelu * up[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void rope_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                  int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                  const float* inv_freq) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* xt = x + t * token_stride;  // (num_heads, head_dim)
    for (int64_t i = 0; i < rot_dim / 2; ++i) {
      // The angle is shared by every head of the token: compute cos/sin once.
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (int64_t h = 0; h < num_heads; ++h) {
        float* pair = xt + h * head_dim + 2 * i;
        const float x0 = pair[0];
        const float x1 = pair[1];
        pair[0] = x0 * c - x1 * s;
        pair[1] = x0 * s + x1 * c;
      }
    }
  }
}

void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq) {
  const int64_t half = rot_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* xt = x + t * token_stride;  // (num_heads, head_dim)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (int64_t h = 0; h < num_heads; ++h) {
        float* xh = xt + h * head_dim;
        const float x0 = xh[i];
        const float x1 = xh[i + half];
        xh[i] = x0 * c - x1 * s;
        xh[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

void get_rows(float* out, const void* table, WeightType type, int64_t dim, const int32_t* ids,
              int64_t num_ids) {
  const size_t row_bytes = weight_row_bytes(type, dim);
  for (int64_t t = 0; t < num_ids; ++t) {
    const auto* row = static_cast<const uint8_t*>(table) + static_cast<size_t>(ids[t]) * row_bytes;
    dequantize_row(out + t * dim, row, type, dim);
  }
}

}  // namespace vellum::kernels::ref
