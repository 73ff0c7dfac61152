// GGML quantized weights without a panel layout (Q2_K, Q3_K, IQ4_XS) with
// AVX512-VNNI, read in their own GGUF layout.
//
// Small m (decode): activations are quantized per 32 values like GGML's Q8_0 (d = amax / 127)
// into scratch, with, per 4 values (one VNNI lane), the block's d and d · Σ of the 4 codes. Each
// 64-weight unit of a weight row is unpacked in registers (quant_unpack_avx512.h) into unsigned
// codes q and per-lane scale d_w and offset m_w, and
//   y += Σ_lanes cvt(dpbusd(q, xq)) · d_w · d_x + m_w · d_x Σ xq.
// The loop nest is gemm_driver.h's (4 activation rows × 4 weight rows per tile).
//
// Large m (prefill, batched decode): slabs of weight rows are unpacked to bf16 into scratch (they
// stay in cache) and multiplied by oneDNN (AMX where present), as the Q8_0 path does.
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/bf16_slabs.h"
#include "kernels/avx512/gemm_driver.h"
#include "kernels/avx512/quant_unpack_avx512.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Scratch per activation row, each part k_pad bytes: xq (k_pad int8), xd (k_pad / 4 f32: d_x of
// the block each lane belongs to), xs (k_pad / 4 f32: d_x · Σ of the lane's 4 codes).
struct QuantizedX {
  int64_t k_pad;
  uint8_t* base;
  int8_t* xq(int64_t r) const { return reinterpret_cast<int8_t*>(base + r * 3 * k_pad); }
  float* xd(int64_t r) const { return reinterpret_cast<float*>(base + (r * 3 + 1) * k_pad); }
  float* xs(int64_t r) const { return reinterpret_cast<float*>(base + (r * 3 + 2) * k_pad); }
};

void quantize_x_row(const QuantizedX& q, int64_t r, const float* x, int64_t n_in) {
  int8_t* xq = q.xq(r);
  float* xd = q.xd(r);
  float* xs = q.xs(r);
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
    // Sums of each 4 codes: the 8 int32 lanes of this block.
    const __m512i sums =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_castsi256_si512(bytes));
    const __m256 dv = _mm256_set1_ps(d);
    _mm256_storeu_ps(xd + b * 8, dv);
    _mm256_storeu_ps(xs + b * 8,
                     _mm256_mul_ps(_mm512_castps512_ps256(_mm512_cvtepi32_ps(sums)), dv));
  }
}

template <class T>
struct QuantKernel {
  float* y;
  QuantizedX xq;
  const detail::PackedWeights* w;
  int64_t n_out;

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols) const {
    const int64_t n_in = w->n_in;
    const int64_t num_groups = (n_in + T::kGroupElems - 1) / T::kGroupElems;
    const uint8_t* rows[kColsPerTile];
#pragma GCC unroll 4
    for (int c = 0; c < kColsPerTile; ++c) {
      rows[c] = w->data.as<uint8_t>() + std::min<int64_t>(j0 + c, n_out - 1) * w->row_bytes;
    }
    __m512 acc[R][kColsPerTile];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < num_groups; ++g) {
      const bool full = (g + 1) * T::kGroupElems <= n_in;
      typename T::State state[kColsPerTile];
#pragma GCC unroll 4
      for (int c = 0; c < kColsPerTile; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[c] + g * T::kGroupBytes) + kPrefetchBytes,
                     _MM_HINT_T0);
        _mm_prefetch(
            reinterpret_cast<const char*>(rows[c] + g * T::kGroupBytes) + kPrefetchBytes + 64,
            _MM_HINT_T0);
        if constexpr (T::kGroupBytes > 128) {
          _mm_prefetch(
              reinterpret_cast<const char*>(rows[c] + g * T::kGroupBytes) + kPrefetchBytes + 128,
              _MM_HINT_T0);
        }
        state[c] = T::load(rows[c], g, full);
      }
#pragma GCC unroll 4
      for (int u = 0; u < T::kUnits; ++u) {
        const int64_t k = g * T::kGroupElems + u * 64;
#pragma GCC unroll 4
        for (int c = 0; c < kColsPerTile; ++c) {
          const quant::Unit unit = T::unit(state[c], rows[c], g, u, full);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const __m512i xv = _mm512_loadu_si512(xq.xq(r0 + r) + k);
            const __m512 xd = _mm512_loadu_ps(xq.xd(r0 + r) + k / 4);
            const __m512 xs = _mm512_loadu_ps(xq.xs(r0 + r) + k / 4);
            const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), unit.q, xv);
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(unit.d, xd),
                                        acc[r][c]);
            acc[r][c] = _mm512_fmadd_ps(unit.m, xs, acc[r][c]);
          }
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

template <class T>
void run_quant(float* y, const QuantizedX& xq, const detail::PackedWeights& w, int64_t m) {
  const QuantKernel<T> kernel{y, xq, &w, w.n_out};
  run_gemm(m, w.n_out, kernel);
}

// Unpacks weight rows [j0, j0 + num_rows) to bf16 rows of n_in elements.
template <class T>
void unpack_rows_bf16(uint16_t* out, const detail::PackedWeights& w, int64_t j0,
                      int64_t num_rows) {
  const int64_t n_in = w.n_in;
  const int64_t num_groups = (n_in + T::kGroupElems - 1) / T::kGroupElems;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < num_rows; ++r) {
    const uint8_t* row = w.data.as<uint8_t>() + (j0 + r) * w.row_bytes;
    uint16_t* dst = out + r * n_in;
    for (int64_t g = 0; g < num_groups; ++g) {
      const bool full = (g + 1) * T::kGroupElems <= n_in;
      const typename T::State state = T::load(row, g, full);
      for (int u = 0; u < T::kUnits; ++u) {
        const quant::Unit unit = T::unit(state, row, g, u, full);
        const int64_t k = g * T::kGroupElems + u * 64;
        for (int quarter = 0; quarter < 4; ++quarter) {
          if (k + quarter * 16 >= n_in) break;
          __m128i bytes;
          switch (quarter) {
            case 0: bytes = _mm512_extracti32x4_epi32(unit.q, 0); break;
            case 1: bytes = _mm512_extracti32x4_epi32(unit.q, 1); break;
            case 2: bytes = _mm512_extracti32x4_epi32(unit.q, 2); break;
            default: bytes = _mm512_extracti32x4_epi32(unit.q, 3); break;
          }
          const __m512i index = quant::quad_index(quarter);
          const __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)),
                                           _mm512_permutexvar_ps(index, unit.d),
                                           _mm512_permutexvar_ps(index, unit.m));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k + quarter * 16),
                              reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
        }
      }
    }
  }
}

template <class Fn>
void dispatch_type(WeightType type, Fn&& fn) {
  switch (type) {
    case WeightType::kQ2_K: return fn(quant::Q2_K{});
    case WeightType::kQ3_K: return fn(quant::Q3_K{});
    case WeightType::kIQ4_XS: return fn(quant::IQ4_XS{});
    default: break;
  }
}

}  // namespace

size_t gemm_quant_scratch_bytes(int64_t m, int64_t n_in) {
  return static_cast<size_t>(m * 3 * round_up(n_in, 64)) + 64;
}

void gemm_quant_vnni(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                     void* scratch) {
  const QuantizedX xq{round_up(w.n_in, 64), static_cast<uint8_t*>(scratch)};
#pragma omp parallel for schedule(static) if (m >= 16)
  for (int64_t r = 0; r < m; ++r) quantize_x_row(xq, r, x + r * w.n_in, w.n_in);
  dispatch_type(w.type, [&](auto type) { run_quant<decltype(type)>(y, xq, w, m); });
}

size_t gemm_quant_bf16_scratch_bytes(int64_t m, int64_t n_in, int64_t n_out) {
  return bf16_slabs_scratch_bytes(m, n_in, n_out);
}

void gemm_quant_bf16(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                     const detail::OnednnPlainBf16Matmul& onednn, void* scratch) {
  gemm_bf16_slabs(y, x, m, w.n_out, w.n_in, onednn, scratch,
                  [&](uint16_t* slab, int64_t j0, int64_t num_rows) {
                    dispatch_type(w.type, [&](auto type) {
                      unpack_rows_bf16<decltype(type)>(slab, w, j0, num_rows);
                    });
                  });
}

}  // namespace vellum::kernels::avx512
