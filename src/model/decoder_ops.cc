#include "model/decoder_ops.h"

#include <cmath>

namespace vellum::model::ops {
namespace {

// Below this many elements a parallel region costs more than the loop (waking the team).
constexpr int64_t kParallelMinElems = int64_t{1} << 16;

}  // namespace

void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq) {
  const int64_t half = rot_dim / 2;
  const bool parallel = num_tokens * num_heads * rot_dim > kParallelMinElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* xt = x + t * token_stride;  // (num_heads, head_dim)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      const float c = std::cos(angle);
      const float s = std::sin(angle);
      for (int64_t h = 0; h < num_heads; ++h) {
        float* head = xt + h * head_dim;
        const float x0 = head[i];
        const float x1 = head[i + half];
        head[i] = x0 * c - x1 * s;
        head[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoefA * g * g)));
    out[i] = gelu * up[i];
  }
}

void rms_norm_heads(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                    int64_t head_dim, const float* weight, float eps) {
  const bool parallel = num_tokens * num_heads * head_dim > kParallelMinElems;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + t * token_stride + h * head_dim;  // (head_dim)
      float sum = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) sum += v[d] * v[d];
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(head_dim) + eps);
      for (int64_t d = 0; d < head_dim; ++d) v[d] = v[d] * inv * weight[d];
    }
  }
}

void softcap_inplace(float* x, int64_t n, float cap) {
  const float inv_cap = 1.0f / cap;
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv_cap);
}

void add_bias(float* x, int64_t num_rows, int64_t row_len, int64_t row_stride, const float* bias) {
#pragma omp parallel for schedule(static) if (num_rows * row_len > kParallelMinElems)
  for (int64_t r = 0; r < num_rows; ++r) {
    float* row = x + r * row_stride;
    for (int64_t i = 0; i < row_len; ++i) row[i] += bias[i];
  }
}

void scale_inplace(float* x, int64_t n, float scale) {
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace vellum::model::ops
