// Q4_K, Q5_K and Q6_K weights (the bulk of Q4_K_M / Q5_K_M files) at small m, with AVX-512 integer dot products
// and integer sub-block scales, on the weights' own GGUF blocks.
//
// Activations are quantized per 256 values (one d per super-block, GGML's Q8_K scheme), with the
// sum of each 16 codes kept for the sub-block minimums/offsets. Inside a super-block everything is
// integer: vpmaddubsw (unsigned codes × int8 activations, 16-bit pair sums) then vpmaddwd with the
// 16-bit sub-block scales gives int32 lanes already weighted by their sub-block scale, summed
// over the super-block; one float multiply-add per super-block applies d_w · d_x. Compared with
// the per-lane float scaling of gemm_quant_avx512.cc this is about half the instructions per
// weight, which is what decode (m = 1: one activation row per weight load) pays for.
//
// Activation order: Q6_K's codes unpack in row order. Q4_K (and Q5_K) keeps the low nibbles of 32 bytes for
// the first 32 weights of a 64-weight chunk and the high nibbles for the next 32, so one 64-byte
// load unpacks (with and/shift only) into weights [0..31, 64..95] and [32..63, 96..127] of a
// 128-weight half; the activations are stored in that order instead of moving the weights.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/gemm_driver.h"
#include "kernels/quant_types.h"

namespace vellum::kernels::avx512 {
namespace {

float f16(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Per activation row: xq (k int8 in the type's order), xd (k / 256 f32), bsum (k / 16 int16: sums
// of 16 codes in row order).
struct QuantizedXK {
  int64_t k;
  int64_t row_bytes;
  uint8_t* base;
  int8_t* xq(int64_t r) const { return reinterpret_cast<int8_t*>(base + r * row_bytes); }
  float* xd(int64_t r) const { return reinterpret_cast<float*>(base + r * row_bytes + k); }
  int16_t* bsum(int64_t r) const {
    return reinterpret_cast<int16_t*>(base + r * row_bytes + k + k / 64);
  }
};

int64_t qk_row_bytes(int64_t k) { return (k + k / 64 + k / 8 + 63) / 64 * 64; }

// One row; `permute_q4k` stores each 128 codes as [0..31, 64..95, 32..63, 96..127].
void quantize_row_k(const QuantizedXK& q, int64_t r, const float* x, bool permute_q4k) {
  int8_t* xq = q.xq(r);
  float* xd = q.xd(r);
  int16_t* bsum = q.bsum(r);
  for (int64_t g = 0; g < q.k / kQK_K; ++g) {
    const float* xg = x + g * kQK_K;
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < kQK_K; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(xg + i)));
    const float d = _mm512_reduce_max_ps(amax) / 127.0f;
    xd[g] = d;
    const __m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    alignas(64) int8_t codes[kQK_K];
    for (int i = 0; i < kQK_K; i += 16) {
      const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + i), id));
      _mm_store_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtsepi32_epi8(qi));
      bsum[g * 16 + i / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(qi));
    }
    int8_t* dst = xq + g * kQK_K;
    if (permute_q4k) {
      static constexpr int kOrder[4] = {0, 2, 1, 3};  // 32-code groups of each 128
      for (int half = 0; half < 2; ++half) {
        for (int i = 0; i < 4; ++i) {
          std::memcpy(dst + half * 128 + i * 32, codes + half * 128 + kOrder[i] * 32, 32);
        }
      }
    } else {
      std::memcpy(dst, codes, kQK_K);
    }
  }
}

// vpermw index tables: lane i (of 32 16-bit lanes) takes element table[i].
struct Index16 {
  alignas(64) int16_t v[32];
};
constexpr Index16 make_index(int lo, int hi, int div_lo) {
  Index16 t{};
  for (int i = 0; i < 32; ++i) t.v[i] = static_cast<int16_t>(i < 16 ? lo + i / div_lo : hi + (i - 16) / div_lo);
  return t;
}
// Q4_K: the scales of weights [0..31 | 64..95] and [32..63 | 96..127] of half h: sub-blocks
// (4h, 4h + 2) and (4h + 1, 4h + 3).
constexpr Index16 kQ4kScale[2][2] = {{make_index(0, 2, 16), make_index(1, 3, 16)},
                                     {make_index(4, 6, 16), make_index(5, 7, 16)}};
// Q6_K: 16-weight sub-blocks in row order; half h, part p (weights 64p..64p+63 of the half).
constexpr Index16 kQ6kScale[2][2] = {{make_index(0, 2, 8), make_index(4, 6, 8)},
                                     {make_index(8, 10, 8), make_index(12, 14, 8)}};
// Q4_K mins per 16 codes: lane i takes min i / 2 (the mins sit at elements 8..15).
alignas(32) constexpr int16_t kQ4kMinIndex[16] = {8, 8, 9, 9, 10, 10, 11, 11,
                                                  12, 12, 13, 13, 14, 14, 15, 15};

inline __m512i load_index(const Index16& t) { return _mm512_load_si512(t.v); }

// Q4_K, and Q5_K (the same with a fifth bit per weight: bit s of qh[l] for weight l of
// sub-block s's 32).
template <class Block>
struct Q4K5K {
  static constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  template <int R>
  static void group(const uint8_t* row, int64_t g, const QuantizedXK& xq, int64_t r0,
                    __m512 (&acc)[R]) {
    const auto* b = reinterpret_cast<const Block*>(row) + g;
    constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    uint32_t utmp[4];
    std::memcpy(utmp, b->scales, kKScaleBytes);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    // 8 scales then 8 mins, as 16-bit lanes.
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(utmp)));
    const __m512i sm512 = _mm512_castsi256_si512(sm);
    const __m256i mins16 =
        _mm256_permutexvar_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(kQ4kMinIndex)), sm);
    __m512i isum[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    const __m512i nib = _mm512_set1_epi8(0x0F);
    __m512i qh2;  // qh twice (Q5_K)
    if constexpr (kFifthBit) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh));
      qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_loadu_si512(b->qs + 64 * h);
      __m512i lo = _mm512_and_si512(q, nib);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
      if constexpr (kFifthBit) {
        // lo holds sub-blocks 4h and 4h + 2, hi 4h + 1 and 4h + 3.
        auto bits = [](int a, int c) {
          return _mm512_inserti64x4(
              _mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << a))),
              _mm256_set1_epi8(static_cast<char>(1 << c)), 1);
        };
        const __m512i sixteen = _mm512_set1_epi8(0x10);
        lo = _mm512_or_si512(
            lo, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(qh2, bits(4 * h, 4 * h + 2)), sixteen));
        hi = _mm512_or_si512(
            hi,
            _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(qh2, bits(4 * h + 1, 4 * h + 3)), sixteen));
      }
      const __m512i s_lo = _mm512_permutexvar_epi16(load_index(kQ4kScale[h][0]), sm512);
      const __m512i s_hi = _mm512_permutexvar_epi16(load_index(kQ4kScale[h][1]), sm512);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int8_t* x = xq.xq(r0 + r) + g * kQK_K + 128 * h;
        const __m512i p_lo = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(x));
        const __m512i p_hi = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(x + 64));
        isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(_mm512_madd_epi16(p_lo, s_lo),
                                                             _mm512_madd_epi16(p_hi, s_hi)));
      }
    }
    const float d = f16(&b->d);
    const float dmin = f16(&b->dmin);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float dx = xq.xd(r0 + r)[g];
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.bsum(r0 + r) + 16 * g));
      const __m512 msum = _mm512_cvtepi32_ps(_mm512_zextsi256_si512(_mm256_madd_epi16(mins16, bs)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_set1_ps(d * dx), acc[r]);
      acc[r] = _mm512_fmadd_ps(msum, _mm512_set1_ps(-dmin * dx), acc[r]);
    }
  }
};

struct Q6K {
  template <int R>
  static void group(const uint8_t* row, int64_t g, const QuantizedXK& xq, int64_t r0,
                    __m512 (&acc)[R]) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(row) + g;
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    const __m512i sc512 = _mm512_castsi256_si512(sc);
    __m512i isum[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    const __m512i nib = _mm512_set1_epi8(0x0F);
    const __m512i two = _mm512_set1_epi8(0x03);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h));
      const __m512i qh_lo = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      const __m512i qh_hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 4)),
                                               _mm256_srli_epi16(qh, 6), 1);
      const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, nib),
                                         _mm512_slli_epi16(_mm512_and_si512(qh_lo, two), 4));
      const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nib),
                                         _mm512_slli_epi16(_mm512_and_si512(qh_hi, two), 4));
      const __m512i s_lo = _mm512_permutexvar_epi16(load_index(kQ6kScale[h][0]), sc512);
      const __m512i s_hi = _mm512_permutexvar_epi16(load_index(kQ6kScale[h][1]), sc512);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int8_t* x = xq.xq(r0 + r) + g * kQK_K + 128 * h;
        const __m512i p_lo = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(x));
        const __m512i p_hi = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(x + 64));
        isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(_mm512_madd_epi16(p_lo, s_lo),
                                                             _mm512_madd_epi16(p_hi, s_hi)));
      }
    }
    const float d = f16(&b->d);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Codes are q + 32: subtract 32 · Σ_sub scale · (sum of the sub-block's 16 codes).
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.bsum(r0 + r) + 16 * g));
      const __m512i offset = _mm512_slli_epi32(_mm512_zextsi256_si512(_mm256_madd_epi16(sc, bs)), 5);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum[r], offset)),
                               _mm512_set1_ps(d * xq.xd(r0 + r)[g]), acc[r]);
    }
  }
};

template <class T>
struct QkKernel {
  float* y;
  QuantizedXK xq;
  const detail::PackedWeights* w;
  int64_t n_out;

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols) const {
    const int64_t num_groups = w->n_in / kQK_K;
    for (int c = 0; c < num_cols; ++c) {
      const uint8_t* row = w->data.as<uint8_t>() + (j0 + c) * w->row_bytes;
      __m512 acc[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
      for (int64_t g = 0; g < num_groups; ++g) {
        const char* next = reinterpret_cast<const char*>(row + g * w->row_bytes / num_groups);
        _mm_prefetch(next + kPrefetchBytes, _MM_HINT_T0);
        _mm_prefetch(next + kPrefetchBytes + 64, _MM_HINT_T0);
        _mm_prefetch(next + kPrefetchBytes + 128, _MM_HINT_T0);
        T::template group<R>(row, g, xq, r0, acc);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) y[(r0 + r) * n_out + j0 + c] = _mm512_reduce_add_ps(acc[r]);
    }
  }
};

}  // namespace

bool gemm_qk_supported(WeightType type) {
  return type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kQ6_K;
}

size_t gemm_qk_scratch_bytes(int64_t m, int64_t n_in) {
  return static_cast<size_t>(m * qk_row_bytes(n_in)) + 64;
}

void gemm_qk(float* y, const float* x, int64_t m, const detail::PackedWeights& w, void* scratch) {
  const QuantizedXK xq{w.n_in, qk_row_bytes(w.n_in), static_cast<uint8_t*>(scratch)};
  const bool permute = w.type != WeightType::kQ6_K;
#pragma omp parallel for schedule(static) if (m >= 16)
  for (int64_t r = 0; r < m; ++r) quantize_row_k(xq, r, x + r * w.n_in, permute);
  switch (w.type) {
    case WeightType::kQ4_K: return run_gemm(m, w.n_out, QkKernel<Q4K5K<BlockQ4_K>>{y, xq, &w, w.n_out});
    case WeightType::kQ5_K: return run_gemm(m, w.n_out, QkKernel<Q4K5K<BlockQ5_K>>{y, xq, &w, w.n_out});
    default: return run_gemm(m, w.n_out, QkKernel<Q6K>{y, xq, &w, w.n_out});
  }
}

}  // namespace vellum::kernels::avx512
