// The AVX2 entry point for every quantized weight type (CPUs without AVX512-VNNI: AVX2-only
// laptops and desktops, AMD Zen 2/3, AVX-512 CPUs without VNNI): each type's panel kernel in
// gemm_panels_avx2.cc.
#include "kernels/avx2/avx2_quant.h"
#include "kernels/quant_types.h"

namespace vellum::kernels::avx2 {

void gemm_quant(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                void* scratch) {
  switch (w.type) {
    case WeightType::kQ8_0: return gemm_q8_0(y, x, m, w, scratch);
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kIQ4_XS: return gemm_q45_k(y, x, m, w, scratch);
    case WeightType::kQ6_K:
    case WeightType::kQ3_K:
    case WeightType::kQ2_K: return gemm_k16(y, x, m, w, scratch);
    default: return gemm_legacy(y, x, m, w, scratch);  // Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1
  }
}

}  // namespace vellum::kernels::avx2
