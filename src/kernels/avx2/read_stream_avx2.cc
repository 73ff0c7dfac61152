#include <immintrin.h>

#include "kernels/avx2/avx2_kernels.h"

namespace vellum::kernels::avx2 {

// avx512/read_stream_avx512.cc's pattern on 256-bit loads: eight streams, each prefetched into
// L2 2 KB ahead.
uint64_t read_stream(const uint8_t* data, size_t bytes) {
  constexpr int kStreams = 8;
  constexpr size_t kAhead = 2048;
  const size_t part = bytes / kStreams / 64 * 64;
  __m256i acc[kStreams];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (size_t i = 0; i < part; i += 64) {
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) {
      const uint8_t* p = data + static_cast<size_t>(s) * part + i;
      _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead, _MM_HINT_T1);
      const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
      const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32));
      acc[s] = _mm256_xor_si256(acc[s], _mm256_xor_si256(lo, hi));
    }
  }
  __m256i all = acc[0];
  for (int s = 1; s < kStreams; ++s) all = _mm256_xor_si256(all, acc[s]);
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), all);
  return lanes[0] | lanes[1] | lanes[2] | lanes[3];
}

}  // namespace vellum::kernels::avx2
