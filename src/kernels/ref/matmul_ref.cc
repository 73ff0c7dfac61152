#include <vector>

#include "kernels/ref/ref_kernels.h"
#include "kernels/threads.h"

namespace vellum::kernels::ref {

void matmul(float* y, const float* x, int64_t m, const void* w, WeightType type, int64_t n_out,
            int64_t n_in) {
  const size_t row_bytes = weight_row_bytes(type, n_in);
  threads::parallel([&](int thread, int num_threads) {
    std::vector<float> w_row(static_cast<size_t>(n_in));  // (n_in) one dequantized weight row
    const auto [begin, end] = threads::static_range(n_out, thread, num_threads);
    for (int64_t j = begin; j < end; ++j) {
      dequantize_row(w_row.data(), static_cast<const uint8_t*>(w) + j * row_bytes, type, n_in);
      for (int64_t r = 0; r < m; ++r) {
        const float* xr = x + r * n_in;
        double acc = 0.0;
        for (int64_t i = 0; i < n_in; ++i) acc += double{xr[i]} * w_row[i];
        y[r * n_out + j] = static_cast<float>(acc);
      }
    }
  });
}

}  // namespace vellum::kernels::ref
