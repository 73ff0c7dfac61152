// Every quantized weight type with AVX512-VNNI on PackedLinear's panel layouts
// (packed_weights.h), every m.
//
// The activations are quantized into scratch as llama.cpp pairs them with each weight type:
// d = amax / 127 per 32 values (GGML's Q8_0) for Q8_0 and the legacy types, per 256 (Q8_K) for
// the K-quants and IQ4_XS; q = round(x / d). A zmm of weights holds one quad (4 inputs) of 16
// outputs; the matching 4 activation codes are broadcast, and one vpdpbusd adds 4 products into
// each output's int32 lane. Eight quads make a 32-block, exactly summed in int32; then one f32
// multiply-add per (row, 16 outputs) applies d_w · d_x (the K-quants: once per 256, see their
// kernels). vpdpbusd wants unsigned × signed bytes: the weights are
// stored as w + 128 and each block's dot starts from -128 · Σ x_q (per row and block, computed
// with the activations), which removes the offset exactly:  Σ (w + 128) x = Σ w x + 128 Σ x.
//
// A tile is up to 6 activation rows × 2 panels (32 outputs): 12 int32 and 12 f32 accumulators;
// for one or two rows (decode), 4 panels.
// Each output lane's arithmetic is the same whatever the other rows are (no horizontal sums), so
// a row's result does not depend on m (batch invariance).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/gemm_driver.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/quant_types.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx512 {
namespace {

using detail::kQ8Panel;
using detail::Q8Activations;

constexpr int kPanelsPerTile = 2;
constexpr int kRows = 6;
constexpr int64_t kRowBlockQ8 = 128;

// Quantizes row r of the activations with one scale d = amax / 127 per `group` values (32: Q8_0
// and the legacy types, as GGML's Q8_0; 256: the K-quants and IQ4_XS, as GGML's Q8_K, so that
// their kernels sum a whole super-block in int32). Every 32-block stores its codes, their sums
// and its group's d.
void quantize_row(const Q8Activations& q, int64_t r, const float* x, int64_t group) {
  int8_t* xq = q.xq(r);
  int32_t* sum = q.sum(r);
  float* xd = q.xd(r);
  for (int64_t g0 = 0; g0 < q.n_in; g0 += group) {
    __m512 vmax = _mm512_setzero_ps();
    for (int64_t i = g0; i < g0 + group; i += 16) {
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    }
    const float d = _mm512_reduce_max_ps(vmax) / 127.0f;
    const __m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    for (int64_t b = g0 / 32; b < (g0 + group) / 32; ++b) {
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + b * 32), id));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + b * 32 + 16), id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + b * 32 + 16), _mm512_cvtsepi32_epi8(q1));
      // |q| <= 127 after the rounding (amax maps to ±127), so the saturating stores kept q
      // exactly.
      const int32_t sum_lo = _mm512_reduce_add_epi32(q0);
      q.sum_lo(r)[b] = sum_lo;
      sum[b] = sum_lo + _mm512_reduce_add_epi32(q1);
      xd[b] = d;
    }
  }
}

// The m rows of x quantized into scratch for w's kernel (activation_group(w.type) values per
// scale).
Q8Activations quantize_rows(const InputRows& x, int64_t m, const detail::PackedWeights& w,
                            void* scratch) {
  const Q8Activations xq{w.n_in, static_cast<uint8_t*>(scratch)};
  const int64_t group = detail::activation_group(w.type);
  threads::parallel_for(m, m >= 16, [&](int64_t r) {
    // A produced row is made in this thread's buffer and quantized from L1.
    quantize_row(xq, r, x.row(r), group);
    if (detail::uses_sum_quads(w.type)) detail::pack_sum_quads(xq, r);
  });
  return xq;
}

int32_t load_quad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Stores rows [r0, r0 + R) of the outputs j0 .. j0 + num_cols - 1 (panel p's 16 outputs from
// acc[r][p]).
template <int R, int P>
[[gnu::always_inline]] inline void store_tiles(float* y, const __m512 (&acc)[R][P], int64_t n_out,
                                               int64_t r0, int64_t j0, int num_cols,
                                               int64_t step) {
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const int cols = std::min<int>(static_cast<int>(kQ8Panel), num_cols - p * 16);
      _mm512_mask_storeu_ps(y + (r0 + r) * n_out + j0 + p * step * kQ8Panel, tail_mask(cols),
                            acc[r][p]);
    }
  }
}

// Calls kernel.panels<R, P> with P = the panels num_cols spans (P <= MaxP: the kernel's register
// budget at R rows).
template <int MaxP, int R, class Kernel>
[[gnu::always_inline]] inline void tile_panels(const Kernel& kernel, int64_t r0, int64_t j0,
                                               int num_cols, int64_t step) {
  if constexpr (MaxP >= 4) {
    if (num_cols > 3 * kQ8Panel) return kernel.template panels<R, 4>(r0, j0, num_cols, step);
    if (num_cols > 2 * kQ8Panel) return kernel.template panels<R, 3>(r0, j0, num_cols, step);
  }
  if (num_cols > kQ8Panel) return kernel.template panels<R, 2>(r0, j0, num_cols, step);
  kernel.template panels<R, 1>(r0, j0, num_cols, step);
}

struct Q8PanelKernel {
  float* y;
  Q8Activations xq;
  const detail::PackedWeights* w;

  template <int R, int P>
  void panels(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    const int64_t n_in = w->n_in;
    const int64_t n_out = w->n_out;
    const uint8_t* wq[P];
    const uint16_t* ws[P];
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      wq[p] = w->q8_panel(j0 / kQ8Panel + p * step);
      ws[p] = w->q8_panel_scales(j0 / kQ8Panel + p * step);
    }
    __m512 acc[R][P];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / 32; ++b) {
      __m512i dot[R][P];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i corr = _mm512_set1_epi32(-128 * xq.sum(r0 + r)[b]);
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) dot[r][p] = corr;
      }
      #pragma GCC unroll 8
      for (int quad = 0; quad < 8; ++quad) {
        const int64_t offset = (b * 8 + quad) * 64;
        __m512i wv[P];
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          wv[p] = _mm512_load_si512(wq[p] + offset);
          prefetch_l2(reinterpret_cast<const char*>(wq[p] + offset) + kPrefetchBytes);
        }
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i xv = _mm512_set1_epi32(load_quad(xq.xq(r0 + r) + b * 32 + quad * 4));
          #pragma GCC unroll 4
          for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], xv);
        }
      }
      __m512 wd[P];
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        wd[p] = _mm512_cvtph_ps(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(ws[p] + b * kQ8Panel)));
      }
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 xd = _mm512_set1_ps(xq.xd(r0 + r)[b]);
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_mul_ps(wd[p], xd),
                                      acc[r][p]);
        }
      }
    }
    store_tiles<R, P>(y, acc, n_out, r0, j0, num_cols, step);
  }

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    tile_panels<4, R>(*this, r0, j0, num_cols, step);
  }
};

// IQ4_NL's (and IQ4_XS's) codebook + 128 (unsigned, for vpdpbusd), made once at compile time.
alignas(16) constexpr std::array<uint8_t, 16> kIq4Offset128 = [] {
  std::array<uint8_t, 16> table{};
  for (int i = 0; i < 16; ++i) table[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
  return table;
}();

// Moves bit `bit` of every byte to bit 4 (other bits: garbage to be masked off).
inline __m512i bit_to_4(__m512i v, int bit) {
  return bit <= 4 ? _mm512_slli_epi16(v, static_cast<unsigned>(4 - bit))
                  : _mm512_srli_epi16(v, static_cast<unsigned>(bit - 4));
}

// dot[r][p] += one 32-block of nibble panels (4-bit codes, kFive: plus the fifth-bit vector at
// byte 256, kLut: codes looked up in `table`) against the block's 32 activation codes of rows
// r0.. (packed_weights.h): per nibble vector, one load gives two quads of 16 outputs.
template <int R, int P, bool kFive, bool kLut>
[[gnu::always_inline]] inline void dot_nibble_block(__m512i (&dot)[R][P],
                                                    const uint8_t* const (&blocks)[P],
                                                    const Q8Activations& xq, int64_t r0,
                                                    int64_t blk, __m512i table) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  #pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) {
    __m512i lo[P];
    __m512i hi[P];
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512i v = _mm512_load_si512(blocks[p] + t * 64);
      prefetch_l2(reinterpret_cast<const char*>(blocks[p] + t * 64) + kPrefetchBytes);
      lo[p] = _mm512_and_si512(v, nibble);
      hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
      if constexpr (kLut) {
        lo[p] = _mm512_shuffle_epi8(table, lo[p]);
        hi[p] = _mm512_shuffle_epi8(table, hi[p]);
      }
      if constexpr (kFive) {
        const __m512i fifth = _mm512_set1_epi8(0x10);
        const __m512i bits = _mm512_load_si512(blocks[p] + 256);
        lo[p] = _mm512_or_si512(lo[p], _mm512_and_si512(bit_to_4(bits, 2 * t), fifth));
        hi[p] = _mm512_or_si512(hi[p], _mm512_and_si512(bit_to_4(bits, 2 * t + 1), fifth));
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const int8_t* x = xq.xq(r0 + r) + blk * 32 + t * 8;
      const __m512i xa = _mm512_set1_epi32(load_quad(x));
      const __m512i xb = _mm512_set1_epi32(load_quad(x + 4));
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], lo[p], xa);
        dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], hi[p], xb);
      }
    }
  }
}

// Q4_K, Q5_K and IQ4_XS: the same tiles on 4-bit panels. One load gives two quads of 16 outputs
// (low and high nibbles, codes 0..15, or 0..31 with Q5_K's fifth bits from the block's bit vector;
// unsigned as vpdpbusd wants them: no offset). The activations have one scale per 256 (Q8_K), so
// a whole super-block sums in int32: each 32-input sub-block's dot times its 6-bit scale sc, and
// the mins' term Σ mn · Σx_q (four vpdpbusd on the panel's mn[2][16][4] against the sub-blocks'
// code sums split into 128 · hi + lo, both signed bytes); then per 256 inputs one
// acc += d·d_x·Σ sc·dot - dmin·d_x·Σ mn·Σx_q. IQ4_XS looks its codes up as codebook value + 128
// (as IQ4_NL), starts each dot from -128 · Σ x_q, and has signed scales and no mins. Every int32
// sum is exact (|Σ sc·dot| < 2^27). Four rows per tile (the nibble masks and the int32 sums take
// the registers a sixth row would need).
template <WeightType kType>
struct Q45KPanelKernel {
  static constexpr bool kFive = kType == WeightType::kQ5_K;
  static constexpr bool kXs = kType == WeightType::kIQ4_XS;
  float* y;
  Q8Activations xq;
  const detail::PackedWeights* w;

  template <int R, int P>
  void panels(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    const int64_t n_out = w->n_out;
    const int64_t panel0 = j0 / kQ8Panel;
    const uint8_t* codes[P];
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p) codes[p] = w->nibble_panel(panel0 + p * step);
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_load_si128(reinterpret_cast<const __m128i*>(kIq4Offset128.data())));
    __m512 acc[R][P];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < w->n_in / 256; ++g) {
      const uint8_t* scales[P];
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) scales[p] = w->q4k_panel_scales(panel0 + p * step, g);
      __m512i isum[R][P];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
      }
      for (int sub = 0; sub < 8; ++sub) {
        const int64_t blk = g * 8 + sub;  // the 32-block of the activations
        __m512i dot[R][P];
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i start =
              kXs ? _mm512_set1_epi32(-128 * xq.sum(r0 + r)[blk]) : _mm512_setzero_si512();
          #pragma GCC unroll 4
          for (int p = 0; p < P; ++p) dot[r][p] = start;
        }
        constexpr int64_t kBlockBytes = kFive ? 320 : 256;
        const uint8_t* blocks[P];
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) blocks[p] = codes[p] + blk * kBlockBytes;
        dot_nibble_block<R, P, kFive, kXs>(dot, blocks, xq, r0, blk, table);
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const __m128i s8 = _mm_load_si128(reinterpret_cast<const __m128i*>(
              scales[p] + (kXs ? detail::kIq4XsScOffset : detail::kQ4KScOffset) + sub * kQ8Panel));
          const __m512i sc = kXs ? _mm512_cvtepi8_epi32(s8) : _mm512_cvtepu8_epi32(s8);
          #pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            isum[r][p] = _mm512_add_epi32(isum[r][p], _mm512_mullo_epi32(dot[r][p], sc));
          }
        }
      }
      __m512 d[P];
      __m512 dmin[P];
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        d[p] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales[p])));
        if constexpr (!kXs) {
          dmin[p] = _mm512_cvtph_ps(_mm256_load_si256(
              reinterpret_cast<const __m256i*>(scales[p] + detail::kQ4KDminOffset)));
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float dx = xq.xd(r0 + r)[g * 8];  // one scale per 256 (activation_group)
        const __m512 vdx = _mm512_set1_ps(dx);
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][p]), _mm512_mul_ps(d[p], vdx),
                                      acc[r][p]);
        }
        if constexpr (!kXs) {
          // The sub-blocks' code sums as two quads of lo and two of hi bytes (sum_quads).
          const uint32_t* lo = xq.sum_quads(r0 + r) + g * 4;
          const uint32_t* hi = lo + 2;
          #pragma GCC unroll 4
          for (int p = 0; p < P; ++p) {
            const uint8_t* mn = scales[p] + detail::kQ4KMnOffset;
            const __m512i m0 = _mm512_load_si512(mn);
            const __m512i m1 = _mm512_load_si512(mn + 64);
            __m512i ilo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), m0,
                                              _mm512_set1_epi32(static_cast<int>(lo[0])));
            ilo = _mm512_dpbusd_epi32(ilo, m1, _mm512_set1_epi32(static_cast<int>(lo[1])));
            __m512i ihi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), m0,
                                              _mm512_set1_epi32(static_cast<int>(hi[0])));
            ihi = _mm512_dpbusd_epi32(ihi, m1, _mm512_set1_epi32(static_cast<int>(hi[1])));
            const __m512i imin = _mm512_add_epi32(ilo, _mm512_slli_epi32(ihi, 7));
            acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin),
                                        _mm512_mul_ps(dmin[p], _mm512_set1_ps(-dx)), acc[r][p]);
          }
        }
      }
    }
    store_tiles<R, P>(y, acc, n_out, r0, j0, num_cols, step);
  }

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    tile_panels<R == 1 ? 4 : 2, R>(*this, r0, j0, num_cols, step);
  }
};

// Q4_0 / Q4_1 / IQ4_NL / Q5_0 / Q5_1: Q4_K's nibble panels (Q5_*: with Q5_K's fifth bits) and one
// d (and m) per row and 32-block. Q4_0's -8 (Q5_0's -16) offset starts each block's dot from
// -8 · Σ x_q (exact); Q4_1 and Q5_1 add m · d_x · Σ x_q. IQ4_NL looks its codes up (vpshufb) as
// codebook value + 128 and starts from -128 · Σ x_q, as Q8_0 does.

template <WeightType kType>
struct LegacyPanelKernel {
  static constexpr bool kMin = kType == WeightType::kQ4_1 || kType == WeightType::kQ5_1;
  static constexpr bool kLut = kType == WeightType::kIQ4_NL;
  static constexpr bool kFive = kType == WeightType::kQ5_0 || kType == WeightType::kQ5_1;
  static constexpr int kOffset = kLut ? 128 : kFive ? 16 : 8;
  static constexpr int64_t kBlockBytes = kFive ? 320 : 256;
  float* y;
  Q8Activations xq;
  const detail::PackedWeights* w;

  template <int R, int P>
  void panels(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    const int64_t n_out = w->n_out;
    const int64_t panel0 = j0 / kQ8Panel;
    const uint8_t* codes[P];
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p) codes[p] = w->nibble_panel(panel0 + p * step);
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4Offset128.data())));
    __m512 acc[R][P];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    }
    for (int64_t blk = 0; blk < w->n_in / 32; ++blk) {
      __m512i dot[R][P];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i start = kMin ? _mm512_setzero_si512()
                                   : _mm512_set1_epi32(-kOffset * xq.sum(r0 + r)[blk]);
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) dot[r][p] = start;
      }
      const uint8_t* blocks[P];
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) blocks[p] = codes[p] + blk * kBlockBytes;
      dot_nibble_block<R, P, kFive, kLut>(dot, blocks, xq, r0, blk, table);
      __m512 wd[P];
      __m512 wm[P];
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const uint16_t* scales = w->q4_panel_scales(panel0 + p * step, blk);
        wd[p] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
        if constexpr (kMin) {
          wm[p] = _mm512_cvtph_ps(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + kQ8Panel)));
        }
      }
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float dx = xq.xd(r0 + r)[blk];
        const __m512 vdx = _mm512_set1_ps(dx);
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_mul_ps(wd[p], vdx),
                                      acc[r][p]);
        }
        if constexpr (kMin) {
          const __m512 vsum = _mm512_set1_ps(dx * static_cast<float>(xq.sum(r0 + r)[blk]));
          #pragma GCC unroll 4
          for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(wm[p], vsum, acc[r][p]);
        }
      }
    }
    store_tiles<R, P>(y, acc, n_out, r0, j0, num_cols, step);
  }

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    tile_panels<R == 1 ? 4 : 2, R>(*this, r0, j0, num_cols, step);
  }
};

// The two quads of 16 outputs for inputs 16·half + 8·pair .. + 7 of a 32-block of Q6_K, Q3_K or
// Q2_K panels (packed_weights.h), as unsigned codes: Q6_K's 6 bits from a nibble vector and two
// bits of a high-bit vector, Q2_K's 2 bits from the half's 2-bit vector, Q3_K's third bit from its
// bit vector.
template <WeightType kType>
[[gnu::always_inline]] inline void k16_quads(const uint8_t* block, int half, int pair,
                                             __m512i& qa, __m512i& qb) {
  if constexpr (kType == WeightType::kQ6_K) {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    const __m512i top = _mm512_set1_epi8(0x30);
    const __m512i v = _mm512_load_si512(block + (2 * half + pair) * 64);
    const __m512i h = _mm512_load_si512(block + 256 + half * 64);
    const __m512i h_lo = pair == 0 ? _mm512_slli_epi16(h, 4) : h;
    const __m512i h_hi = pair == 0 ? _mm512_slli_epi16(h, 2) : _mm512_srli_epi16(h, 2);
    qa = _mm512_or_si512(_mm512_and_si512(v, nibble), _mm512_and_si512(h_lo, top));
    qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble),
                         _mm512_and_si512(h_hi, top));
  } else {
    const __m512i two = _mm512_set1_epi8(0x03);
    const __m512i v = _mm512_load_si512(block + half * 64);
    const auto s = static_cast<unsigned>(2 * pair);  // the quads' 2-bit fields s and s + 1
    qa = _mm512_and_si512(_mm512_srli_epi16(v, 2 * s), two);
    qb = _mm512_and_si512(_mm512_srli_epi16(v, 2 * s + 2), two);
    if constexpr (kType == WeightType::kQ3_K) {
      // Bit 4·half + s of the bit vector to bit 2.
      const __m512i third = _mm512_set1_epi8(0x04);
      const __m512i h = _mm512_load_si512(block + 128);
      const auto bit = static_cast<unsigned>(4 * half) + s;
      const __m512i ha = bit >= 2 ? _mm512_srli_epi16(h, bit - 2) : _mm512_slli_epi16(h, 2 - bit);
      const __m512i hb = bit + 1 >= 2 ? _mm512_srli_epi16(h, bit - 1) : _mm512_slli_epi16(h, 1);
      qa = _mm512_or_si512(qa, _mm512_and_si512(ha, third));
      qb = _mm512_or_si512(qb, _mm512_and_si512(hb, third));
    }
  }
}

// Q6_K, Q3_K and Q2_K: 16-input sub-blocks. The unsigned codes (Q6_K 0..63, Q3_K 0..7, Q2_K 0..3)
// go to vpdpbusd as they are; Q6_K's -32 and Q3_K's -4 offsets start each 16-input dot from
// -offset · Σ x_q of those inputs (exact, as Q8_0's +128). The activations have one scale per 256
// (Q8_K), so each sub-block's dot times its scale sums over the super-block in int32 (exact:
// |Σ sc·dot| < 2^28) and d·d_x applies once per 256 inputs; Q2_K's min term -dmin·mn·d_x·Σ x_q
// stays per sub-block in f32 (its int32 sums would need registers the tile does not have).
template <WeightType kType>
struct K16PanelKernel {
  static constexpr int kOffset = kType == WeightType::kQ6_K ? 32 : kType == WeightType::kQ3_K ? 4 : 0;
  static constexpr bool kMin = kType == WeightType::kQ2_K;
  static constexpr int64_t kBlockBytes = kType == WeightType::kQ6_K   ? detail::kQ6KPanelBlockBytes
                                         : kType == WeightType::kQ3_K ? detail::kQ3KPanelBlockBytes
                                                                      : detail::kQ2KPanelBlockBytes;
  static constexpr int kLines = static_cast<int>(kBlockBytes / 64);
  float* y;
  Q8Activations xq;
  const detail::PackedWeights* w;

  template <int R, int P>
  void panels(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    const int64_t n_out = w->n_out;
    const int64_t panel0 = j0 / kQ8Panel;
    const uint8_t* codes[P];
    #pragma GCC unroll 4
    for (int p = 0; p < P; ++p) codes[p] = w->k16_panel(panel0 + p * step);
    __m512 acc[R][P];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < w->n_in / 256; ++g) {
      const uint8_t* scales[P];
      __m512 dmin[P];
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        scales[p] = w->k16_panel_scales(panel0 + p * step, g);
        if constexpr (kMin) {
          dmin[p] = _mm512_cvtph_ps(_mm256_load_si256(
              reinterpret_cast<const __m256i*>(scales[p] + detail::kQ2KDminOffset)));
        }
      }
      __m512 vmin_dx[R];  // Q2_K: -d_x (one activation scale per 256)
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) vmin_dx[r] = _mm512_set1_ps(-xq.xd(r0 + r)[g * 8]);
      __m512i isum[R][P];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        #pragma GCC unroll 4
        for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
      }
      for (int64_t blk = g * 8; blk < g * 8 + 8; ++blk) {
        #pragma GCC unroll 4
        for (int half = 0; half < 2; ++half) {
          int32_t sum16[R];
          __m512i dot[R][P];
          #pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const int32_t lo_sum = xq.sum_lo(r0 + r)[blk];
            sum16[r] = half == 0 ? lo_sum : xq.sum(r0 + r)[blk] - lo_sum;
            const __m512i start = _mm512_set1_epi32(-kOffset * sum16[r]);
            #pragma GCC unroll 4
            for (int p = 0; p < P; ++p) dot[r][p] = start;
          }
          #pragma GCC unroll 4
          for (int pair = 0; pair < 2; ++pair) {
            __m512i qa[P];
            __m512i qb[P];
            #pragma GCC unroll 4
            for (int p = 0; p < P; ++p) {
              const uint8_t* block = codes[p] + blk * kBlockBytes;
              if (pair == 0) {  // the block's lines, half of them per half, 2 KB ahead
                const char* ahead = reinterpret_cast<const char*>(block) + 2 * kPrefetchBytes;
                for (int line = half * kLines / 2; line < (half + 1) * kLines / 2; ++line) {
                  prefetch_l2(ahead + line * 64);
                }
              }
              k16_quads<kType>(block, half, pair, qa[p], qb[p]);
            }
            #pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
              const int8_t* x = xq.xq(r0 + r) + blk * 32 + half * 16 + pair * 8;
              const __m512i xa = _mm512_set1_epi32(load_quad(x));
              const __m512i xb = _mm512_set1_epi32(load_quad(x + 4));
              #pragma GCC unroll 4
              for (int p = 0; p < P; ++p) {
                dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], qa[p], xa);
                dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], qb[p], xb);
              }
            }
          }
          const int64_t sub = (blk % 8) * 2 + half;
          #pragma GCC unroll 4
          for (int p = 0; p < P; ++p) {
            __m512i sc;
            if constexpr (kMin) {
              const __m512i s = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(
                  scales[p] + detail::kQ2KScOffset + sub * kQ8Panel)));
              sc = _mm512_and_si512(s, _mm512_set1_epi32(0xF));
              const __m512 mn = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(s, 4)), dmin[p]);
              #pragma GCC unroll 8
              for (int r = 0; r < R; ++r) {
                acc[r][p] = _mm512_fmadd_ps(
                    mn, _mm512_mul_ps(vmin_dx[r], _mm512_set1_ps(static_cast<float>(sum16[r]))),
                    acc[r][p]);
              }
            } else {
              sc = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(
                  scales[p] + detail::kQ6KScOffset + sub * kQ8Panel)));
            }
            #pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
              isum[r][p] = _mm512_add_epi32(isum[r][p], _mm512_mullo_epi32(dot[r][p], sc));
            }
          }
        }
      }
      #pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m512 d =
            _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales[p])));
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][p]),
                                      _mm512_mul_ps(d, _mm512_set1_ps(xq.xd(r0 + r)[g * 8])),
                                      acc[r][p]);
        }
      }
    }
    store_tiles<R, P>(y, acc, n_out, r0, j0, num_cols, step);
  }

  template <int R>
  void tile(int64_t r0, int64_t j0, int num_cols, int64_t step) const {
    tile_panels<R == 1 ? 4 : 2, R>(*this, r0, j0, num_cols, step);
  }
};

// The nibble and 16-input kernels' tiles: 4 rows × 2 panels, and for one row (decode) 4 panels:
// the activation broadcasts and per-block scale work of a row are then shared by 4 panels, and
// 4 weight streams per thread are in flight (GEMV measured 10-35 % faster single-threaded for
// Q4_K, Q5_K, Q4_0, Q5_1, Q2_K, Q3_K, Q6_K and IQ4_NL; a second row's accumulators would not fit
// the registers).
template <class Kernel>
void run_panel_tiles(int64_t m, int64_t n_out, const Kernel& kernel) {
  if (m == 1) return run_gemv_spread<4, 1, kQ8Panel>(m, n_out, kernel);
  // Up to one row tile: its kPanelsPerTile weight streams spread as well.
  if (m <= 4) return run_gemv_spread<kPanelsPerTile, 4, kQ8Panel>(m, n_out, kernel);
  run_gemm<kPanelsPerTile * kQ8Panel, 4, kRowBlockQ8>(m, n_out, kernel);
}

}  // namespace

size_t gemm_q8_0_scratch_bytes(int64_t m, int64_t n_in) {
  return Q8Activations::scratch_bytes(m, n_in);
}

void gemm_q8_0_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                    void* scratch) {
  const Q8Activations xq = quantize_rows(x, m, w, scratch);
  const Q8PanelKernel kernel{y, xq, &w};
  if (m <= 2) {
    // Decode: four panels per tile, four weight streams per thread in flight.
    run_gemv_spread<4, 2, kQ8Panel>(m, w.n_out, kernel);
  } else if (m <= kRows) {  // one row tile: its weight streams spread as well
    run_gemv_spread<kPanelsPerTile, kRows, kQ8Panel>(m, w.n_out, kernel);
  } else {
    run_gemm<kPanelsPerTile * kQ8Panel, kRows, kRowBlockQ8>(m, w.n_out, kernel);
  }
}

void gemm_q45_k_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                     void* scratch) {
  const Q8Activations xq = quantize_rows(x, m, w, scratch);
  const auto run = [&](auto kernel) { run_panel_tiles(m, w.n_out, kernel); };
  switch (w.type) {
    case WeightType::kQ5_K: return run(Q45KPanelKernel<WeightType::kQ5_K>{y, xq, &w});
    case WeightType::kIQ4_XS: return run(Q45KPanelKernel<WeightType::kIQ4_XS>{y, xq, &w});
    default: return run(Q45KPanelKernel<WeightType::kQ4_K>{y, xq, &w});
  }
}

void gemm_q4_legacy_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                         void* scratch) {
  const Q8Activations xq = quantize_rows(x, m, w, scratch);
  const auto run = [&](auto kernel) { run_panel_tiles(m, w.n_out, kernel); };
  switch (w.type) {
    case WeightType::kQ4_1: return run(LegacyPanelKernel<WeightType::kQ4_1>{y, xq, &w});
    case WeightType::kIQ4_NL: return run(LegacyPanelKernel<WeightType::kIQ4_NL>{y, xq, &w});
    case WeightType::kQ5_0: return run(LegacyPanelKernel<WeightType::kQ5_0>{y, xq, &w});
    case WeightType::kQ5_1: return run(LegacyPanelKernel<WeightType::kQ5_1>{y, xq, &w});
    default: return run(LegacyPanelKernel<WeightType::kQ4_0>{y, xq, &w});
  }
}

void gemm_k16_vnni(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                   void* scratch) {
  const Q8Activations xq = quantize_rows(x, m, w, scratch);
  const auto run = [&](auto kernel) { run_panel_tiles(m, w.n_out, kernel); };
  switch (w.type) {
    case WeightType::kQ3_K: return run(K16PanelKernel<WeightType::kQ3_K>{y, xq, &w});
    case WeightType::kQ2_K: return run(K16PanelKernel<WeightType::kQ2_K>{y, xq, &w});
    default: return run(K16PanelKernel<WeightType::kQ6_K>{y, xq, &w});
  }
}

}  // namespace vellum::kernels::avx512
