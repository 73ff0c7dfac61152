#include <immintrin.h>

#include "kernels/avx512/read_stream.h"

namespace vellum::kernels::avx512 {

// Four streams at quarter offsets of the slice keep more DRAM pages and prefetchers busy than
// one; the XOR-reduction keeps the loads alive without FP latency chains.
uint64_t read_stream(const uint8_t* data, size_t bytes) {
  const size_t quarter = bytes / 4 / 64 * 64;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < quarter; i += 64) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(data + i));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(data + quarter + i));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(data + 2 * quarter + i));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(data + 3 * quarter + i));
  }
  const __m512i all = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  return static_cast<uint64_t>(_mm512_reduce_or_epi64(all));
}

}  // namespace vellum::kernels::avx512
