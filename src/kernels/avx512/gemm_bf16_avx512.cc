// bf16 weights with AVX512-BF16: activations rounded to bf16 once (into scratch), then
// _mm512_dpbf16_ps multiplies 32 pairs per instruction with f32 accumulation.
#include <immintrin.h>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/gemm_driver.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

inline __mmask32 tail_mask32(int64_t n) {
  return n >= 32 ? __mmask32(0xffffffffu) : static_cast<__mmask32>((1u << n) - 1u);
}

inline __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

struct DotKernel {
  float* y;
  const uint16_t* x;  // (m, n_in) bf16
  const uint16_t* w;  // (n_out, n_in) bf16
  int64_t n_in;
  int64_t n_out;

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    const uint16_t* wc[kColsPerTile];
    #pragma GCC unroll 4
    for (int c = 0; c < kColsPerTile; ++c) {
      wc[c] = w + std::min<int64_t>(j0 + c * step, n_out - 1) * n_in;
    }
    const uint16_t* xr[R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xr[r] = x + (r0 + r) * n_in;
    __m512 acc[R][kColsPerTile];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    // Prefetch distance (elements). Adjacent tiles: the same offset in the next tile's rows (4
    // rows on), so its short streams start warm instead of each ramping up the hardware
    // prefetcher again (decode shares +2-3 points of the read bandwidth, 2 threads). Spread
    // tiles (run_gemv_spread): each stream's next row is the next tile's, so 1 KB ahead in the
    // stream, which measured best for a compute-heavy read loop (2026-11-28, Zen 4, high
    // bandwidth state: 1 KB ahead 60 GB/s, 4 KB (one bf16 row) 48).
    const int64_t ahead = step == 1 ? kColsPerTile * n_in : kPrefetchBytes / 2;
    int64_t k = 0;
    for (; k + 32 <= n_in; k += 32) {
      __m512i wv[kColsPerTile];
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) {
        wv[c] = _mm512_loadu_si512(wc[c] + k);
        prefetch_l2(reinterpret_cast<const char*>(wc[c] + ahead + k));
      }
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_loadu_si512(xr[r] + k);
        #pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = dot(acc[r][c], xv, wv[c]);
      }
    }
    if (k < n_in) {
      const __mmask32 m = tail_mask32(n_in - k);
      __m512i wv[kColsPerTile];
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) wv[c] = _mm512_maskz_loadu_epi16(m, wc[c] + k);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_maskz_loadu_epi16(m, xr[r] + k);
        #pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = dot(acc[r][c], xv, wv[c]);
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int c = 0; c < num_cols; ++c) {
        y[(r0 + r) * n_out + j0 + c * step] = _mm512_reduce_add_ps(acc[r][c]);
      }
    }
  }
};

}  // namespace

size_t gemm_bf16_scratch_bytes(int64_t m, int64_t n_in) {
  return static_cast<size_t>(m * n_in) * sizeof(uint16_t) + 64;
}

void gemm_bf16_dot(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                   void* scratch) {
  auto* x_bf16 = static_cast<uint16_t*>(scratch);  // (m, n_in)
  convert_rows_to_bf16(x_bf16, x, m);
  const DotKernel kernel{y, x_bf16, w.data.as<uint16_t>(), w.n_in, w.n_out};
  if (m <= kRowsPerTile) return run_gemv_spread<kColsPerTile, kRowsPerTile, 1>(m, w.n_out, kernel);
  run_gemm(m, w.n_out, kernel);
}

}  // namespace vellum::kernels::avx512
