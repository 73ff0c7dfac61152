// Large-m products with quantized weights through bf16 slabs (header-only, AVX-512 translation
// units): slabs of weight rows are dequantized to bf16 into scratch just before oneDNN multiplies
// them (AMX where present), so only the quantized copy of the weights stays in memory. Used by
// Q8_0's large-m path on AMX (q8_0_bf16_avx512.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/onednn_matmul.h"

namespace vellum::kernels::avx512 {

inline int64_t slab_round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Weight rows per slab: about 4 Mi bf16 elements (8 MiB, well inside the L3), at least 256 rows.
// Few slabs matter: each slab is two OpenMP fork/joins (dequantize, oneDNN), and on a loaded
// machine every join can wait a scheduler tick for a descheduled worker (32 slabs of 256 rows
// took 0.2-1.2 s instead of 7 ms per call under load here).
inline int64_t slab_rows(int64_t n_out, int64_t n_in) {
  constexpr int64_t kSlabElements = int64_t{4} << 20;
  return std::min(n_out, slab_round_up(std::max<int64_t>(256, kSlabElements / n_in), 64));
}

// Scratch: the activations as bf16, padded with zero rows to oneDNN's bucket (onednn_rows), one
// slab, and oneDNN's padded output.
inline size_t bf16_slabs_scratch_bytes(int64_t m, int64_t n_in, int64_t n_out) {
  const int64_t rows = detail::onednn_rows(m);
  return static_cast<size_t>(slab_round_up(rows * n_in, 32) + slab_rows(n_out, n_in) * n_in) *
             sizeof(uint16_t) +
         detail::OnednnPlainBf16Matmul::scratch_bytes(m, slab_rows(n_out, n_in)) + 64;
}

// y (m, n_out) = x (m, n_in) · Wᵀ; fill(slab, j0, num_rows) writes weight rows [j0, j0 + num_rows)
// as bf16 rows of n_in elements. scratch: bf16_slabs_scratch_bytes(m, n_in, n_out) bytes.
template <class Fill>
void gemm_bf16_slabs(float* y, const float* x, int64_t m, int64_t n_out, int64_t n_in,
                     const detail::OnednnPlainBf16Matmul& onednn, void* scratch, Fill&& fill) {
  const int64_t padded_m = detail::onednn_rows(m);
  const int64_t rows_per_slab = slab_rows(n_out, n_in);
  auto* x_bf16 = static_cast<uint16_t*>(scratch);               // (padded_m, n_in)
  uint16_t* slab = x_bf16 + slab_round_up(padded_m * n_in, 32);  // (rows_per_slab, n_in)
  void* product_scratch = slab + rows_per_slab * n_in;           // oneDNN's padded output
  convert_f32_to_bf16(x_bf16, x, m * n_in);
  std::fill(x_bf16 + m * n_in, x_bf16 + padded_m * n_in, uint16_t{0});
  for (int64_t j0 = 0; j0 < n_out; j0 += rows_per_slab) {
    const int64_t num_rows = std::min(rows_per_slab, n_out - j0);
    fill(slab, j0, num_rows);
    onednn.run(y + j0, n_out, x_bf16, slab, m, num_rows, n_in, product_scratch);
  }
}

}  // namespace vellum::kernels::avx512
