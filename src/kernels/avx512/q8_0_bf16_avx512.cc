// Q8_0 prefill: slabs of packed Q8_0 weight rows are dequantized to bf16 into scratch and
// multiplied by oneDNN (bf16_slabs.h). Dequantizing costs ~1 op per weight per call, far below the
// m × 2 flops per weight of a prefill product, and keeps only one Q8_0 copy of the weights in
// memory (a resident bf16 copy would triple it).
#include <immintrin.h>

#include <algorithm>

#include "common/half.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/bf16_slabs.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

// Dequantizes packed rows [j0, j0 + num_rows) to bf16 rows of n_in elements. A row's 32 codes of
// a block are 8 dwords 64 bytes apart in its panel (packed_weights.h): one gather each.
void dequantize_slab(uint16_t* out, const detail::PackedWeights& w, int64_t j0, int64_t num_rows) {
  const int64_t n_in = w.n_in;
  const __m256i quad_offsets = _mm256_setr_epi32(0, 64, 128, 192, 256, 320, 384, 448);
  const __m512i bias = _mm512_set1_epi32(128);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < num_rows; ++r) {
    const int64_t j = j0 + r;
    const uint8_t* lane = w.q8_panel(j / detail::kQ8Panel) + (j % detail::kQ8Panel) * 4;
    uint16_t* dst = out + r * n_in;
    for (int64_t b = 0; b < n_in / 32; ++b) {
      const __m512 d = _mm512_set1_ps(fp16_to_float(w.q8_scale(j, b)));
      const __m256i codes = _mm256_i32gather_epi32(
          reinterpret_cast<const int*>(lane + b * 8 * 64), quad_offsets, 1);
      for (int half = 0; half < 2; ++half) {
        const __m128i bytes = half == 0 ? _mm256_castsi256_si128(codes)
                                        : _mm256_extracti128_si256(codes, 1);
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
  return bf16_slabs_scratch_bytes(m, n_in, n_out);
}

void gemm_q8_0_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                    const detail::OnednnPlainBf16Matmul& onednn, void* scratch) {
  gemm_bf16_slabs(y, x, m, w.n_out, w.n_in, onednn, scratch,
                  [&](uint16_t* slab, int64_t j0, int64_t num_rows) {
                    dequantize_slab(slab, w, j0, num_rows);
                  });
}

}  // namespace vellum::kernels::avx512
