// Rotary embeddings on AVX-512. The cos/sin of a (token, pair) are computed once (scalar libm, the
// same values as the reference) into a small table per chunk of pairs and shared by every head
// of the token; the rotation itself is vectorised over the pairs.
//   normal mode: pairs are adjacent (x[2i], x[2i+1]); tables hold (c, c) and (-s, s) per pair and
//                the pair-swapped vector supplies the cross term.
//   NEOX mode:   pairs are (x[i], x[i + half]); two contiguous halves, no shuffles.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx512 {
namespace {

constexpr int64_t kPairsPerChunk = 64;  // cos/sin table size per step: 2 x 512 B on the stack

// Fills c[i], s[i] for pairs [i0, i0 + n) of a token at `position`, and zeros up to the next
// multiple of 16 (the vector loops read whole vectors of the tables).
void angles(float position, const float* inv_freq, int64_t i0, int64_t n, float* c, float* s) {
  for (int64_t i = 0; i < n; ++i) {
    const float angle = position * inv_freq[i0 + i];
    c[i] = std::cos(angle);
    s[i] = std::sin(angle);
  }
  for (int64_t i = n; i % 16 != 0; ++i) c[i] = s[i] = 0.0f;
}

template <bool kNeox>
void rope(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
          int64_t head_dim, int64_t rot_dim, const int32_t* positions, const float* inv_freq) {
  const int64_t half = rot_dim / 2;
  const bool parallel = num_tokens > 1 && num_tokens * num_heads * rot_dim >= kMinParallelElems;
  threads::parallel_for(num_tokens, parallel, [&](int64_t t) {
    float* xt = x + t * token_stride;  // (num_heads, head_dim)
    const auto position = static_cast<float>(positions[t]);
    for (int64_t i0 = 0; i0 < half; i0 += kPairsPerChunk) {
      const int64_t n = std::min(kPairsPerChunk, half - i0);
      alignas(64) float c[kPairsPerChunk];
      alignas(64) float s[kPairsPerChunk];
      angles(position, inv_freq, i0, n, c, s);
      if constexpr (kNeox) {
        for (int64_t h = 0; h < num_heads; ++h) {
          float* a = xt + h * head_dim + i0;  // first halves of the pairs
          float* b = a + half;                // second halves
          for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 m = tail_mask(n - i);
            const __m512 cv = _mm512_load_ps(c + i);
            const __m512 sv = _mm512_load_ps(s + i);
            const __m512 av = _mm512_maskz_loadu_ps(m, a + i);
            const __m512 bv = _mm512_maskz_loadu_ps(m, b + i);
            _mm512_mask_storeu_ps(a + i, m, _mm512_fmsub_ps(av, cv, _mm512_mul_ps(bv, sv)));
            _mm512_mask_storeu_ps(b + i, m, _mm512_fmadd_ps(av, sv, _mm512_mul_ps(bv, cv)));
          }
        }
      } else {
        alignas(64) float cc[2 * kPairsPerChunk];  // (c0, c0, c1, c1, ...)
        alignas(64) float ss[2 * kPairsPerChunk];  // (-s0, s0, -s1, s1, ...)
        for (int64_t i = 0; i < n; ++i) {
          cc[2 * i] = cc[2 * i + 1] = c[i];
          ss[2 * i] = -s[i];
          ss[2 * i + 1] = s[i];
        }
        for (int64_t i = 2 * n; i % 16 != 0; ++i) cc[i] = ss[i] = 0.0f;
        for (int64_t h = 0; h < num_heads; ++h) {
          float* xp = xt + h * head_dim + 2 * i0;  // (n, 2) pairs
          for (int64_t i = 0; i < 2 * n; i += 16) {
            const __mmask16 m = tail_mask(2 * n - i);
            const __m512 v = _mm512_maskz_loadu_ps(m, xp + i);
            const __m512 swapped = _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1));
            const __m512 r = _mm512_fmadd_ps(v, _mm512_load_ps(cc + i),
                                             _mm512_mul_ps(swapped, _mm512_load_ps(ss + i)));
            _mm512_mask_storeu_ps(xp + i, m, r);
          }
        }
      }
    }
  });
}

}  // namespace

void rope_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                  int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                  const float* inv_freq) {
  rope<false>(x, token_stride, num_tokens, num_heads, head_dim, rot_dim, positions, inv_freq);
}

void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq) {
  rope<true>(x, token_stride, num_tokens, num_heads, head_dim, rot_dim, positions, inv_freq);
}

}  // namespace vellum::kernels::avx512
