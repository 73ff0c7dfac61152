// Q8_0 prefill: slabs of packed Q8_0 weight rows are dequantized to bf16 into scratch and
// multiplied by oneDNN (AMX where present). Dequantizing costs ~1 op per weight per call, far
// below the m × 2 flops per weight of a prefill product, and keeps only one Q8_0 copy of the
// weights in memory (a resident bf16 copy would triple it).
#include <immintrin.h>

#include <algorithm>

#include "common/half.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Weight rows per slab: about 4 Mi bf16 elements (8 MiB, well inside the L3), at least 256 rows.
// Few slabs matter: each slab is two OpenMP fork/joins (dequantize, oneDNN), and on a loaded
// machine every join can wait a scheduler tick for a descheduled worker (32 slabs of 256 rows
// took 0.2-1.2 s instead of 7 ms per call under load here).
int64_t slab_rows(int64_t n_out, int64_t n_in) {
  constexpr int64_t kSlabElements = int64_t{4} << 20;
  return std::min(n_out, round_up(std::max<int64_t>(256, kSlabElements / n_in), 64));
}

// Dequantizes packed rows [j0, j0 + num_rows) to bf16 rows of n_in elements.
void dequantize_slab(uint16_t* out, const detail::PackedWeights& w, int64_t j0, int64_t num_rows) {
  const int64_t n_in = w.n_in;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < num_rows; ++r) {
    const uint8_t* qs = w.q8_row(j0 + r);
    const uint16_t* scales = w.q8_scales(j0 + r);
    uint16_t* dst = out + r * n_in;
    for (int64_t b = 0; b < n_in / 32; ++b) {
      const __m512 d = _mm512_set1_ps(fp16_to_float(scales[b]));
      const __m512i bias = _mm512_set1_epi32(128);
      for (int half = 0; half < 2; ++half) {
        const __m128i bytes =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + b * 32 + half * 16));
        const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), bias);
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32 + half * 16),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
      }
    }
  }
}

}  // namespace

size_t gemm_q8_0_bf16_scratch_bytes(int64_t m, int64_t n_in, int64_t n_out) {
  return static_cast<size_t>(round_up(m * n_in, 32) + slab_rows(n_out, n_in) * n_in) *
             sizeof(uint16_t) + 64;
}

void gemm_q8_0_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                    const detail::OnednnPlainBf16Matmul& onednn, void* scratch) {
  auto* x_bf16 = static_cast<uint16_t*>(scratch);          // (m, n_in)
  uint16_t* slab = x_bf16 + round_up(m * w.n_in, 32);      // (rows_per_slab, n_in), aligned
  convert_f32_to_bf16(x_bf16, x, m * w.n_in);
  const int64_t rows_per_slab = slab_rows(w.n_out, w.n_in);
  for (int64_t j0 = 0; j0 < w.n_out; j0 += rows_per_slab) {
    const int64_t num_rows = std::min(rows_per_slab, w.n_out - j0);
    dequantize_slab(slab, w, j0, num_rows);
    onednn.run(y + j0, w.n_out, x_bf16, slab, m, num_rows, w.n_in);
  }
}

}  // namespace vellum::kernels::avx512
