// Q8_0 weights with AVX512-VNNI.
//
// The activations are quantized like GGML's Q8_0 (per 32 values: d = amax / 127, q = round(x/d))
// into scratch, so each 64-byte step is one vpdpbusd per (activation row, weight row): it wants
// unsigned × signed bytes, and the packed weights hold w + 128 (unsigned). The +128 bias is
// removed exactly by starting the dot from -128 · Σ(x_q of those 4 bytes), precomputed per row:
//   Σ (w + 128) x = Σ w x + 128 Σ x.
// Each int32 lane then covers 4 bytes of one block; lanes 0-7 / 8-15 are the two blocks of the
// step and are scaled by d_w · d_x per lane before the f32 accumulation.
#include <immintrin.h>

#include <cmath>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/gemm_driver.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

// Scratch per activation row, each part k_pad bytes: xq (k_pad int8), corr (k_pad / 4 int32),
// xd (k_pad / 4 f32: d_x of the block each 4-byte lane belongs to).
struct QuantizedRows {
  int64_t k_pad;
  uint8_t* base;
  int8_t* xq(int64_t r) const { return reinterpret_cast<int8_t*>(base + r * 3 * k_pad); }
  int32_t* corr(int64_t r) const { return reinterpret_cast<int32_t*>(base + (r * 3 + 1) * k_pad); }
  float* xd(int64_t r) const { return reinterpret_cast<float*>(base + (r * 3 + 2) * k_pad); }
};

void quantize_row(const QuantizedRows& q, int64_t r, const float* x, int64_t n_in) {
  int8_t* xq = q.xq(r);
  int32_t* corr = q.corr(r);
  float* xd = q.xd(r);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t b = 0; b < q.k_pad / 32; ++b) {
    const int64_t k = b * 32;
    const __mmask16 m0 = tail_mask(std::max<int64_t>(0, n_in - k));
    const __mmask16 m1 = tail_mask(std::max<int64_t>(0, n_in - k - 16));
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, x + k);
    const __m512 v1 = _mm512_maskz_loadu_ps(m1, x + k + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    const __m256i bytes = _mm256_set_m128i(_mm512_cvtsepi32_epi8(q1), _mm512_cvtsepi32_epi8(q0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + k), bytes);
    // Sums of each 4 bytes, as the 8 int32 lanes of this block.
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones,
                                             _mm512_castsi256_si512(bytes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + b * 8),
                        _mm512_castsi512_si256(_mm512_mullo_epi32(sums, _mm512_set1_epi32(-128))));
    _mm256_storeu_ps(xd + b * 8, _mm256_set1_ps(d));
  }
}

struct VnniKernel {
  float* y;
  QuantizedRows xq;
  const detail::PackedWeights* w;
  int64_t n_out;

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols) const {
    const int64_t k_pad = w->k_pad;
    const uint8_t* wq[kColsPerTile];
    const uint16_t* ws[kColsPerTile];
    #pragma GCC unroll 4
    for (int c = 0; c < kColsPerTile; ++c) {
      const int64_t j = std::min<int64_t>(j0 + c, n_out - 1);
      wq[c] = w->q8_row(j);
      ws[c] = w->q8_scales(j);
    }
    // Lane i takes scale i / 8 of the pair loaded for this step.
    const __m512i pair_index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[R][kColsPerTile];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < k_pad; k += 64) {
      __m512i wv[kColsPerTile];
      __m512 wd[kColsPerTile];
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) {
        wv[c] = _mm512_loadu_si512(wq[c] + k);
        _mm_prefetch(reinterpret_cast<const char*>(wq[c] + k) + kPrefetchBytes, _MM_HINT_T0);
        int32_t two_scales;
        __builtin_memcpy(&two_scales, ws[c] + k / 32, sizeof(two_scales));
        const __m128 d2 = _mm_cvtph_ps(_mm_cvtsi32_si128(two_scales));
        wd[c] = _mm512_permutexvar_ps(pair_index, _mm512_castps128_ps512(d2));
      }
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_loadu_si512(xq.xq(r0 + r) + k);
        const __m512i corr = _mm512_loadu_si512(xq.corr(r0 + r) + k / 4);
        const __m512 xd = _mm512_loadu_ps(xq.xd(r0 + r) + k / 4);
        #pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) {
          const __m512i dot = _mm512_dpbusd_epi32(corr, wv[c], xv);
          acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[c], xd), acc[r][c]);
        }
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int c = 0; c < num_cols; ++c) {
        y[(r0 + r) * n_out + j0 + c] = _mm512_reduce_add_ps(acc[r][c]);
      }
    }
  }
};

}  // namespace

size_t gemm_q8_0_scratch_bytes(int64_t m, int64_t k_pad) {
  return static_cast<size_t>(m * 3 * k_pad) + 64;
}

void gemm_q8_0_vnni(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                    void* scratch) {
  const QuantizedRows xq{w.k_pad, static_cast<uint8_t*>(scratch)};
#pragma omp parallel for schedule(static) if (m >= 16)
  for (int64_t r = 0; r < m; ++r) quantize_row(xq, r, x + r * w.n_in, w.n_in);
  const VnniKernel kernel{y, xq, &w, w.n_out};
  run_gemm(m, w.n_out, kernel);
}

}  // namespace vellum::kernels::avx512
