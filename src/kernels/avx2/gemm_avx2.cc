// f32, f16 and bf16 weights on AVX2 + FMA: weights widened to f32, FMA against f32
// activations, horizontal sums once per output element. The loop nest is that of
// avx512/gemm_driver.h (read its header): micro-tiles of activation rows × weight rows so that
// each weight vector loaded from memory feeds several rows, m-blocks whose weight slices stay in
// cache, threads splitting the output columns.
//
// The inner loop steps 16 inputs as two halves of 8 f32 lanes. For f32 and f16 the halves are
// inputs k..k+7 and k+8..k+15. bf16 widens with no shuffle: one 32-byte load holds 16 weights
// as 8 pairs, and `v << 16` is the even inputs as f32, `v & 0xffff0000` the odd ones; the
// activations are de-interleaved to match once per call (into scratch, per block of 16 inputs,
// the last n_in % 16 left in order for the tail loop). Widening each 8 weights with vpmovzxwd +
// shift cost a shuffle per 8 weights and left the bf16 decode at 0.5-0.6 of the AVX-512 path's.
//
// Register budget (16 ymm): 4 rows × 3 columns = 12 accumulators + 3 weight vectors + 1
// activation vector. A 4 × 4 tile, as on AVX-512 (32 zmm), would spill. Tiles of 1 or 2 rows
// (decode) keep a separate accumulator per half: with only 3 FMA chains of 4-cycle latency a
// single-row GEMV was latency-bound (9 GB/s of bf16 on one core). A single-row product (m = 1)
// takes 4 columns per tile: 8 chains, enough to fill both FMA pipes (bf16 from DRAM 0.45 -> 0.52
// of the read probe; 6 columns spilled and ran at a third of the speed).
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/matmul.h"
#include "kernels/spread_tiles.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx2 {
namespace {

constexpr int kRowsPerTile = 4;
constexpr int kColsPerTile = 3;
constexpr int kColsPerGemvTile = 4;  // m = 1: 8 accumulators
constexpr int64_t kRowBlock = 64;

// Load::half<H, kNoSpareRegister>(p): half H (0, 1) of the 16 weights at p as 8 f32, matching
// the activations as gemm_fma lays them out (de-interleaved when kPermuted);
// Load::load(p, n): the first n (< 8) weights in order (tails). kNoSpareRegister: the caller's
// tile holds 12 accumulators, so no register is left for a constant.
struct LoadF32 {
  using T = float;
  static constexpr bool kPermuted = false;
  template <int H, bool>
  static __m256 half(const float* p) { return _mm256_loadu_ps(p + 8 * H); }
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load(const float* p, int64_t n) { return load_f32(p, n); }
};
struct LoadF16 {
  using T = uint16_t;
  static constexpr bool kPermuted = false;
  template <int H, bool>
  static __m256 half(const uint16_t* p) { return load_f16(p + 8 * H); }
  static __m256 load(const uint16_t* p) { return load_f16(p); }
  static __m256 load(const uint16_t* p, int64_t n) { return load_f16(p, n); }
};
struct LoadBF16 {
  using T = uint16_t;
  static constexpr bool kPermuted = true;
  template <int H, bool kNoSpareRegister>
  static __m256 half(const uint16_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (H == 0) return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    // The mask takes a register; tiles with 12 accumulators clear the low half by two shifts.
    if constexpr (kNoSpareRegister) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(v, 16), 16));
    }
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(-65536)));
  }
  static __m256 load(const uint16_t* p) { return load_bf16(p); }
  static __m256 load(const uint16_t* p, int64_t n) { return load_bf16(p, n); }
};

// One activation row for LoadBF16: each full block of 16 inputs as its 8 even then its 8 odd
// ones, the last n % 16 in order.
void deinterleave_row(float* out, const float* x, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m256 a = _mm256_loadu_ps(x + k);      // x0 .. x7
    const __m256 b = _mm256_loadu_ps(x + k + 8);  // x8 .. x15
    // shuffle_ps picks within 128-bit lanes: (a0 a2 b0 b2 | a4 a6 b4 b6); the 64-bit permute
    // puts the quarters in order (a0 a2 a4 a6 | b0 b2 b4 b6).
    const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 odd = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(out + k, _mm256_castpd_ps(_mm256_permute4x64_pd(
                                  _mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(out + k + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(
                                      _mm256_castps_pd(odd), _MM_SHUFFLE(3, 1, 2, 0))));
  }
  for (; k < n; ++k) out[k] = x[k];
}

template <class Load>
struct FmaKernel {
  using T = typename Load::T;
  float* y;        // (m, n_out)
  const float* x;  // (m, n_in), de-interleaved per 16 when Load::kPermuted
  const T* w;      // (n_out, n_in)
  int64_t n_in;
  int64_t n_out;

  // One prefetch per 64-byte line `ahead` elements on: with adjacent tiles, the same offset in
  // the next tile's rows (C rows on), so its C short streams start warm instead of each ramping
  // up the hardware prefetcher again; with spread tiles (stride > 1, spread_tiles.h) each
  // stream's next row is the next tile's, and 1 KB ahead in the stream, as in
  // avx512/gemm_bf16_avx512.cc. A loop step covers 32 bytes (bf16, f16) or 64 (f32), and
  // a second prefetch of the same line only occupies a fill buffer. (The _mm_prefetch calls
  // this file had, 1 KB ahead in the same rows, were dropped by GCC 12 -O3: prefetch_l2 is
  // inline asm. Measured: bf16 and f16 decode from DRAM 0.55 -> 0.65 of the read probe.)
  // Only tiles of 1-2 rows prefetch: larger ones run over a row block whose weights are
  // reused from cache by every row tile, and their prefetches (repeated per row tile) took
  // bf16 prefill-512 from 74 to 45 tok/s.
  template <int C>
  void prefetch_line(const T* const* wc, int64_t k, int64_t ahead) const {
    if ((k * static_cast<int64_t>(sizeof(T))) % 64 != 0) return;
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      prefetch_l2(wc[c] + ahead + k);
    }
  }

  // Half H of 16 inputs at k into acc (R rows × C columns).
  template <int H, int R, int C>
  static void step(const T* const* wc, const float* const* xr, int64_t k,
                   __m256 (&acc)[R][C]) {
    __m256 wv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) wv[c] = Load::template half<H, (R > 2)>(wc[c] + k);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(xr[r] + k + 8 * H);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }

  // Rows [r0, r0 + R), columns j0 + c·stride for c < num_cols, num_cols in 1..C.
  template <int R, int C>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t stride) const {
    const T* wc[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      // clamped: extra columns unused
      wc[c] = w + std::min<int64_t>(j0 + c * stride, n_out - 1) * n_in;
    }
    const int64_t ahead =
        stride == 1 ? C * n_in : 1024 / static_cast<int64_t>(sizeof(T));  // elements
    const float* xr[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xr[r] = x + (r0 + r) * n_in;
    // Tiles of 1-2 rows sum the two halves in separate accumulators (acc2), 3-4 rows in one.
    __m256 acc[R][C];
    __m256 acc2[R][C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = acc2[r][c] = _mm256_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 16 <= n_in; k += 16) {
      step<0>(wc, xr, k, acc);
      if constexpr (R <= 2) {
        prefetch_line<C>(wc, k, ahead);
        step<1>(wc, xr, k, acc2);
      } else {
        step<1>(wc, xr, k, acc);
      }
    }
    // The last n_in % 16 inputs, in order (so the activations there are too).
    for (; k + 8 <= n_in; k += 8) {
      __m256 wv[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) wv[c] = Load::load(wc[c] + k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(xr[r] + k);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
    if (k < n_in) {
      const int64_t left = n_in - k;
      __m256 wv[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) wv[c] = Load::load(wc[c] + k, left);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 xv = load_f32(xr[r] + k, left);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < num_cols; ++c) {
        y[(r0 + r) * n_out + j0 + c * stride] =
            reduce_add(_mm256_add_ps(acc[r][c], acc2[r][c]));
      }
    }
  }
};

template <int C, class Kernel>
void run_gemm(int64_t m, int64_t n_out, const Kernel& kernel) {
  const int64_t num_col_tiles = (n_out + C - 1) / C;
  // Tiles of 1-2 rows sum each row in another order than tiles of 3-4 (two FMA chains per
  // column, not one); batch-invariant mode keeps every row on the 1-2 row order. The column
  // count does not change any output's order of summation.
  const int64_t rows_per_tile = batch_invariant() ? 2 : kRowsPerTile;
  threads::parallel([&](int thread, int num_threads) {
    const auto [jt_begin, jt_end] = threads::static_range(num_col_tiles, thread, num_threads);
    for (int64_t mb = 0; mb < m; mb += kRowBlock) {
      const int64_t m_end = std::min(m, mb + kRowBlock);
      for (int64_t jt = jt_begin; jt < jt_end; ++jt) {
        const int64_t j0 = jt * C;
        const int num_cols = static_cast<int>(std::min<int64_t>(C, n_out - j0));
        for (int64_t r0 = mb; r0 < m_end; r0 += rows_per_tile) {
          switch (std::min<int64_t>(rows_per_tile, m_end - r0)) {
            case 1: kernel.template tile<1, C>(r0, j0, num_cols, 1); break;
            case 2: kernel.template tile<2, C>(r0, j0, num_cols, 1); break;
            case 3: kernel.template tile<3, C>(r0, j0, num_cols, 1); break;
            default: kernel.template tile<4, C>(r0, j0, num_cols, 1); break;
          }
        }
      }
    }
  });
}

template <class Load>
void gemm_fma(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
              float* scratch) {
  if constexpr (Load::kPermuted) {
    threads::parallel_for(m, m * w.n_in >= kMinParallelElems, [&](int64_t r) {
      deinterleave_row(scratch + r * w.n_in, x + r * w.n_in, w.n_in);
    });
    x = scratch;
  }
  const FmaKernel<Load> kernel{y, x, w.data.as<typename Load::T>(), w.n_in, w.n_out};
  if (m == 1) {
    // Decode: the tile's rows are weight streams spread through the thread's slice.
    for_each_spread_tile<kColsPerGemvTile>(w.n_out, 1, [&](int64_t j0, int num_cols,
                                                           int64_t stride) {
      kernel.template tile<1, kColsPerGemvTile>(0, j0, num_cols, stride);
    });
  } else {
    run_gemm<kColsPerTile>(m, w.n_out, kernel);
  }
}

}  // namespace

void gemm_f32(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadF32>(y, x, m, w, nullptr);
}
void gemm_f16(float* y, const float* x, int64_t m, const detail::PackedWeights& w) {
  gemm_fma<LoadF16>(y, x, m, w, nullptr);
}
size_t gemm_bf16_scratch_bytes(int64_t m, int64_t n_in) {
  return static_cast<size_t>(m * n_in) * sizeof(float);
}
void gemm_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
               void* scratch) {
  gemm_fma<LoadBF16>(y, x, m, w, static_cast<float*>(scratch));
}

}  // namespace vellum::kernels::avx2
