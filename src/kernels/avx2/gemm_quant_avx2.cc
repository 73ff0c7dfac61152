// GGML quantized weights (every quantized type but Q8_0: gemm_panels_avx2.cc) with
// AVX2 + FMA, for CPUs without AVX512-VNNI (AVX2-only laptops and desktops, AMD Zen 2/3,
// AVX-512 CPUs without VNNI).
//
// The same scheme as avx512/gemm_quant_avx512.cc on 256-bit vectors: activations quantized per
// 32 values (Q8_0 style) with per-lane (4 values) d_x and d_x Σ codes; each 32-weight unit of a
// weight row unpacked in registers into codes q and per-lane d_w, m_w; integer dot products with
// vpmaddubsw + vpmaddwd. vpmaddubsw saturates at 16 bits, so codes must be small unsigned values
// (<= 6 bits: 2 · 63 · 127 fits) or signed values used through the sign trick
// (|q| · sign(x, q), |q| <= 127), which is how the IQ4 codebook's 8-bit values run.
// Q4_K, Q5_K and Q6_K take a faster path: activations per 256 and integer sub-block scales.
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

// 32 bits to 32 bytes: 0xFF where the bit is set.
__m256i bytes_from_bits(uint32_t bits) {
  const __m256i shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                            0x0101010101010101, 0x0000000000000000);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuffle);
  v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

__m256i iq4_signed(__m256i nib) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nib);
}

// ---- Per type: units of 32 weights; State holds a group's decoded scales. ---------------------

template <class Block>
struct Blocks32 {
  static constexpr int kGroupElems = 32;
  static constexpr int kUnits = 1;
  static constexpr bool kSigned = false;
  struct State {};
  static const Block* block(const detail::PackedWeights& w, int64_t j, int64_t g) {
    return reinterpret_cast<const Block*>(w.data.as<uint8_t>() + j * w.row_bytes) + g;
  }
  static State load(const detail::PackedWeights&, int64_t, int64_t) { return {}; }
};

struct Q4_0 : Blocks32<BlockQ4_0> {
  static Unit unit(const State&, const detail::PackedWeights& w, int64_t j, int64_t g, int) {
    const BlockQ4_0* b = block(w, j, g);
    const float d = f16(&b->d);
    return {nibbles(b->qs), _mm256_set1_ps(d), _mm256_set1_ps(-8.0f * d)};
  }
};
struct Q4_1 : Blocks32<BlockQ4_1> {
  static Unit unit(const State&, const detail::PackedWeights& w, int64_t j, int64_t g, int) {
    const BlockQ4_1* b = block(w, j, g);
    return {nibbles(b->qs), _mm256_set1_ps(f16(&b->d)), _mm256_set1_ps(f16(&b->m))};
  }
};
template <class Block>
__m256i q5_codes(const Block* b) {
  uint32_t qh;
  std::memcpy(&qh, b->qh, 4);
  return _mm256_or_si256(nibbles(b->qs),
                         _mm256_and_si256(bytes_from_bits(qh), _mm256_set1_epi8(0x10)));
}
struct Q5_0 : Blocks32<BlockQ5_0> {
  static Unit unit(const State&, const detail::PackedWeights& w, int64_t j, int64_t g, int) {
    const BlockQ5_0* b = block(w, j, g);
    const float d = f16(&b->d);
    return {q5_codes(b), _mm256_set1_ps(d), _mm256_set1_ps(-16.0f * d)};
  }
};
struct Q5_1 : Blocks32<BlockQ5_1> {
  static Unit unit(const State&, const detail::PackedWeights& w, int64_t j, int64_t g, int) {
    const BlockQ5_1* b = block(w, j, g);
    return {q5_codes(b), _mm256_set1_ps(f16(&b->d)), _mm256_set1_ps(f16(&b->m))};
  }
};
struct IQ4_NL : Blocks32<BlockIQ4_NL> {
  static constexpr bool kSigned = true;
  static Unit unit(const State&, const detail::PackedWeights& w, int64_t j, int64_t g, int) {
    const BlockIQ4_NL* b = block(w, j, g);
    return {iq4_signed(nibbles(b->qs)), _mm256_set1_ps(f16(&b->d)), _mm256_setzero_ps()};
  }
};
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

// ---- Q4_K, Q5_K, Q6_K: activations per 256, integer sub-block scales ---------------------------
//
// As avx512/gemm_qk_avx512.cc: inside a super-block, vpmaddubsw then vpmaddwd with the 16-bit
// sub-block scale accumulates int32 lanes already weighted by their sub-block; one float
// multiply-add per super-block applies d_w · d_x, and the mins / offsets use the sums of each 16
// activation codes. Each 256-bit vector is one 32-weight sub-block in row order (Q4_K's low
// nibbles of 32 bytes are one sub-block, the high nibbles the next), so the activations stay in
// row order.

// Per activation row: xq (k int8), xd (k / 256 f32), bsum (k / 16 int16).
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

void quantize_row_k(const QuantizedXK& q, int64_t r, const float* x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t g = 0; g < q.k / kQK_K; ++g) {
    const float* xg = x + g * kQK_K;
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < kQK_K; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xg + i)));
    const float d = hmax(amax) / 127.0f;
    q.xd(r)[g] = d;
    const __m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    int8_t* dst = q.xq(r) + g * kQK_K;
    for (int i = 0; i < kQK_K; i += 32) {
      __m256i qi[4];
      for (int j = 0; j < 4; ++j) {
        qi[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xg + i + 8 * j), id),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
      bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bytes);
      // Sums of each 16 codes.
      const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
      const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));  // 8 sums of 4
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s32);
      q.bsum(r)[g * 16 + i / 16] = static_cast<int16_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
      q.bsum(r)[g * 16 + i / 16 + 1] = static_cast<int16_t>(lanes[4] + lanes[5] + lanes[6] + lanes[7]);
    }
  }
}

template <class Block>
struct QkK45 {
  static constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  template <int R>
  static void group(const uint8_t* row, int64_t g, const QuantizedXK& xq, int64_t r0, __m256 (&acc)[R]) {
    const auto* b = reinterpret_cast<const Block*>(row) + g;
    constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    alignas(16) uint32_t utmp[4];
    std::memcpy(utmp, b->scales, kKScaleBytes);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    const auto* sc = reinterpret_cast<const uint8_t*>(utmp);  // 8 scales, then 8 mins
    const __m128i pairs = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __m256i mins16 = _mm256_cvtepu8_epi16(
        _mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(utmp)), pairs));
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    const __m256i nib = _mm256_set1_epi8(0x0F);
    __m256i qh;
    if constexpr (kFifthBit) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh));
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * k));
      __m256i lo = _mm256_and_si256(v, nib);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
      if constexpr (kFifthBit) {
        const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * k)));
        const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1)));
        const __m256i sixteen = _mm256_set1_epi8(0x10);
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_lo), bit_lo), sixteen));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_hi), bit_hi), sixteen));
      }
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * k]);
      const __m256i s_hi = _mm256_set1_epi16(sc[2 * k + 1]);
      for (int r = 0; r < R; ++r) {
        const int8_t* x = xq.xq(r0 + r) + g * kQK_K + 64 * k;
        const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
        const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32)));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo),
                                                             _mm256_madd_epi16(p_hi, s_hi)));
      }
    }
    const float d = f16(&b->d);
    const float dmin = f16(&b->dmin);
    for (int r = 0; r < R; ++r) {
      const float dx = xq.xd(r0 + r)[g];
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.bsum(r0 + r) + 16 * g));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * dx), acc[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mins16, bs)),
                               _mm256_set1_ps(-dmin * dx), acc[r]);
    }
  }
};

struct QkQ6K {
  template <int R>
  static void group(const uint8_t* row, int64_t g, const QuantizedXK& xq, int64_t r0, __m256 (&acc)[R]) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(row) + g;
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i two = _mm256_set1_epi8(0x03);
    for (int half = 0; half < 2; ++half) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * half));
      for (int quadrant = 0; quadrant < 4; ++quadrant) {
        const __m256i ql = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(b->ql + 64 * half + 32 * (quadrant % 2)));
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (quadrant / 2)), nib);
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * quadrant), two), 4);
        const __m256i q = _mm256_or_si256(low, high);
        const int sub = 8 * half + 2 * quadrant;
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(b->scales[sub + 1]), _mm_set1_epi16(b->scales[sub]));
        for (int r = 0; r < R; ++r) {
          const int8_t* x = xq.xq(r0 + r) + g * kQK_K + 128 * half + 32 * quadrant;
          const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, s));
        }
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    const float d = f16(&b->d);
    for (int r = 0; r < R; ++r) {
      // Codes are q + 32: subtract 32 · Σ_sub scale · (sum of the sub-block's 16 codes).
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.bsum(r0 + r) + 16 * g));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum[r], offset)),
                               _mm256_set1_ps(d * xq.xd(r0 + r)[g]), acc[r]);
    }
  }
};

template <class T, int R>
void qk_tile(float* y, const QuantizedXK& xq, const detail::PackedWeights& w, int64_t r0, int64_t j0,
             int num_cols) {
  const int64_t num_groups = w.n_in / kQK_K;
  const size_t block_bytes = w.row_bytes / static_cast<size_t>(num_groups);
  for (int c = 0; c < num_cols; ++c) {
    const uint8_t* row = w.data.as<uint8_t>() + (j0 + c) * w.row_bytes;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < num_groups; ++g) {
      const char* next = reinterpret_cast<const char*>(row + g * block_bytes) + 1024;
      _mm_prefetch(next, _MM_HINT_T0);
      _mm_prefetch(next + 64, _MM_HINT_T0);
      _mm_prefetch(next + 128, _MM_HINT_T0);
      T::template group<R>(row, g, xq, r0, acc);
    }
    for (int r = 0; r < R; ++r) y[(r0 + r) * w.n_out + j0 + c] = hsum(acc[r]);
  }
}

template <class T>
void run_qk(float* y, const QuantizedXK& xq, const detail::PackedWeights& w, int64_t m) {
  constexpr int kQkCols = 4;
  const int64_t num_col_tiles = (w.n_out + kQkCols - 1) / kQkCols;
#pragma omp parallel
  for (int64_t mb = 0; mb < m; mb += 64) {
    const int64_t m_end = std::min<int64_t>(m, mb + 64);
#pragma omp for schedule(static)
    for (int64_t jt = 0; jt < num_col_tiles; ++jt) {
      const int64_t j0 = jt * kQkCols;
      const int num_cols = static_cast<int>(std::min<int64_t>(kQkCols, w.n_out - j0));
      for (int64_t r0 = mb; r0 < m_end; r0 += 4) {
        switch (std::min<int64_t>(4, m_end - r0)) {
          case 1: qk_tile<T, 1>(y, xq, w, r0, j0, num_cols); break;
          case 2: qk_tile<T, 2>(y, xq, w, r0, j0, num_cols); break;
          case 3: qk_tile<T, 3>(y, xq, w, r0, j0, num_cols); break;
          default: qk_tile<T, 4>(y, xq, w, r0, j0, num_cols); break;
        }
      }
    }
  }
}

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
                  static_cast<size_t>(m * qk_row_bytes(round_up(n_in, kQK_K)))) + 64;
}

void gemm_quant(float* y, const float* x, int64_t m, const detail::PackedWeights& w,
                void* scratch) {
  if (w.type == WeightType::kQ8_0) return gemm_q8_0(y, x, m, w, scratch);
  if (w.type == WeightType::kQ4_K || w.type == WeightType::kQ5_K) {
    return gemm_q45_k(y, x, m, w, scratch);
  }
  if (w.type == WeightType::kQ6_K) return gemm_q6_k(y, x, m, w, scratch);
  if (w.type == WeightType::kQ4_0 || w.type == WeightType::kQ4_1) {
    return gemm_q4_legacy(y, x, m, w, scratch);
  }
  if (w.type == WeightType::kQ4_K || w.type == WeightType::kQ5_K || w.type == WeightType::kQ6_K) {
    const QuantizedXK xk{w.n_in, qk_row_bytes(w.n_in), static_cast<uint8_t*>(scratch)};
#pragma omp parallel for schedule(static) if (m >= 16)
    for (int64_t r = 0; r < m; ++r) quantize_row_k(xk, r, x + r * w.n_in);
    switch (w.type) {
      case WeightType::kQ4_K: return run_qk<QkK45<BlockQ4_K>>(y, xk, w, m);
      case WeightType::kQ5_K: return run_qk<QkK45<BlockQ5_K>>(y, xk, w, m);
      default: return run_qk<QkQ6K>(y, xk, w, m);
    }
  }
  const QuantizedX xq{round_up(w.n_in, 64), static_cast<uint8_t*>(scratch)};
#pragma omp parallel for schedule(static) if (m >= 16)
  for (int64_t r = 0; r < m; ++r) quantize_x_row(xq, r, x + r * w.n_in, w.n_in);
  switch (w.type) {
    case WeightType::kQ4_0: return run<Q4_0>(y, xq, w, m);
    case WeightType::kQ4_1: return run<Q4_1>(y, xq, w, m);
    case WeightType::kQ5_0: return run<Q5_0>(y, xq, w, m);
    case WeightType::kQ5_1: return run<Q5_1>(y, xq, w, m);
    case WeightType::kQ2_K: return run<Q2_K>(y, xq, w, m);
    case WeightType::kQ3_K: return run<Q3_K>(y, xq, w, m);
    case WeightType::kIQ4_NL: return run<IQ4_NL>(y, xq, w, m);
    case WeightType::kIQ4_XS: return run<IQ4_XS>(y, xq, w, m);
    default: break;
  }
}

}  // namespace vellum::kernels::avx2
