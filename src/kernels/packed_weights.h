// The private layout of PackedLinear's weights, shared by its scalar and ISA backends.
//
// The layout does not depend on the ISA, so a PackedLinear packed under one ISA runs under any
// other (tests switch ISAs with cpu::set_isa_override).
//   kF32 / kF16 / kBF16 and the other quantized types: GGML rows, (n_out, n_in) row-major,
//          copied as is (row_bytes each).
//   kQ8_0: qs (n_out, k_pad) uint8 holding w_q + 128, zero weights (128) in the padding, and
//          scales (n_out, k_pad / 32) f16. k_pad = n_in rounded up to 64 so that one 512-bit
//          load covers two whole blocks; the +128 offset lets VNNI's unsigned×signed dot take
//          the weights as the unsigned side without a per-load sign fix (see gemm_q8_0_avx512.cc).
#pragma once

#include <cstdint>

#include "common/aligned_buffer.h"
#include "kernels/kernels.h"

namespace vellum::kernels::detail {

inline constexpr int64_t kQ8PadK = 64;

struct PackedWeights {
  WeightType type = WeightType::kF32;
  int64_t n_out = 0;
  int64_t n_in = 0;
  int64_t k_pad = 0;     // kQ8_0 only: row length of qs
  size_t row_bytes = 0;  // bytes of one row of `data`
  AlignedBuffer data;    // rows (see above)
  AlignedBuffer scales;  // kQ8_0 only

  const uint8_t* q8_row(int64_t j) const { return data.as<uint8_t>() + j * k_pad; }
  const uint16_t* q8_scales(int64_t j) const { return scales.as<uint16_t>() + j * (k_pad / 32); }
};

// y (m, n_out) = x (m, n_in) · Wᵀ on the packed layout, scalar code (Isa::kScalar, and
// the types that have no kernel for the selected ISA).
void gemm_scalar(float* y, const float* x, int64_t m, const PackedWeights& w);

}  // namespace vellum::kernels::detail
