// Unpacking GGML quantized blocks into 64-weight units for the AVX-512 kernels (header-only,
// include only from translation units compiled with the AVX-512 + VNNI flags).
//
// The quantized types without a panel layout (Q2_K, Q3_K, IQ4_XS; the others
// are repacked at load, see packed_weights.h) are read in their own GGUF layout and unpacked
// in registers into one common form, 64 consecutive weights at a time:
//   w[e] = d[e / 4] * q[e] + m[e / 4]      e = 0..63 in row order
// q: 64 unsigned bytes (the type's integer code, offset to be non-negative), d and m: one f32 per
// 4 weights (the 16 int32 lanes of a VNNI dot product), holding the sub-block scale and offset.
// Symmetric types put their zero point into m; the IQ4 codebooks are looked up
// with vpshufb and offset by 128. A dot product with activations x ≈ dx * xq is then
//   Σ w x = Σ_lanes d * dx * dpbusd(q, xq) + m * Σ_lane x.
//
// The K types and IQ4_XS form four units per 256-weight super-block ("group" = the super-block),
// whose scales are decoded once per group into State.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "kernels/quant_types.h"

namespace vellum::kernels::avx512::quant {

struct Unit {
  __m512i q;
  __m512 d;
  __m512 m;
};

inline float load_f16_scalar(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// Lanes 0-7 = a, lanes 8-15 = b.
inline __m512 halves(float a, float b) {
  return _mm512_mask_blend_ps(__mmask16(0xFF00), _mm512_set1_ps(a), _mm512_set1_ps(b));
}

// Two 32-weight blocks whose 16 bytes each hold element j in the low nibble and j + 16 in the
// high nibble, as 64 bytes in row order.
inline __m512i nibbles_2blocks(const uint8_t* qs_a, const uint8_t* qs_b) {
  const __m256i ab = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs_b)),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs_a)));
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(ab, mask);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(ab, 4), mask);
  const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // lo a, lo b, hi a, hi b
  return _mm512_shuffle_i64x2(x, x, _MM_SHUFFLE(3, 1, 2, 0));               // lo a, hi a, lo b, hi b
}

// 32 bytes of nibbles (low nibbles = the first 32 weights, high = the next 32) in row order.
inline __m512i nibbles_lo_hi(const uint8_t* qs) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m256i mask = _mm256_set1_epi8(0x0F);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, mask)),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), mask), 1);
}

// IQ4 codebook + 128, in each 128-bit lane (vpshufb looks up within lanes).
inline __m512i iq4_table() {
  alignas(16) static constexpr uint8_t kTable[16] = {
      1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable)));
}

// Index vectors for _mm512_permutexvar_ps.
struct LaneIndexTables {
  alignas(64) int32_t pairs[16][16];  // pairs[b][i] = b + i / 8: lanes 0-7 take b, 8-15 take b + 1
  alignas(64) int32_t quads[4][16];   // quads[u][i] = 4u + i / 4: four sub-blocks of 16 weights
};
inline constexpr LaneIndexTables make_lane_index_tables() {
  LaneIndexTables t{};
  for (int b = 0; b < 16; ++b) {
    for (int i = 0; i < 16; ++i) t.pairs[b][i] = (b + i / 8) & 15;
  }
  for (int u = 0; u < 4; ++u) {
    for (int i = 0; i < 16; ++i) t.quads[u][i] = 4 * u + i / 4;
  }
  return t;
}
inline constexpr LaneIndexTables kLaneIndex = make_lane_index_tables();

// Lanes 0-7 take element b, lanes 8-15 element b + 1.
inline __m512i pair_index(int b) { return _mm512_load_si512(kLaneIndex.pairs[b]); }
// Lane i takes element 4u + i / 4.
inline __m512i quad_index(int u) { return _mm512_load_si512(kLaneIndex.quads[u]); }

// ---- Super-block types: four units per 256 weights -------------------------------------------

template <class Block>
struct SuperBase {
  static constexpr int kGroupElems = kQK_K;
  static constexpr int kUnits = 4;
  static constexpr size_t kGroupBytes = sizeof(Block);
  static const Block* block(const uint8_t* row, int64_t g) {
    return reinterpret_cast<const Block*>(row) + g;
  }
};

// Q4_K / Q5_K scales: [d * scale_0..7, -dmin * min_0..7].
inline __m512 k4_scales(const uint8_t* packed, float d, float dmin) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f;
  constexpr uint32_t kmask2 = 0x0f0f0f0f;
  constexpr uint32_t kmask3 = 0x03030303;
  uint32_t utmp[4];
  std::memcpy(utmp, packed, kKScaleBytes);
  utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
  const uint32_t uaux = utmp[1] & kmask1;
  utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
  utmp[2] = uaux;
  utmp[0] &= kmask1;
  const __m512 v = _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(utmp))));
  return _mm512_mul_ps(v, halves(d, -dmin));
}

// Q2_K and Q3_K: the 2 low bits of the unit's 64 weights, from the 32 bytes of its half-block.
inline __m512i two_bit_codes(const uint8_t* qs32, int u) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs32));
  const int shift = (u % 2) * 4;
  const __m512i x = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_srli_epi16(v, static_cast<unsigned>(shift))),
      _mm256_srli_epi16(v, static_cast<unsigned>(shift + 2)), 1);
  return _mm512_and_si512(x, _mm512_set1_epi8(0x03));
}

struct Q3_K : SuperBase<BlockQ3_K> {
  struct State {
    __m512 scales;  // d * (scale - 32) of the 16 sub-blocks
  };
  static State load(const uint8_t* row, int64_t g, bool) {
    const BlockQ3_K* b = block(row, g);
    alignas(16) int8_t sc[16];
    q3_k_scales(b->scales, sc);
    const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(
        _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc))),
        _mm512_set1_epi32(32)));
    return {_mm512_mul_ps(v, _mm512_set1_ps(load_f16_scalar(&b->d)))};
  }
  static Unit unit(const State& s, const uint8_t* row, int64_t g, int u, bool) {
    const BlockQ3_K* b = block(row, g);
    const int half = u / 2;
    const int j0 = 2 * (u % 2);
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->hmask));
    const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(hm), hm, 1);
    const __m512i select = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << (4 * half + j0)))),
        _mm256_set1_epi8(static_cast<char>(1 << (4 * half + j0 + 1))), 1);
    const __mmask64 high = _mm512_test_epi8_mask(hh, select);
    const __m512i q = _mm512_or_si512(two_bit_codes(b->qs + 32 * half, u),
                                      _mm512_maskz_mov_epi8(high, _mm512_set1_epi8(0x04)));
    const __m512 d = _mm512_permutexvar_ps(quad_index(u), s.scales);
    return {q, d, _mm512_mul_ps(d, _mm512_set1_ps(-4.0f))};
  }
};

struct Q2_K : SuperBase<BlockQ2_K> {
  struct State {
    __m512 scales;  // d * scale of the 16 sub-blocks
    __m512 mins;    // -dmin * min
  };
  static State load(const uint8_t* row, int64_t g, bool) {
    const BlockQ2_K* b = block(row, g);
    const __m512i sc =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    const __m512 scale = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(0xF)));
    const __m512 min = _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4));
    return {_mm512_mul_ps(scale, _mm512_set1_ps(load_f16_scalar(&b->d))),
            _mm512_mul_ps(min, _mm512_set1_ps(-load_f16_scalar(&b->dmin)))};
  }
  static Unit unit(const State& s, const uint8_t* row, int64_t g, int u, bool) {
    const BlockQ2_K* b = block(row, g);
    const __m512i index = quad_index(u);
    return {two_bit_codes(b->qs + 32 * (u / 2), u), _mm512_permutexvar_ps(index, s.scales),
            _mm512_permutexvar_ps(index, s.mins)};
  }
};

struct IQ4_XS : SuperBase<BlockIQ4_XS> {
  struct State {
    __m512 scales;  // d * (scale - 32) of the 8 sub-blocks (lanes 0-7)
  };
  static State load(const uint8_t* row, int64_t g, bool) {
    const BlockIQ4_XS* b = block(row, g);
    alignas(64) float sc[16] = {};
    const float d = load_f16_scalar(&b->d);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                     (((b->scales_h >> 2 * ib) & 3) << 4);
      sc[ib] = d * static_cast<float>(ls - 32);
    }
    return {_mm512_load_ps(sc)};
  }
  static Unit unit(const State& s, const uint8_t* row, int64_t g, int u, bool) {
    const BlockIQ4_XS* b = block(row, g);
    const __m512 d = _mm512_permutexvar_ps(pair_index(2 * u), s.scales);
    return {_mm512_shuffle_epi8(iq4_table(), nibbles_2blocks(b->qs + 32 * u, b->qs + 32 * u + 16)),
            d, _mm512_mul_ps(d, _mm512_set1_ps(-128.0f))};
  }
};

}  // namespace vellum::kernels::avx512::quant
