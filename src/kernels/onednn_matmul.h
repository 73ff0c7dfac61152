// oneDNN matmul for the large-m (prefill) f32 and bf16 products of PackedLinear.
//
// The weights are reordered once, at construction, into the blocked layout oneDNN prefers for
// this machine (AMX / AVX512-BF16 brgemm). Primitives are made for bucketed row counts only
// (onednn_rows: m rounded up by at most 1/8), created on first use and kept, so a serving loop
// whose batch size changes every step stops creating primitives (~0.1-6 ms each, measured here)
// once it has seen each bucket: a few dozen per weight shape up to thousands of rows. Rows
// between m and the bucket are zero padding, computed and dropped. Runtime-dimension
// primitives would avoid the padding, but oneDNN 2.6 (Debian 12) answers a runtime M with its
// generic gemm:jit, which needs plain weights and ran prefill-512 at ~40 % of brgemm's rate here.
// Thread-safety: the primitive cache is mutex-protected, but executions must not overlap
// (oneDNN primitives share a scratchpad unless built for concurrent execution).
#pragma once

#include <cstdint>
#include <memory>

namespace vellum::kernels::detail {

// The row count primitives are made for when a product has m rows: m rounded up to a multiple
// of max(4, bit_floor(m) / 8), so at most 8 buckets per doubling of m and under 1/8 padding
// past 32 rows.
int64_t onednn_rows(int64_t m);

class OnednnMatmul {
 public:
  enum class DataType { kF32, kBF16 };

  // w: (n_out, n_in) row-major in `type` (f32 or raw bf16 bits). Copies what it needs.
  OnednnMatmul(const void* w, DataType type, int64_t n_out, int64_t n_in);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;

  // y (m, n_out) f32 = x (m, n_in) · Wᵀ; x is f32 or bf16 bits, matching the weight type.
  // scratch: scratch_bytes(m) bytes, 64-byte aligned (the padded rows when m is not a bucket;
  // scratch_bytes never shrinks as m grows).
  void run(float* y, const void* x, int64_t m, void* scratch) const;
  size_t scratch_bytes(int64_t m) const;

  size_t weight_bytes() const;
  // Primitives created so far (one per bucket used).
  size_t num_primitives() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// bf16 GEMM on weights that change from call to call (no reorder: oneDNN packs the plain
// weights itself inside the call). Used for Q8_0 prefill on AMX, where slabs of weight rows are
// dequantized to bf16 just before the product. Primitives are cached per (onednn_rows(m), n, k).
// Same thread-safety as OnednnMatmul.
class OnednnPlainBf16Matmul {
 public:
  OnednnPlainBf16Matmul();
  ~OnednnPlainBf16Matmul();
  OnednnPlainBf16Matmul(const OnednnPlainBf16Matmul&) = delete;
  OnednnPlainBf16Matmul& operator=(const OnednnPlainBf16Matmul&) = delete;

  // y (m, n) f32 with row stride ldy = x (m, k) bf16 · w (n, k) bf16ᵀ. x must hold
  // onednn_rows(m) rows (the caller zeroes those past m); scratch: scratch_bytes(m, n) bytes,
  // 64-byte aligned.
  void run(float* y, int64_t ldy, const uint16_t* x, const uint16_t* w, int64_t m, int64_t n,
           int64_t k, void* scratch) const;
  static size_t scratch_bytes(int64_t m, int64_t n);
  size_t num_primitives() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Limits oneDNN to the ISA Vellum selected (call before the first primitive; later calls are
// ignored by oneDNN).
void limit_onednn_isa_once();

}  // namespace vellum::kernels::detail
