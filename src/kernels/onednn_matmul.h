// oneDNN matmul for the large-m (prefill) f32 and bf16 products of PackedLinear.
//
// The weights are reordered once, at construction, into the blocked layout oneDNN prefers for
// this machine (AMX / AVX512-BF16 brgemm); primitives are created per m on first use and cached
// (creation costs ~0.1-1 ms, far more than a decode step can afford every time).
// Thread-safety: the primitive cache is mutex-protected, but executions must not overlap
// (oneDNN primitives share a scratchpad unless built for concurrent execution).
#pragma once

#include <cstdint>
#include <memory>

namespace vellum::kernels::detail {

class OnednnMatmul {
 public:
  enum class DataType { kF32, kBF16 };

  // w: (n_out, n_in) row-major in `type` (f32 or raw bf16 bits). Copies what it needs.
  OnednnMatmul(const void* w, DataType type, int64_t n_out, int64_t n_in);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;

  // y (m, n_out) f32 = x (m, n_in) · Wᵀ; x is f32 or bf16 bits, matching the weight type.
  void run(float* y, const void* x, int64_t m) const;

  size_t weight_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// bf16 GEMM on weights that change from call to call (no reorder: oneDNN packs the plain
// weights itself inside the call). Used for Q8_0 prefill, where slabs of weight rows are
// dequantized to bf16 just before the product. Primitives are cached per (m, n, k, ldy).
// Same thread-safety as OnednnMatmul.
class OnednnPlainBf16Matmul {
 public:
  OnednnPlainBf16Matmul();
  ~OnednnPlainBf16Matmul();
  OnednnPlainBf16Matmul(const OnednnPlainBf16Matmul&) = delete;
  OnednnPlainBf16Matmul& operator=(const OnednnPlainBf16Matmul&) = delete;

  // y (m, n) f32 with row stride ldy = x (m, k) bf16 · w (n, k) bf16ᵀ.
  void run(float* y, int64_t ldy, const uint16_t* x, const uint16_t* w, int64_t m, int64_t n,
           int64_t k) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Limits oneDNN to the ISA Vellum selected (call before the first primitive; later calls are
// ignored by oneDNN).
void limit_onednn_isa_once();

}  // namespace vellum::kernels::detail
