// GGML quantized weights without a panel layout (Q2_K, Q3_K, IQ4_XS; the
// panel types run in gemm_panels_avx2.cc, dispatched from gemm_quant below) with AVX2 + FMA, for CPUs without AVX512-VNNI (AVX2-only laptops and desktops, AMD Zen 2/3,
// AVX-512 CPUs without VNNI).
//
// The same scheme as avx512/gemm_quant_avx512.cc on 256-bit vectors: activations quantized per
// 32 values (Q8_0 style) with per-lane (4 values) d_x and d_x Σ codes; each 32-weight unit of a
// weight row unpacked in registers into codes q and per-lane d_w, m_w; integer dot products with
// vpmaddubsw + vpmaddwd. vpmaddubsw saturates at 16 bits, so codes must be small unsigned values
// (<= 6 bits: 2 · 63 · 127 fits) or signed values used through the sign trick
// (|q| · sign(x, q), |q| <= 127), which is how the IQ4 codebook's 8-bit values run.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/half.h"
#include "kernels/avx2/avx2_quant.h"
#include "kernels/quant_types.h"

namespace vellum::kernels::avx2 {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

float f16(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Scratch per activation row, each part k_pad bytes: xq (int8), xd (k_pad / 4 f32), xs (k_pad / 4
// f32: d_x · Σ of the lane's 4 codes).
struct QuantizedX {
  int64_t k_pad;
  uint8_t* base;
  int8_t* xq(int64_t r) const { return reinterpret_cast<int8_t*>(base + r * 3 * k_pad); }
  float* xd(int64_t r) const { return reinterpret_cast<float*>(base + (r * 3 + 1) * k_pad); }
  float* xs(int64_t r) const { return reinterpret_cast<float*>(base + (r * 3 + 2) * k_pad); }
};

__m256 load_masked(const float* x, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(x);
  alignas(32) float tmp[8] = {};
  for (int64_t i = 0; i < n; ++i) tmp[i] = x[i];
  return _mm256_load_ps(tmp);
}

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void quantize_x_row(const QuantizedX& q, int64_t r, const float* x, int64_t n_in) {
  int8_t* xq = q.xq(r);
  float* xd = q.xd(r);
  float* xs = q.xs(r);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < q.k_pad / 32; ++b) {
    const int64_t k = b * 32;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = load_masked(x + k + 8 * i, std::max<int64_t>(0, n_in - k - 8 * i));
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[i]));
    }
    const float d = hmax(amax) / 127.0f;
    const __m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) {
      qi[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // int32 -> int8 with saturation, back in element order.
    const __m256i p01 = _mm256_packs_epi32(qi[0], qi[1]);
    const __m256i p23 = _mm256_packs_epi32(qi[2], qi[3]);
    __m256i bytes = _mm256_packs_epi16(p01, p23);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + k), bytes);
    // Sums of each 4 codes.
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
    const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    const __m256 dv = _mm256_set1_ps(d);
    _mm256_storeu_ps(xd + b * 8, dv);
    _mm256_storeu_ps(xs + b * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(s32), dv));
  }
}

struct Unit {
  __m256i q;
  __m256 d;
  __m256 m;
};

// Lanes 0-3 = a, lanes 4-7 = b.
__m256 halves(float a, float b) { return _mm256_set_m128(_mm_set1_ps(b), _mm_set1_ps(a)); }

// 16 bytes of nibbles: element j low, j + 16 high, as 32 bytes in row order.
__m256i nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), mask), _mm_and_si128(v, mask));
}

__m256i iq4_signed(__m256i nib) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nib);
}

// ---- Per type: units of 32 weights; State holds a group's decoded scales. ---------------------

template <class Block>
struct Blocks256 {
  static constexpr int kGroupElems = kQK_K;
  static constexpr int kUnits = 8;
  static constexpr bool kSigned = false;
  static const Block* block(const detail::PackedWeights& w, int64_t j, int64_t g) {
    return reinterpret_cast<const Block*>(w.data.as<uint8_t>() + j * w.row_bytes) + g;
  }
};

// Per-sub-block scales and offsets of one super-block: d[s], m[s] for 8 (32-weight) or 16
// (16-weight) sub-blocks.
struct SubScales {
  alignas(32) float d[16];
  alignas(32) float m[16];
};

struct Q3_K : Blocks256<BlockQ3_K> {
  using State = SubScales;
  static State load(const detail::PackedWeights& w, int64_t j, int64_t g) {
    const BlockQ3_K* b = block(w, j, g);
    State s;
    int8_t sc[16];
    q3_k_scales(b->scales, sc);
    const float d = f16(&b->d);
    for (int i = 0; i < 16; ++i) {
      s.d[i] = d * static_cast<float>(sc[i] - 32);
      s.m[i] = -4.0f * s.d[i];
    }
    return s;
  }
  static Unit unit(const State& s, const detail::PackedWeights& w, int64_t j, int64_t g, int u) {
    const BlockQ3_K* b = block(w, j, g);
    const int half = u / 4;
    const int shift = 2 * (u % 4);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * half));
    const __m256i low = _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(0x03));
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->hmask));
    const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * half + u % 4)));
    const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit),
                                          _mm256_set1_epi8(0x04));
    return {_mm256_or_si256(low, high), halves(s.d[2 * u], s.d[2 * u + 1]),
            halves(s.m[2 * u], s.m[2 * u + 1])};
  }
};

struct Q2_K : Blocks256<BlockQ2_K> {
  using State = SubScales;
  static State load(const detail::PackedWeights& w, int64_t j, int64_t g) {
    const BlockQ2_K* b = block(w, j, g);
    State s;
    const float d = f16(&b->d);
    const float dmin = f16(&b->dmin);
    for (int i = 0; i < 16; ++i) {
      s.d[i] = d * static_cast<float>(b->scales[i] & 0xF);
      s.m[i] = -(dmin * static_cast<float>(b->scales[i] >> 4));
    }
    return s;
  }
  static Unit unit(const State& s, const detail::PackedWeights& w, int64_t j, int64_t g, int u) {
    const BlockQ2_K* b = block(w, j, g);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * (u / 4)));
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * (u % 4)), _mm256_set1_epi8(0x03));
    return {q, halves(s.d[2 * u], s.d[2 * u + 1]), halves(s.m[2 * u], s.m[2 * u + 1])};
  }
};

struct IQ4_XS : Blocks256<BlockIQ4_XS> {
  static constexpr bool kSigned = true;
  using State = SubScales;
  static State load(const detail::PackedWeights& w, int64_t j, int64_t g) {
    const BlockIQ4_XS* b = block(w, j, g);
    State s;
    const float d = f16(&b->d);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                     (((b->scales_h >> 2 * ib) & 3) << 4);
      s.d[ib] = d * static_cast<float>(ls - 32);
      s.m[ib] = 0.0f;
    }
    return s;
  }
  static Unit unit(const State& s, const detail::PackedWeights& w, int64_t j, int64_t g, int u) {
    const BlockIQ4_XS* b = block(w, j, g);
    return {iq4_signed(nibbles(b->qs + 16 * u)), _mm256_set1_ps(s.d[u]), _mm256_setzero_ps()};
  }
};

constexpr int kCols = 4;
constexpr int kRows = 2;
constexpr int64_t kRowBlock = 64;

template <class T, int R>
void tile(float* y, const QuantizedX& xq, const detail::PackedWeights& w, int64_t r0, int64_t j0,
          int num_cols) {
  const int64_t n_out = w.n_out;
  const int64_t num_groups = w.n_in / T::kGroupElems;
  int64_t cols[kCols];
  for (int c = 0; c < kCols; ++c) cols[c] = std::min<int64_t>(j0 + c, n_out - 1);
  __m256 acc[R][kCols];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < kCols; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t g = 0; g < num_groups; ++g) {
    typename T::State state[kCols];
    for (int c = 0; c < kCols; ++c) state[c] = T::load(w, cols[c], g);
    for (int u = 0; u < T::kUnits; ++u) {
      const int64_t k = g * T::kGroupElems + 32 * u;
      for (int c = 0; c < kCols; ++c) {
        const Unit unit = T::unit(state[c], w, cols[c], g, u);
        const __m256i q_abs = T::kSigned ? _mm256_sign_epi8(unit.q, unit.q) : unit.q;
        for (int r = 0; r < R; ++r) {
          __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.xq(r0 + r) + k));
          if constexpr (T::kSigned) xv = _mm256_sign_epi8(xv, unit.q);
          const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, xv), ones16);
          const __m256 xd = _mm256_loadu_ps(xq.xd(r0 + r) + k / 4);
          acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(unit.d, xd),
                                      acc[r][c]);
          if constexpr (!T::kSigned) {
            acc[r][c] = _mm256_fmadd_ps(unit.m, _mm256_loadu_ps(xq.xs(r0 + r) + k / 4), acc[r][c]);
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < num_cols; ++c) y[(r0 + r) * n_out + j0 + c] = hsum(acc[r][c]);
  }
}

template <class T>
void run(float* y, const QuantizedX& xq, const detail::PackedWeights& w, int64_t m) {
  const int64_t num_col_tiles = (w.n_out + kCols - 1) / kCols;
#pragma omp parallel
  for (int64_t mb = 0; mb < m; mb += kRowBlock) {
    const int64_t m_end = std::min(m, mb + kRowBlock);
#pragma omp for schedule(static)
    for (int64_t jt = 0; jt < num_col_tiles; ++jt) {
      const int64_t j0 = jt * kCols;
      const int num_cols = static_cast<int>(std::min<int64_t>(kCols, w.n_out - j0));
      for (int64_t r0 = mb; r0 < m_end; r0 += kRows) {
        if (m_end - r0 >= 2) {
          tile<T, 2>(y, xq, w, r0, j0, num_cols);
        } else {
          tile<T, 1>(y, xq, w, r0, j0, num_cols);
        }
      }
    }
  }
}

}  // namespace

size_t gemm_quant_scratch_bytes(int64_t m, int64_t n_in) {
  return std::max(static_cast<size_t>(m * 3 * round_up(n_in, 64)),
                  detail::Q8Activations::scratch_bytes(m, n_in));
}

void gemm_quant(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                void* scratch) {
  if (w.type == WeightType::kQ8_0) return gemm_q8_0(y, x, m, w, scratch);
  if (w.type == WeightType::kQ4_K || w.type == WeightType::kQ5_K) {
    return gemm_q45_k(y, x, m, w, scratch);
  }
  if (w.type == WeightType::kQ6_K) return gemm_q6_k(y, x, m, w, scratch);
  if (w.type == WeightType::kQ4_0 || w.type == WeightType::kQ4_1 ||
      w.type == WeightType::kIQ4_NL || w.type == WeightType::kQ5_0 ||
      w.type == WeightType::kQ5_1) {
    return gemm_legacy(y, x, m, w, scratch);
  }
  const QuantizedX xq{round_up(w.n_in, 64), static_cast<uint8_t*>(scratch)};
#pragma omp parallel for schedule(static) if (m >= 16)
  for (int64_t r = 0; r < m; ++r) quantize_x_row(xq, r, x + r * w.n_in, w.n_in);
  switch (w.type) {
    case WeightType::kQ2_K: return run<Q2_K>(y, xq, w, m);
    case WeightType::kQ3_K: return run<Q3_K>(y, xq, w, m);
    case WeightType::kIQ4_XS: return run<IQ4_XS>(y, xq, w, m);
    default: break;
  }
}

}  // namespace vellum::kernels::avx2
