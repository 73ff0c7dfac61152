// Inline AVX2 + FMA + F16C helpers shared by the files in this directory. Include only from
// translation units compiled with the AVX2 flags (../CMakeLists.txt).
//
// AVX2 has no mask registers and no masked 16-bit loads: f32 tails use vmaskmovps (which does
// not fault on masked-off lanes), f16/bf16 tails go through a small zero-filled buffer. Tails
// are at most one vector per row, so the buffer copy is off the hot path.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace vellum::kernels::avx2 {

// Below this many elements an elementwise kernel runs on the calling thread: waking the OpenMP
// team costs more than the work.
inline constexpr int64_t kMinParallelElems = 16384;

// See avx512/vec_math.h: a prefetch GCC cannot drop, into L2. The AVX2 decode GEMVs (2 threads,
// BM_DecodeShare, 2 rounds on 2026-11-28) read faster with it for the dense types (bf16, f16:
// +20 %), Q8_0 and the 4-bit nibble codes, and slower for the 5-bit codes (Q5_0, Q5_1, Q5_K:
// -15 to -30 %) and the 16-input K-quant panels (Q6_K -7 %), which keep prefetch_l1.
inline void prefetch_l2(const void* p) {
  __asm__ volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
}
// The same into L1 (_mm_prefetch with _MM_HINT_T0, which GCC dropped from the dense GEMV).
inline void prefetch_l1(const void* p) {
  __asm__ volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
}

// vmaskmovps mask of the first n lanes (n clamped to 0..8).
inline __m256i tail_mask(int64_t n) {
  const int k = n <= 0 ? 0 : (n >= 8 ? 8 : static_cast<int>(n));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m256 load_f32(const float* p, int64_t n) { return _mm256_maskload_ps(p, tail_mask(n)); }
inline void store_f32(float* p, __m256 v, int64_t n) { _mm256_maskstore_ps(p, tail_mask(n), v); }

// 8 f16 / bf16 values (bits) to f32; the _n forms read only the first n (1..8), rest zero.
inline __m128i load_u16(const uint16_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m128i load_u16(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t buf[8] = {};
  std::memcpy(buf, p, static_cast<size_t>(n < 8 ? n : 8) * sizeof(uint16_t));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
}
inline void store_u16(uint16_t* p, __m128i v, int64_t n) {
  if (n >= 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
    return;
  }
  alignas(16) uint16_t buf[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(buf), v);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(uint16_t));
}
inline __m256 f16_to_f32(__m128i h) { return _mm256_cvtph_ps(h); }
inline __m256 bf16_to_f32(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load_f16(const uint16_t* p) { return f16_to_f32(load_u16(p)); }
inline __m256 load_f16(const uint16_t* p, int64_t n) { return f16_to_f32(load_u16(p, n)); }
inline __m256 load_bf16(const uint16_t* p) { return bf16_to_f32(load_u16(p)); }
inline __m256 load_bf16(const uint16_t* p, int64_t n) { return bf16_to_f32(load_u16(p, n)); }

// f32 -> f16 bits, round to nearest even (as float_to_fp16).
inline __m128i to_f16(__m256 x) {
  return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// f32 -> bf16 bits, round to nearest even, NaN stays a quiet NaN (as float_to_bf16).
inline __m128i to_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet_nan, nan);
  // packus works within 128-bit lanes: [r0..r3 r0..r3 | r4..r7 r4..r7]; gather qwords 0 and 2.
  const __m256i packed = _mm256_packus_epi32(r, r);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
}

inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// e^x, same reduction and polynomial as avx512::exp_ps (~1.5 ulp). Without vscalefps, 2^n is
// built in the exponent field, which limits n to [-126, 127]: inputs are clamped to
// [-87.3, 88], and anything below e^-87.3 (the smallest normal float) returns 0, -inf included.
inline __m256 exp_ps(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2n = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n)));
}

// tanh(x): (1 - e^-2|x|) / (1 + e^-2|x|) with the sign put back; below |x| = 1/8, where that
// form loses relative precision to cancellation, the odd Taylor series to x^7 (error < 1e-9).
inline __m256 tanh_ps(__m256 x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_bit, x);
  const __m256 e = exp_ps(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  const __m256 x2 = _mm256_mul_ps(ax, ax);
  __m256 poly = _mm256_fmadd_ps(_mm256_set1_ps(-17.0f / 315.0f), x2, _mm256_set1_ps(2.0f / 15.0f));
  poly = _mm256_fmadd_ps(poly, x2, _mm256_set1_ps(-1.0f / 3.0f));
  poly = _mm256_fmadd_ps(_mm256_mul_ps(poly, x2), ax, ax);
  const __m256 small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.125f), _CMP_LT_OQ);
  const __m256 t = _mm256_blendv_ps(big, poly, small);
  return _mm256_or_ps(t, _mm256_and_ps(x, sign_bit));
}

}  // namespace vellum::kernels::avx2
