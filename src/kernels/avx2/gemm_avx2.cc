// f32, f16 and bf16 weights on AVX2 + FMA: weights widened to f32 eight at a time, FMA against
// f32 activations, horizontal sums once per output element. The loop nest is that of
// avx512/gemm_driver.h (read its header): micro-tiles of activation rows × weight rows so that
// each weight vector loaded from memory feeds several rows, m-blocks whose weight slices stay in
// cache, threads splitting the output columns.
//
// Register budget (16 ymm): 4 rows × 3 columns = 12 accumulators + 3 weight vectors + 1
// activation vector. A 4 × 4 tile, as on AVX-512 (32 zmm), would spill. Tiles of 1 or 2 rows
// (decode) step over two vectors per column with separate accumulators: with only 3 FMA
// chains of 4-cycle latency a single-row GEMV was latency-bound (9 GB/s of bf16 on one core).
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx2 {
namespace {

constexpr int kRowsPerTile = 4;
constexpr int kColsPerTile = 3;
constexpr int64_t kRowBlock = 64;
constexpr int kPrefetchBytes = 1024;  // see avx512/gemm_driver.h

struct LoadF32 {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load(const float* p, int64_t n) { return load_f32(p, n); }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return load_f16(p); }
  static __m256 load(const uint16_t* p, int64_t n) { return load_f16(p, n); }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return load_bf16(p); }
  static __m256 load(const uint16_t* p, int64_t n) { return load_bf16(p, n); }
};

template <class Load>
struct FmaKernel {
  using T = typename Load::T;
  float* y;        // (m, n_out)
  const float* x;  // (m, n_in)
  const T* w;      // (n_out, n_in)
  int64_t n_in;
  int64_t n_out;

  // One prefetch per 64-byte line of each weight row: a loop step covers 32 bytes (bf16,
  // f16) or 32/64 (f32), and a second prefetch of the same line only occupies a fill buffer
  // (perf showed the GEMV stalled on them).
  static void prefetch_line(const T* const* wc, int64_t k) {
    if ((k * static_cast<int64_t>(sizeof(T))) % 64 != 0) return;
#pragma GCC unroll 4
    for (int c = 0; c < kColsPerTile; ++c) {
      _mm_prefetch(reinterpret_cast<const char*>(wc[c] + k) + kPrefetchBytes, _MM_HINT_T0);
    }
  }

  // Rows [r0, r0 + R), columns [j0, j0 + num_cols), num_cols in 1..kColsPerTile.
  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols) const {
    const T* wc[kColsPerTile];
#pragma GCC unroll 4
    for (int c = 0; c < kColsPerTile; ++c) {
      wc[c] = w + std::min<int64_t>(j0 + c, n_out - 1) * n_in;  // clamped: extra columns unused
    }
    const float* xr[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xr[r] = x + (r0 + r) * n_in;
    constexpr int kUnroll = R <= 2 ? 2 : 1;
    __m256 acc[R][kColsPerTile];
    __m256 acc2[R][kColsPerTile];  // second k vector when kUnroll == 2
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = acc2[r][c] = _mm256_setzero_ps();
    }
    int64_t k = 0;
    if constexpr (kUnroll == 2) {
      for (; k + 16 <= n_in; k += 16) {
        __m256 wv[kColsPerTile];
        __m256 wv2[kColsPerTile];
#pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) {
          wv[c] = Load::load(wc[c] + k);
          wv2[c] = Load::load(wc[c] + k + 8);
        }
        prefetch_line(wc, k);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256 xv = _mm256_loadu_ps(xr[r] + k);
          const __m256 xv2 = _mm256_loadu_ps(xr[r] + k + 8);
#pragma GCC unroll 4
          for (int c = 0; c < kColsPerTile; ++c) {
            acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
            acc2[r][c] = _mm256_fmadd_ps(xv2, wv2[c], acc2[r][c]);
          }
        }
      }
    }
    for (; k + 8 <= n_in; k += 8) {
      __m256 wv[kColsPerTile];
#pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) {
        wv[c] = Load::load(wc[c] + k);
      }
      prefetch_line(wc, k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(xr[r] + k);
#pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
    if (k < n_in) {
      const int64_t left = n_in - k;
      __m256 wv[kColsPerTile];
#pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) wv[c] = Load::load(wc[c] + k, left);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 xv = load_f32(xr[r] + k, left);
#pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < num_cols; ++c) {
        y[(r0 + r) * n_out + j0 + c] = reduce_add(_mm256_add_ps(acc[r][c], acc2[r][c]));
      }
    }
  }
};

template <class Kernel>
void run_gemm(int64_t m, int64_t n_out, const Kernel& kernel) {
  const int64_t num_col_tiles = (n_out + kColsPerTile - 1) / kColsPerTile;
  // Tiles of 1-2 rows sum each row in another order than tiles of 3-4 (two FMA chains per
  // column, not one); batch-invariant mode keeps every row on the 1-2 row order.
  const int64_t rows_per_tile = batch_invariant() ? 2 : kRowsPerTile;
  threads::parallel([&](int thread, int num_threads) {
    const auto [jt_begin, jt_end] = threads::static_range(num_col_tiles, thread, num_threads);
    for (int64_t mb = 0; mb < m; mb += kRowBlock) {
      const int64_t m_end = std::min(m, mb + kRowBlock);
      for (int64_t jt = jt_begin; jt < jt_end; ++jt) {
        const int64_t j0 = jt * kColsPerTile;
        const int num_cols = static_cast<int>(std::min<int64_t>(kColsPerTile, n_out - j0));
        for (int64_t r0 = mb; r0 < m_end; r0 += rows_per_tile) {
          switch (std::min<int64_t>(rows_per_tile, m_end - r0)) {
            case 1: kernel.template tile<1>(r0, j0, num_cols); break;
            case 2: kernel.template tile<2>(r0, j0, num_cols); break;
            case 3: kernel.template tile<3>(r0, j0, num_cols); break;
            default: kernel.template tile<4>(r0, j0, num_cols); break;
          }
        }
      }
    }
  });
}

template <class Load>
void gemm_fma(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  const FmaKernel<Load> kernel{y, x, w.data.as<typename Load::T>(), w.n_in, w.n_out};
  run_gemm(m, w.n_out, kernel);
}

}  // namespace

void gemm_f32(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadF32>(y, x, m, w);
}
void gemm_f16(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadF16>(y, x, m, w);
}
void gemm_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadBF16>(y, x, m, w);
}

}  // namespace vellum::kernels::avx2
