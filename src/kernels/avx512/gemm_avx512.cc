// f32, f16 and bf16 (widened) weights on AVX-512F: weights converted to f32 16 at a time, FMA
// against f32 activations, horizontal sums once per output element.
#include <immintrin.h>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/gemm_driver.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

struct LoadF32 {
  using T = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct LoadF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p) { return load_f16(p); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return load_f16(p, m); }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p) { return load_bf16(p); }
  static __m512 load(const uint16_t* p, __mmask16 m) { return load_bf16(p, m); }
};

template <class Load>
struct FmaKernel {
  using T = typename Load::T;
  float* y;
  const float* x;  // (m, n_in)
  const T* w;      // (n_out, n_in)
  int64_t n_in;
  int64_t n_out;

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    const T* wc[kColsPerTile];
    #pragma GCC unroll 4
    for (int c = 0; c < kColsPerTile; ++c) {
      // clamped: extra columns unused
      wc[c] = w + std::min<int64_t>(j0 + c * step, n_out - 1) * n_in;
    }
    const float* xr[R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xr[r] = x + (r0 + r) * n_in;
    __m512 acc[R][kColsPerTile];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 16 <= n_in; k += 16) {
      __m512 wv[kColsPerTile];
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) {
        wv[c] = Load::load(wc[c] + k);
        prefetch_l2(reinterpret_cast<const char*>(wc[c] + k) + kPrefetchBytes);
      }
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_loadu_ps(xr[r] + k);
        #pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
    if (k < n_in) {
      const __mmask16 m = tail_mask(n_in - k);
      __m512 wv[kColsPerTile];
      #pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) wv[c] = Load::load(wc[c] + k, m);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, xr[r] + k);
        #pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
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

template <class Load>
void gemm_fma(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  const FmaKernel<Load> kernel{y, x, w.data.as<typename Load::T>(), w.n_in, w.n_out};
  if (m <= kRowsPerTile) return run_gemv_spread<kColsPerTile, kRowsPerTile, 1>(m, w.n_out, kernel);
  run_gemm(m, w.n_out, kernel);
}

}  // namespace

void gemm_f32(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadF32>(y, x, m, w);
}
void gemm_f16(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadF16>(y, x, m, w);
}
void gemm_bf16_fma(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadBF16>(y, x, m, w);
}

}  // namespace vellum::kernels::avx512
