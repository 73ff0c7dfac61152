// AVX2 + FMA kernels for GGML quantized weights (avx2/gemm_quant_avx2.cc, compiled with -mavx2
// -mfma -mf16c): call only when cpu::selected_isa() >= Isa::kAvx2.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/input_rows.h"
#include "kernels/packed_weights.h"

namespace vellum::kernels::avx2 {

// y (m, n_out) = x (m, n_in) · Wᵀ for every quantized type, on PackedLinear's panel layouts; x is
// quantized per 32 or 256 values (detail::activation_group) into scratch
// (detail::Q8Activations::scratch_bytes).
void gemm_quant(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                void* scratch);
// Each type's panel kernel (gemm_panels_avx2.cc); scratch: detail::Q8Activations::scratch_bytes.
void gemm_q8_0(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
               void* scratch);
void gemm_q45_k(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                void* scratch);  // Q4_K, Q5_K and IQ4_XS
void gemm_k16(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
              void* scratch);  // Q6_K, Q3_K and Q2_K
void gemm_legacy(float* y, const InputRows& x, int64_t m, const detail::PackedWeights& w,
                 void* scratch);  // Q4_0, Q4_1, IQ4_NL, Q5_0 and Q5_1

}  // namespace vellum::kernels::avx2
