#include "model/decoder_ops.h"

#include <cmath>

#include "kernels/threads.h"

namespace vellum::model::ops {
namespace {

// Below this many elements a parallel region costs more than the loop (waking the team).
constexpr int64_t kParallelMinElems = int64_t{1} << 16;

}  // namespace

void rms_norm_heads(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                    int64_t head_dim, const float* weight, float eps) {
  const bool parallel = num_tokens * num_heads * head_dim > kParallelMinElems;
  kernels::threads::parallel_for(num_tokens, parallel, [&](int64_t t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + t * token_stride + h * head_dim;  // (head_dim)
      float sum = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) sum += v[d] * v[d];
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(head_dim) + eps);
      for (int64_t d = 0; d < head_dim; ++d) v[d] = v[d] * inv * weight[d];
    }
  });
}

void softcap_inplace(float* x, int64_t n, float cap) {
  const float inv_cap = 1.0f / cap;
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv_cap);
}

void add_bias(float* x, int64_t num_rows, int64_t row_len, int64_t row_stride, const float* bias) {
  kernels::threads::parallel_for(num_rows, num_rows * row_len > kParallelMinElems, [&](int64_t r) {
    float* row = x + r * row_stride;
    for (int64_t i = 0; i < row_len; ++i) row[i] += bias[i];
  });
}

void scale_inplace(float* x, int64_t n, float scale) {
#pragma omp parallel for schedule(static) if (n > kParallelMinElems)
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace vellum::model::ops
