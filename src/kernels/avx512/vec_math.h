// Inline AVX-512 helpers shared by the files in this directory. Include only from translation
// units compiled with the AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace vellum::kernels::avx512 {

// Below this many elements an elementwise kernel runs on the calling thread: waking the OpenMP
// team costs more than the work.
inline constexpr int64_t kMinParallelElems = 16384;

// Prefetch into L2 that GCC cannot drop: it deletes loops whose only statements are
// __builtin_prefetch calls (seen with GCC 12 -O2), which a prefetch-ahead loop is.
// L2 rather than L1 in every AVX-512 kernel: in paged-attention decode, T0 prefetches of whole
// tiles stalled on the L1 fill buffers (perf annotate), T1 measured ~15% faster single-threaded;
// in the decode GEMVs (1 KB ahead in each weight stream, 2 threads, BM_DecodeShare, 2 rounds on
// 2026-11-28, Zen 4 guest) T1 read 5-15 % faster than T0 for every type at the same probe
// (f16 +28 %), and the 1B model's decode went from 82-85 % to 88-92 % (Q4_K_M) and from 87-96 %
// to 96-98 % (Q8_0) of the read bandwidth measured in the same run.
inline void prefetch_l2(const void* p) {
  __asm__ volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
}

// Mask of the first n (0..16) lanes.
inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// e^x with ~1.5 ulp over the float range: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for
// e^r, then scale by 2^n with vscalefps (which also handles underflow to 0 and overflow to inf).
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // below this e^x is 0 in float anyway
  x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// tanh(x): (1 - e^-2|x|) / (1 + e^-2|x|) with the sign put back; below |x| = 1/8, where that
// form loses relative precision to cancellation, the odd Taylor series to x^7 (error < 1e-9).
inline __m512 tanh_ps(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 e = exp_ps(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 x2 = _mm512_mul_ps(ax, ax);
  __m512 poly = _mm512_fmadd_ps(_mm512_set1_ps(-17.0f / 315.0f), x2, _mm512_set1_ps(2.0f / 15.0f));
  poly = _mm512_fmadd_ps(poly, x2, _mm512_set1_ps(-1.0f / 3.0f));
  poly = _mm512_fmadd_ps(_mm512_mul_ps(poly, x2), ax, ax);
  t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.125f), _CMP_LT_OQ), poly);
  return _mm512_or_ps(t, _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));  // t >= 0: copy x's sign
}

// 16 f16 / bf16 values (bits) to f32.
inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_f16(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load_bf16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __m512 load_bf16(const uint16_t* p, __mmask16 m) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// f32 -> bf16 bits, round to nearest even, NaN stays a quiet NaN (as float_to_bf16).
inline __m256i to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}
// f32 -> f16 bits, round to nearest even.
inline __m256i to_f16(__m512 x) {
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

}  // namespace vellum::kernels::avx512
