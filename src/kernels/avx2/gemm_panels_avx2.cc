// Every quantized weight type on PackedLinear's panel layouts (packed_weights.h) with AVX2, for
// CPUs without AVX512-VNNI: the scheme of avx512/gemm_panels_avx512.cc on 256-bit vectors. For Q8_0,
// a ymm holds one quad (4 inputs) of 8 outputs; the 4 matching activation codes are broadcast. vpmaddubsw wants
// unsigned × signed bytes and saturates at 16 bits, so the weights (stored w + 128) are made
// signed again and multiplied through the sign trick, |w| · sign(x, w): |w| <= 128 and
// |x| <= 127 keep each pair sum within 16 bits. vpmaddwd then sums the pairs into the int32 lane
// of each output; eight quads make a 32-block, then one f32 multiply-add applies d_w · d_x.
// As on AVX-512, every output lane's arithmetic is independent of the other rows (batch
// invariance), and the int32 block sums are exact, so both ISAs give the same bits.
// Tiles are up to 2 rows x 1 panel, or in decode (m = 1) 1 row x each type's kDecodePanels panels
// (Q8_0: 4, as on AVX-512), interleaving that many weight streams per thread.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx2/avx2_quant.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/quant_types.h"
#include "kernels/spread_tiles.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx2 {
namespace {

using detail::kQ8Panel;
using detail::Q8Activations;

constexpr int kRows = 2;
constexpr int64_t kRowBlock = 64;

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// One scale d = amax / 127 per `group` values: 32 (Q8_0 and the legacy types, GGML's Q8_0) or
// 256 (the K-quants and IQ4_XS, GGML's Q8_K), as avx512/gemm_panels_avx512.cc quantizes.
void quantize_row(const Q8Activations& q, int64_t r, const float* x, int64_t group) {
  int8_t* xq = q.xq(r);
  int32_t* sum = q.sum(r);
  float* xd = q.xd(r);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  float d = 0.0f;
  for (int64_t b = 0; b < q.n_in / 32; ++b) {
    if ((b * 32) % group == 0) {
      __m256 amax = _mm256_setzero_ps();
      for (int64_t i = b * 32; i < b * 32 + group; i += 8) {
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(x + i)));
      }
      d = hmax(amax) / 127.0f;
    }
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + b * 32 + 8 * i);
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
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + b * 32), bytes);
    // Σ codes: pairs, then quads, then the 8 lanes.
    const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes),
                                          _mm256_set1_epi16(1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    sum[b] = _mm_cvtsi128_si32(s4);
    // Σ of the first 16 codes: lanes 0-3 of s32.
    __m128i lo4 = _mm256_castsi256_si128(s32);
    lo4 = _mm_add_epi32(lo4, _mm_shuffle_epi32(lo4, 0x4E));
    lo4 = _mm_add_epi32(lo4, _mm_shuffle_epi32(lo4, 0xB1));
    q.sum_lo(r)[b] = _mm_cvtsi128_si32(lo4);
    xd[b] = d;
  }
}

// Stores num_cols of the 16 outputs (two halves of 8) of rows [r0, r0 + R).
template <int R>
void store_tile(float* y, const __m256 (&acc)[R][2], int64_t n_out, int64_t r0, int64_t j0,
                int num_cols) {
  for (int r = 0; r < R; ++r) {
    float* out = y + (r0 + r) * n_out + j0;
    if (num_cols == kQ8Panel) {
      _mm256_storeu_ps(out, acc[r][0]);
      _mm256_storeu_ps(out + 8, acc[r][1]);
    } else {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, acc[r][0]);
      _mm256_store_ps(lanes + 8, acc[r][1]);
      std::memcpy(out, lanes, static_cast<size_t>(num_cols) * sizeof(float));
    }
  }
}

// Stores num_cols (1 .. 16 * P) outputs of rows [r0, r0 + R) from acc[r][p][h], the outputs
// j0 + 16·p·step + 8h .. + 7 (step: spread_tiles.h; 1 for adjacent panels).
template <int R, int P>
void store_panels(float* y, const __m256 (&acc)[R][P][2], int64_t n_out, int64_t r0, int64_t j0,
                  int num_cols, int64_t step) {
  for (int p = 0; p < P; ++p) {
    __m256 panel_acc[R][2];
    for (int r = 0; r < R; ++r) {
      panel_acc[r][0] = acc[r][p][0];
      panel_acc[r][1] = acc[r][p][1];
    }
    store_tile<R>(y, panel_acc, n_out, r0, j0 + p * step * kQ8Panel,
                  std::min(num_cols - p * static_cast<int>(kQ8Panel), static_cast<int>(kQ8Panel)));
  }
}

// Q8_0: rows [r0, r0 + R) x the P panels from j0 (num_cols outputs stored). Per quad and panel,
// two loads of 8 outputs x 4 inputs, made signed again, and |w| for the sign trick (shared by
// every row); per row one broadcast of the quad's 4 activation codes, sign(x, w), vpmaddubsw,
// vpmaddwd. Decode (R = 1) is bound by the weight streams more than by these ops: with one panel
// per tile (one stream per thread, a 1 KB software prefetch) it read at about 0.52 of the
// measured read bandwidth (2 threads); four panels, four streams, at about 0.74, near the
// AVX-512 kernel's 0.79. Taking the sign trick's abs on the activations instead (one per row
// and quad, not per weight vector) measured no faster then.
struct Q8_0Tile {
  static constexpr int kDecodePanels = 4;
  static constexpr int kPrefetchBytes = 1024;

  template <int R, int P>
  static void run(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t r0,
                  int64_t j0, int num_cols, int64_t step) {
    const uint8_t* panel[P];
    const uint16_t* scales[P];
    for (int p = 0; p < P; ++p) {
      panel[p] = w.q8_panel(j0 / kQ8Panel + p * step);
      scales[p] = w.q8_panel_scales(j0 / kQ8Panel + p * step);
    }
    const int8_t* x[R];
    const float* xd[R];
    for (int r = 0; r < R; ++r) {
      x[r] = xq.xq(r0 + r);
      xd[r] = xq.xd(r0 + r);
    }
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[R][P][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < w.n_in / 32; ++b) {
      __m256i dot[R][P][2];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) dot[r][p][0] = dot[r][p][1] = _mm256_setzero_si256();
      }
#pragma GCC unroll 8
      for (int quad = 0; quad < 8; ++quad) {
        __m256i xv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          int32_t quad_codes;
          std::memcpy(&quad_codes, x[r] + b * 32 + quad * 4, sizeof(quad_codes));
          xv[r] = _mm256_set1_epi32(quad_codes);
        }
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const uint8_t* q = panel[p] + (b * 8 + quad) * 64;
          prefetch_l2(reinterpret_cast<const char*>(q) + kPrefetchBytes);
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m256i ws = _mm256_xor_si256(
                _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * h)), offset);
            const __m256i wa = _mm256_sign_epi8(ws, ws);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
              const __m256i prod = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(xv[r], ws));
              dot[r][p][h] = _mm256_add_epi32(dot[r][p][h], _mm256_madd_epi16(prod, ones16));
            }
          }
        }
      }
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256 wd = _mm256_cvtph_ps(
              _mm_load_si128(reinterpret_cast<const __m128i*>(scales[p] + b * kQ8Panel + 8 * h)));
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            acc[r][p][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][p][h]),
                                           _mm256_mul_ps(wd, _mm256_broadcast_ss(xd[r] + b)),
                                           acc[r][p][h]);
          }
        }
      }
    }
    store_panels<R, P>(y, acc, w.n_out, r0, j0, num_cols, step);
  }
};

// Tile::run<R, P'> on rows [r0, r0 + R) with P' <= P the panels that num_cols spans.
template <class Tile, int R, int P>
void tile_cols(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t r0,
               int64_t j0, int num_cols, int64_t step) {
  if constexpr (P > 1) {
    if (num_cols <= (P - 1) * kQ8Panel) {
      return tile_cols<Tile, R, P - 1>(y, xq, w, r0, j0, num_cols, step);
    }
  }
  Tile::template run<R, P>(y, xq, w, r0, j0, num_cols, step);
}

// Tile::run on min(R, rows) rows from r0.
template <class Tile, int R, int P>
void tile_rows(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t rows,
               int64_t r0, int64_t j0, int num_cols, int64_t step) {
  if constexpr (R > 1) {
    if (rows < R) return tile_rows<Tile, R - 1, P>(y, xq, w, rows, r0, j0, num_cols, step);
  }
  tile_cols<Tile, R, P>(y, xq, w, r0, j0, num_cols, step);
}

// Tiles of up to kR rows x kP panels over y (m, n_out): threads split the column tiles, each
// streaming its own panels; the row blocks keep a tile's panels in cache for all their rows.
template <class Tile, int kR, int kP>
void run_tiles(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t m) {
  constexpr int64_t kTileCols = kP * kQ8Panel;
  const int64_t num_tiles = (w.n_out + kTileCols - 1) / kTileCols;
  threads::parallel([&](int thread, int num_threads) {
    const auto [t_begin, t_end] = threads::static_range(num_tiles, thread, num_threads);
    for (int64_t mb = 0; mb < m; mb += kRowBlock) {
      const int64_t m_end = std::min(m, mb + kRowBlock);
      for (int64_t t = t_begin; t < t_end; ++t) {
        const int64_t j0 = t * kTileCols;
        const int num_cols = static_cast<int>(std::min(kTileCols, w.n_out - j0));
        for (int64_t r0 = mb; r0 < m_end; r0 += kR) {
          tile_rows<Tile, kR, kP>(y, xq, w, m_end - r0, r0, j0, num_cols, 1);
        }
      }
    }
  });
}

// Moves bit `bit` of every byte to bit 4 (other bits: garbage to be masked off).
inline __m256i bit_to_4(__m256i v, int bit) {
  return bit <= 4 ? _mm256_slli_epi16(v, 4 - bit) : _mm256_srli_epi16(v, bit - 4);
}

// dot[r][h] += one 32-block of a nibble panel (4-bit codes, kFive: plus the fifth-bit vector at
// byte 256, kLut: IQ4_NL's signed codebook values from `table`) against the block's 32
// activation codes of rows r0.., each output's 32-input sum times its lane of `scale`
// (h: the panel's two halves of 8 outputs; int16 (s, s) pairs, vpmaddwd's multiplier: ones for
// the legacy types, the sub-block scales for the K-quants). One 32-byte load holds two quads of
// 8 outputs. Unsigned codes go to vpmaddubsw directly and their pair sums add in int16 before
// widening, within 2^15 with activation codes within ±127: 4-bit codes over the whole block
// (4 nibble vectors · 2 quads · 2 · 15 · 127 = 30480), 5-bit ones two nibble vectors at a time
// (2 · 2 · 2 · 31 · 127 = 31496); the signed codebook values use the sign trick, each quad
// widened on its own (2 · 127 · 127). Every sum is exact.
template <int R, bool kFive, bool kLut>
[[gnu::always_inline]] inline void dot_nibble_block(__m256i (&dot)[R][2], const uint8_t* block,
                                                    const Q8Activations& xq, int64_t r0,
                                                    int64_t blk, __m256i table,
                                                    const __m256i (&scale)[2]) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256i pairs[R][2] = {};  // unsigned codes: the int16 pair sums since the last widening
  for (int t = 0; t < 4; ++t) {
    const uint8_t* q = block + t * 64;
    // Into L2 for the 4-bit codes, L1 for the 5-bit ones (measured, see kernels/avx2/vec_math.h).
    if constexpr (kFive) {
      prefetch_l1(reinterpret_cast<const char*>(q) + 1024);
    } else {
      prefetch_l2(reinterpret_cast<const char*>(q) + 1024);
    }
    __m256i lo[2];
    __m256i hi[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * h));
      lo[h] = _mm256_and_si256(v, nibble);
      hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
      if constexpr (kLut) {
        lo[h] = _mm256_shuffle_epi8(table, lo[h]);
        hi[h] = _mm256_shuffle_epi8(table, hi[h]);
      }
      if constexpr (kFive) {
        const __m256i fifth = _mm256_set1_epi8(0x10);
        const __m256i bits =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 256 + 32 * h));
        lo[h] = _mm256_or_si256(lo[h], _mm256_and_si256(bit_to_4(bits, 2 * t), fifth));
        hi[h] = _mm256_or_si256(hi[h], _mm256_and_si256(bit_to_4(bits, 2 * t + 1), fifth));
      }
    }
    for (int r = 0; r < R; ++r) {
      int32_t quads[2];
      std::memcpy(quads, xq.xq(r0 + r) + blk * 32 + t * 8, sizeof(quads));
      const __m256i xa = _mm256_set1_epi32(quads[0]);
      const __m256i xb = _mm256_set1_epi32(quads[1]);
      for (int h = 0; h < 2; ++h) {
        if constexpr (kLut) {
          const __m256i pa = _mm256_maddubs_epi16(_mm256_sign_epi8(lo[h], lo[h]),
                                                  _mm256_sign_epi8(xa, lo[h]));
          const __m256i pb = _mm256_maddubs_epi16(_mm256_sign_epi8(hi[h], hi[h]),
                                                  _mm256_sign_epi8(xb, hi[h]));
          dot[r][h] = _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(pa, scale[h]));
          dot[r][h] = _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(pb, scale[h]));
        } else {
          const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xa),
                                             _mm256_maddubs_epi16(hi[h], xb));
          // Several rows (prefill) widen every vector: their int16 sums would take registers
          // the tile does not have.
          const bool first = R > 1 || (kFive ? t % 2 == 0 : t == 0);
          pairs[r][h] = first ? p : _mm256_add_epi16(pairs[r][h], p);
          if (R > 1 || (kFive ? t % 2 == 1 : t == 3)) {
            dot[r][h] = _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(pairs[r][h], scale[h]));
          }
        }
      }
    }
  }
}

// IQ4_NL's (and IQ4_XS's) signed codebook in both 128-bit lanes, for vpshufb.
__m256i iq4_table() {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_set_m128i(values, values);
}

// Q4_K panels, codes 0..15, Q5_K (kFive), 0..31, and IQ4_XS (kXs: signed codebook values, signed
// scales, no mins), as avx512/gemm_panels_avx512.cc computes them: each 32-input sub-block's dot
// times its 6-bit scale (vpmaddwd's multiplier in dot_nibble_block) sums over the super-block in
// int32, and the mins' term Σ mn · Σx_q too (vpmaddubsw of the panel's mins against the
// sub-blocks' code sums split into 128 · hi + lo); then per 256 inputs one
// acc += d·d_x·Σ sc·dot - dmin·d_x·Σ mn·Σx_q. The same integers and the same f32 operations per
// output as the AVX-512 kernel, so both give the same bits.
template <WeightType kType>
struct Q45KTile {
  // One weight stream per thread in decode: 2 and 4 panels per tile measured slower, before and
  // after the int32 super-block sums (Q4_K, 2 threads, share of the read bandwidth 0.62-0.66 ->
  // 0.42-0.44 with 2, 0.41-0.47 with 4).
  static constexpr int kDecodePanels = 1;
  template <int R, int P>
  static void run(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t r0,
                  int64_t j0, int num_cols, int64_t step) {
    constexpr bool kFive = kType == WeightType::kQ5_K;
    constexpr bool kXs = kType == WeightType::kIQ4_XS;
    constexpr int64_t kBlockBytes = kFive ? 320 : 256;
    const __m256i table = iq4_table();
    const int64_t panel0 = j0 / kQ8Panel;
    const uint8_t* codes[P];
    for (int p = 0; p < P; ++p) codes[p] = w.nibble_panel(panel0 + p * step);
    __m256 acc[R][P][2];
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < w.n_in / 256; ++g) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const uint8_t* scales = w.q4k_panel_scales(panel0 + p * step, g);
        __m256i isum[R][2];
        for (int r = 0; r < R; ++r) isum[r][0] = isum[r][1] = _mm256_setzero_si256();
        for (int sub = 0; sub < 8; ++sub) {
          // Row j's scale as the int16 pair (sc, sc) of its 32-bit lane.
          __m256i sc[2];
          for (int h = 0; h < 2; ++h) {
            const __m128i s8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(
                scales + (kXs ? detail::kIq4XsScOffset : detail::kQ4KScOffset) + sub * kQ8Panel +
                8 * h));
            const __m256i s32 = kXs ? _mm256_cvtepi8_epi32(s8) : _mm256_cvtepu8_epi32(s8);
            sc[h] = _mm256_blend_epi16(s32, _mm256_slli_epi32(s32, 16), 0xAA);
          }
          dot_nibble_block<R, kFive, kXs>(isum, codes[p] + (g * 8 + sub) * kBlockBytes, xq, r0,
                                          g * 8 + sub, table, sc);
        }
        for (int h = 0; h < 2; ++h) {
          const __m256 d = _mm256_cvtph_ps(
              _mm_load_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)));
          __m256 dmin = _mm256_setzero_ps();
          __m256i mn[2];
          if constexpr (!kXs) {
            dmin = _mm256_cvtph_ps(_mm_load_si128(
                reinterpret_cast<const __m128i*>(scales + detail::kQ4KDminOffset + 16 * h)));
            // Rows 8h..8h + 7: their 4 mins of sub-blocks 0-3, then of sub-blocks 4-7.
            for (int i = 0; i < 2; ++i) {
              mn[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                  scales + detail::q4k_mn_index(4 * i, 8 * h)));
            }
          }
          for (int r = 0; r < R; ++r) {
            const float dx = xq.xd(r0 + r)[g * 8];  // one scale per 256 (activation_group)
            acc[r][p][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][h]),
                                           _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[r][p][h]);
            if constexpr (!kXs) {
              // The sub-blocks' code sums as two quads of lo and two of hi bytes (sum_quads);
              // |mn · lo| pair sums stay within vpmaddubsw's 16 bits (2 · 63 · 127).
              const uint32_t* lo = xq.sum_quads(r0 + r) + g * 4;
              const uint32_t* hi = lo + 2;
              const __m256i ones16 = _mm256_set1_epi16(1);
              __m256i ilo = _mm256_setzero_si256();
              __m256i ihi = _mm256_setzero_si256();
              for (int i = 0; i < 2; ++i) {
                ilo = _mm256_add_epi32(
                    ilo, _mm256_madd_epi16(
                             _mm256_maddubs_epi16(mn[i], _mm256_set1_epi32(static_cast<int>(lo[i]))),
                             ones16));
                ihi = _mm256_add_epi32(
                    ihi, _mm256_madd_epi16(
                             _mm256_maddubs_epi16(mn[i], _mm256_set1_epi32(static_cast<int>(hi[i]))),
                             ones16));
              }
              const __m256i imin = _mm256_add_epi32(ilo, _mm256_slli_epi32(ihi, 7));
              acc[r][p][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin),
                                             _mm256_mul_ps(dmin, _mm256_set1_ps(-dx)),
                                             acc[r][p][h]);
            }
          }
        }
      }
    }
    store_panels<R, P>(y, acc, w.n_out, r0, j0, num_cols, step);
  }
};

// The two quads of 8 outputs (half h of the panel's 16) for inputs 16·half + 8·pair .. + 7 of a
// 32-block of Q6_K, Q3_K or Q2_K panels, as unsigned codes (see avx512/gemm_panels_avx512.cc).
template <WeightType kType>
[[gnu::always_inline]] inline void k16_quads(const uint8_t* block, int half, int pair, int h,
                                             __m256i& qa, __m256i& qb) {
  const auto load = [block, h](int64_t offset) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(block + offset + 32 * h));
  };
  if constexpr (kType == WeightType::kQ6_K) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i top = _mm256_set1_epi8(0x30);
    const __m256i v = load((2 * half + pair) * 64);
    const __m256i hb = load(256 + half * 64);
    const __m256i h_lo = pair == 0 ? _mm256_slli_epi16(hb, 4) : hb;
    const __m256i h_hi = pair == 0 ? _mm256_slli_epi16(hb, 2) : _mm256_srli_epi16(hb, 2);
    qa = _mm256_or_si256(_mm256_and_si256(v, nibble), _mm256_and_si256(h_lo, top));
    qb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), nibble),
                         _mm256_and_si256(h_hi, top));
  } else {
    const __m256i two = _mm256_set1_epi8(0x03);
    const __m256i v = load(half * 64);
    const int s = 2 * pair;
    qa = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), two);
    qb = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s + 2), two);
    if constexpr (kType == WeightType::kQ3_K) {
      const __m256i third = _mm256_set1_epi8(0x04);
      const __m256i hb = load(128);
      const int bit = 4 * half + s;
      const __m256i ha = bit >= 2 ? _mm256_srli_epi16(hb, bit - 2) : _mm256_slli_epi16(hb, 2 - bit);
      const __m256i hc = bit >= 1 ? _mm256_srli_epi16(hb, bit - 1) : _mm256_slli_epi16(hb, 1);
      qa = _mm256_or_si256(qa, _mm256_and_si256(ha, third));
      qb = _mm256_or_si256(qb, _mm256_and_si256(hc, third));
    }
  }
}

// Q6_K, Q3_K and Q2_K panels: 16-input sub-blocks, as avx512/gemm_panels_avx512.cc computes
// them. Each sub-block's code dot times its scale sums over the super-block in int32: the two
// quads' vpmaddubsw pair sums are added in int16 (codes up to 63 (Q6_K) against activation codes
// within ±127 (quantize_row): each lane at most 4 · 63 · 127 = 32004 < 2^15, exact) and widened
// by vpmaddwd with the scale as the int16 pair (sc, sc) of each output's lane; the codes' offset
// (Q6_K 32, Q3_K 4) contributes -offset · sc · Σx_q of the sub-block, one vpmaddwd of the scales
// against (Σx_q, 0), and Q2_K's mins mn · Σx_q the same way into their own int32 sums. Per 256
// inputs one f32 epilogue: acc += cvt(isum) · (d · d_x) (Q2_K: and cvt(imin) · (dmin · -d_x)).
// The same integers and f32 operations per output as the AVX-512 kernel, so Q6_K and Q3_K give
// the same bits on both (Q2_K's AVX-512 kernel applies its mins in f32 per sub-block).
// |Σ sc · dot| < 2^31: 16 sub-blocks · 16 inputs · 63 · 127 · 128.
template <WeightType kType>
struct K16Tile {
  // Two weight streams per thread in decode (Q6_K, 2 threads, share 0.54/0.58/0.51 ->
  // 0.59/0.61/0.58; four: 0.59/0.54/0.63).
  static constexpr int kDecodePanels = 2;
  template <int R, int P>
  static void run(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t r0,
                  int64_t j0, int num_cols, int64_t step) {
    // log2 of the code offset (Q6_K 32, Q3_K 4; Q2_K has mins instead).
    constexpr int kOffsetShift = kType == WeightType::kQ6_K ? 5 : kType == WeightType::kQ3_K ? 2 : 0;
    constexpr bool kMin = kType == WeightType::kQ2_K;
    const int64_t block_bytes = w.k16_block_bytes();
    const int64_t panel0 = j0 / kQ8Panel;
    const uint8_t* codes[P];
    for (int p = 0; p < P; ++p) codes[p] = w.k16_panel(panel0 + p * step);
    __m256 acc[R][P][2];
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < w.n_in / 256; ++g) {
      __m256i isum[R][P][2];
      __m256i imin[R][P][2];
      for (int r = 0; r < R; ++r) {
        for (int p = 0; p < P; ++p) {
          isum[r][p][0] = isum[r][p][1] = _mm256_setzero_si256();
          if constexpr (kMin) imin[r][p][0] = imin[r][p][1] = _mm256_setzero_si256();
        }
      }
      for (int64_t blk = g * 8; blk < g * 8 + 8; ++blk) {
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const uint8_t* scales = w.k16_panel_scales(panel0 + p * step, g);
          const uint8_t* block = codes[p] + blk * block_bytes;
          for (int64_t line = 0; line < block_bytes / 64; ++line) {
            prefetch_l1(reinterpret_cast<const char*>(block) + 2048 + line * 64);
          }
          for (int half = 0; half < 2; ++half) {
            const int64_t sub = (blk % 8) * 2 + half;
            // Row j's scale as the int16 pair (sc, sc) of its lane, and as (sc, sign) for the
            // offset or min term against (Σx_q, 0).
            __m256i sc[2];
            __m256i sc_lo[2];
            for (int h = 0; h < 2; ++h) {
              if constexpr (kMin) {
                const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                    reinterpret_cast<const __m128i*>(scales + detail::kQ2KScOffset +
                                                     sub * kQ8Panel + 8 * h)));
                const __m256i low = _mm256_and_si256(s, _mm256_set1_epi32(0xF));
                sc[h] = _mm256_or_si256(low, _mm256_slli_epi32(low, 16));
                sc_lo[h] = _mm256_srli_epi32(s, 4);  // the min
              } else {
                sc_lo[h] = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(
                    scales + detail::kQ6KScOffset + sub * kQ8Panel + 8 * h)));
                sc[h] = _mm256_blend_epi16(sc_lo[h], _mm256_slli_epi32(sc_lo[h], 16), 0xAA);
              }
            }
            for (int r = 0; r < R; ++r) {
              const int32_t lo_sum = xq.sum_lo(r0 + r)[blk];
              const int32_t sum16 = half == 0 ? lo_sum : xq.sum(r0 + r)[blk] - lo_sum;
              const __m256i s16 = _mm256_set1_epi32(sum16 & 0xFFFF);  // (Σx_q, 0)
              for (int h = 0; h < 2; ++h) {
                const __m256i term = _mm256_madd_epi16(sc_lo[h], s16);
                if constexpr (kMin) {
                  imin[r][p][h] = _mm256_add_epi32(imin[r][p][h], term);
                } else {
                  isum[r][p][h] =
                      _mm256_sub_epi32(isum[r][p][h], _mm256_slli_epi32(term, kOffsetShift));
                }
              }
            }
            for (int pair = 0; pair < 2; ++pair) {
              __m256i qa[2];
              __m256i qb[2];
              for (int h = 0; h < 2; ++h) k16_quads<kType>(block, half, pair, h, qa[h], qb[h]);
              for (int r = 0; r < R; ++r) {
                int32_t quads[2];
                std::memcpy(quads, xq.xq(r0 + r) + blk * 32 + half * 16 + pair * 8, sizeof(quads));
                const __m256i xa = _mm256_set1_epi32(quads[0]);
                const __m256i xb = _mm256_set1_epi32(quads[1]);
                for (int h = 0; h < 2; ++h) {
                  const __m256i pa = _mm256_maddubs_epi16(qa[h], xa);
                  const __m256i pb = _mm256_maddubs_epi16(qb[h], xb);
                  isum[r][p][h] = _mm256_add_epi32(
                      isum[r][p][h], _mm256_madd_epi16(_mm256_add_epi16(pa, pb), sc[h]));
                }
              }
            }
          }
        }
      }
      for (int p = 0; p < P; ++p) {
        const uint8_t* scales = w.k16_panel_scales(panel0 + p * step, g);
        for (int h = 0; h < 2; ++h) {
          const __m256 d =
              _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)));
          __m256 dmin = _mm256_setzero_ps();
          if constexpr (kMin) {
            dmin = _mm256_cvtph_ps(_mm_load_si128(
                reinterpret_cast<const __m128i*>(scales + detail::kQ2KDminOffset + 16 * h)));
          }
          for (int r = 0; r < R; ++r) {
            const float dx = xq.xd(r0 + r)[g * 8];  // one scale per 256 (activation_group)
            acc[r][p][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][p][h]),
                                           _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[r][p][h]);
            if constexpr (kMin) {
              acc[r][p][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[r][p][h]),
                                             _mm256_mul_ps(dmin, _mm256_set1_ps(-dx)),
                                             acc[r][p][h]);
            }
          }
        }
      }
    }
    store_panels<R, P>(y, acc, w.n_out, r0, j0, num_cols, step);
  }
};

// Q4_0 / Q4_1 / IQ4_NL / Q5_0 / Q5_1 panels: Q4_K's nibble loop with one d (and m) per row and 32-block;
// Q4_0's -8 offset starts each block's dot from -8 · Σ x_q. IQ4_NL's codebook values (vpshufb)
// are signed: they go through the sign trick, each half widened on its own (2 · 127 · 127).
// Q5_0 / Q5_1 add Q5_K's fifth bits (Q5_0's offset is -16).
template <WeightType kType>
struct LegacyTile {
  static constexpr int kDecodePanels = 1;  // not measured with more
  template <int R, int P>
  static void run(float* y, const Q8Activations& xq, const detail::PackedWeights& w, int64_t r0,
                  int64_t j0, int num_cols, int64_t step) {
    constexpr bool kMin = kType == WeightType::kQ4_1 || kType == WeightType::kQ5_1;
    constexpr bool kLut = kType == WeightType::kIQ4_NL;
    constexpr bool kFive = kType == WeightType::kQ5_0 || kType == WeightType::kQ5_1;
    constexpr int kOffset = kFive ? 16 : 8;
    constexpr int64_t kBlockBytes = kFive ? 320 : 256;
    const __m256i table = iq4_table();
    const __m256i ones[2] = {_mm256_set1_epi16(1), _mm256_set1_epi16(1)};
    const int64_t panel0 = j0 / kQ8Panel;
    const uint8_t* codes[P];
    for (int p = 0; p < P; ++p) codes[p] = w.nibble_panel(panel0 + p * step);
    __m256 acc[R][P][2];
    for (int r = 0; r < R; ++r) {
      for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
    }
    for (int64_t blk = 0; blk < w.n_in / 32; ++blk) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        __m256i dot[R][2];
        for (int r = 0; r < R; ++r) {
          dot[r][0] = dot[r][1] = kMin || kLut
                                      ? _mm256_setzero_si256()
                                      : _mm256_set1_epi32(-kOffset * xq.sum(r0 + r)[blk]);
        }
        dot_nibble_block<R, kFive, kLut>(dot, codes[p] + blk * kBlockBytes, xq, r0, blk, table,
                                         ones);
        const uint16_t* scales = w.q4_panel_scales(panel0 + p * step, blk);
        __m256 wd[2];
        __m256 wm[2];
        for (int h = 0; h < 2; ++h) {
          wd[h] =
              _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + 8 * h)));
          if constexpr (kMin) {
            wm[h] = _mm256_cvtph_ps(
                _mm_load_si128(reinterpret_cast<const __m128i*>(scales + kQ8Panel + 8 * h)));
          }
        }
        for (int r = 0; r < R; ++r) {
          const float dx = xq.xd(r0 + r)[blk];
          const __m256 vdx = _mm256_set1_ps(dx);
          for (int h = 0; h < 2; ++h) {
            acc[r][p][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][h]),
                                           _mm256_mul_ps(wd[h], vdx), acc[r][p][h]);
            if constexpr (kMin) {
              acc[r][p][h] = _mm256_fmadd_ps(
                  wm[h], _mm256_set1_ps(dx * static_cast<float>(xq.sum(r0 + r)[blk])),
                  acc[r][p][h]);
            }
          }
        }
      }
    }
    store_panels<R, P>(y, acc, w.n_out, r0, j0, num_cols, step);
  }
};

// Quantizes x, then runs Tile's tiles: decode (m = 1) Tile::kDecodePanels panels per tile, one
// weight stream each; m >= 2 kRows rows x one panel (compute-bound there).
template <class Tile>
void run_panels(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                void* scratch) {
  const Q8Activations xq{w.n_in, static_cast<uint8_t*>(scratch)};
  const int64_t group = detail::activation_group(w.type);
  threads::parallel_for(m, m >= 16, [&](int64_t r) {
    // A produced row is made in this thread's buffer and quantized from L1.
    quantize_row(xq, r, x.row(r), group);
    if (detail::uses_sum_quads(w.type)) detail::pack_sum_quads(xq, r);
  });
  if (m == 1) {
    // Decode: Tile::kDecodePanels weight streams per thread, spread through its slice.
    for_each_spread_tile<Tile::kDecodePanels>(w.n_out, kQ8Panel,
                                              [&](int64_t j0, int num_cols, int64_t step) {
      tile_cols<Tile, 1, Tile::kDecodePanels>(y, xq, w, 0, j0, num_cols, step);
    });
  } else {
    run_tiles<Tile, kRows, 1>(y, xq, w, m);
  }
}

}  // namespace

void gemm_q8_0(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
               void* scratch) {
  run_panels<Q8_0Tile>(y, x, m, w, scratch);
}

void gemm_q45_k(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                void* scratch) {
  switch (w.type) {
    case WeightType::kQ5_K: return run_panels<Q45KTile<WeightType::kQ5_K>>(y, x, m, w, scratch);
    case WeightType::kIQ4_XS:
      return run_panels<Q45KTile<WeightType::kIQ4_XS>>(y, x, m, w, scratch);
    default: return run_panels<Q45KTile<WeightType::kQ4_K>>(y, x, m, w, scratch);
  }
}

void gemm_k16(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
              void* scratch) {
  switch (w.type) {
    case WeightType::kQ3_K: return run_panels<K16Tile<WeightType::kQ3_K>>(y, x, m, w, scratch);
    case WeightType::kQ2_K: return run_panels<K16Tile<WeightType::kQ2_K>>(y, x, m, w, scratch);
    default: return run_panels<K16Tile<WeightType::kQ6_K>>(y, x, m, w, scratch);
  }
}

void gemm_legacy(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                 void* scratch) {
  switch (w.type) {
    case WeightType::kQ4_1: return run_panels<LegacyTile<WeightType::kQ4_1>>(y, x, m, w, scratch);
    case WeightType::kIQ4_NL:
      return run_panels<LegacyTile<WeightType::kIQ4_NL>>(y, x, m, w, scratch);
    case WeightType::kQ5_0: return run_panels<LegacyTile<WeightType::kQ5_0>>(y, x, m, w, scratch);
    case WeightType::kQ5_1: return run_panels<LegacyTile<WeightType::kQ5_1>>(y, x, m, w, scratch);
    default: return run_panels<LegacyTile<WeightType::kQ4_0>>(y, x, m, w, scratch);
  }
}

}  // namespace vellum::kernels::avx2
