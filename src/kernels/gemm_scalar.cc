#include "common/half.h"
#include "kernels/packed_weights.h"

namespace vellum::kernels::detail {
namespace {

float weight_at(const PackedWeights& w, int64_t j, int64_t i) {
  switch (w.type) {
    case WeightType::kF32: return w.data.as<float>()[j * w.n_in + i];
    case WeightType::kF16: return fp16_to_float(w.data.as<uint16_t>()[j * w.n_in + i]);
    case WeightType::kBF16: return bf16_to_float(w.data.as<uint16_t>()[j * w.n_in + i]);
    case WeightType::kQ8_0:
      return fp16_to_float(w.q8_scales(j)[i / 32]) *
             static_cast<float>(static_cast<int>(w.q8_row(j)[i]) - 128);
  }
  return 0.0f;
}

}  // namespace

void gemm_scalar(float* y, const float* x, int64_t m, const PackedWeights& w) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < w.n_out; ++j) {
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * w.n_in;  // (n_in)
      float acc = 0.0f;
      for (int64_t i = 0; i < w.n_in; ++i) acc += xr[i] * weight_at(w, j, i);
      y[r * w.n_out + j] = acc;
    }
  }
}

}  // namespace vellum::kernels::detail
