// Dense matrix products with weights prepared once at load (STYLE.md habit 12).
//
//   y (m, n_out) = x (m, n_in) · Wᵀ,   W stored as GGML rows (n_out rows of n_in elements).
//
// MatmulPrecision follows vLLM's --dtype: kAuto keeps the weights' own type (f32 stays f32, bf16
// runs on AMX where present, f16 and Q8_0 use their own kernels), kBF16 converts f32/f16 weights to
// bf16 once at pack time, kF32 dequantizes everything to f32.
//
// Backends (matmul.cc): small m (decode) uses Vellum's AVX-512 kernels, which read the weights
// once for up to 4 activation rows at a time; large m uses oneDNN (AMX bf16 where present). f32
// and bf16 weights then keep a second, oneDNN-blocked copy (2x their memory); Q8_0 prefill
// dequantizes slabs of rows to bf16 in scratch instead. On AVX2, f32/f16/bf16 weights run
// Vellum's AVX2 FMA kernels at every m (avx2/gemm_avx2.cc).
// Thread-safety: forward() is const but calls on one PackedLinear must not overlap (oneDNN
// primitives share a scratchpad); it parallelises internally with OpenMP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/kernels.h"

namespace vellum::kernels {

enum class MatmulPrecision : uint8_t { kAuto, kBF16, kF32 };

class PackedLinear {
 public:
  PackedLinear();
  ~PackedLinear();
  PackedLinear(PackedLinear&&) noexcept;
  PackedLinear& operator=(PackedLinear&&) noexcept;
  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  // Packs W (n_out, n_in) given in `type`. The source bytes may be unmapped after this returns.
  static PackedLinear pack(const void* w, WeightType type, int64_t n_out, int64_t n_in,
                           MatmulPrecision precision);

  // y: (m, n_out) f32, x: (m, n_in) f32; y must not alias x. scratch: scratch_bytes(m) bytes,
  // 64-byte aligned, owned by the caller (may be null when scratch_bytes(m) == 0).
  void forward(float* y, const float* x, int64_t m, void* scratch) const;
  size_t scratch_bytes(int64_t m) const;

  int64_t n_out() const;
  int64_t n_in() const;
  // Bytes of packed weights read by one forward call (for bandwidth reports).
  size_t weight_bytes() const;
  // The type the weights are held in after packing.
  WeightType packed_type() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vellum::kernels
