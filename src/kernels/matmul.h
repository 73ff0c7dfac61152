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
// and bf16 weights then keep a second, oneDNN-blocked copy (2x their memory). Q8_0, Q4_K and Q6_K
// are repacked into 16-row panels at load and run int8 dot products (VNNI, or AVX2) at every m
// (on AMX machines Q8_0 switches to bf16 slabs + oneDNN above m = 64); the other quantized types
// run VNNI kernels at small m and dequantize slabs of rows to bf16 for oneDNN at large m. On
// AVX2, f32/f16/bf16 weights run Vellum's AVX2 FMA kernels at every m (avx2/gemm_avx2.cc).
// Thread-safety: forward() is const but calls on one PackedLinear must not overlap (oneDNN
// primitives share a scratchpad); it parallelises internally with OpenMP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/input_rows.h"
#include "kernels/kernels.h"

namespace vellum::kernels {

// What unquantized weights are held in: kAuto keeps the file's type; kBF16 and kF16 convert f32,
// f16 and bf16 weights to that type (quantized ones are kept); kF32 converts every weight to f32.
enum class MatmulPrecision : uint8_t { kAuto, kBF16, kF16, kF32 };

// Batch-invariant mode (--batch-invariant; vLLM's VLLM_BATCH_INVARIANT): every product runs the
// small-m kernels, whose result for a row does not depend on the other rows, so a request's
// logits are bitwise the same whatever shares its step. Large batches and prefill then forgo
// oneDNN / AMX. Process-wide; set before the engine runs.
void set_batch_invariant(bool on);
bool batch_invariant();

// The type `stored` weights are held in after packing with `precision`.
WeightType packed_weight_type(WeightType stored, MatmulPrecision precision);

// Which kernels run products with weights stored as `stored` under the selected ISA, e.g.
// "Q4_K: AVX512-VNNI (m <= 16), bf16 slabs + oneDNN (m > 16)"; for the model load log.
std::string matmul_backend(WeightType stored, MatmulPrecision precision);

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

  // One output-row block of a fused projection (e.g. Q, K, V), in its own type.
  struct Part {
    const void* w = nullptr;  // (rows, n_in) GGML rows
    WeightType type = WeightType::kF32;
    int64_t rows = 0;
  };
  // Packs the row-concatenation of `parts` (which share n_in) as one linear layer whose output is
  // [part 0 | part 1 | ...]. Parts of one type are packed as one matrix; parts of different types
  // (a Q4_K_M file's Q4_K q/k next to a Q6_K v) each keep their type and kernel, and forward()
  // runs them one after the other into their output columns.
  static PackedLinear pack_parts(const std::vector<Part>& parts, int64_t n_in,
                                 MatmulPrecision precision);

  // y: (m, n_out) f32, x: (m, n_in) f32; y must not alias x. scratch: scratch_bytes(m) bytes,
  // 64-byte aligned, owned by the caller (may be null when scratch_bytes(m) == 0).
  void forward(float* y, const float* x, int64_t m, void* scratch) const;
  // The same with the rows given as InputRows: produced rows are made one at a time and
  // quantized or rounded to bf16 from L1 by the kernels that convert their input; the others
  // produce them into the rows' staging matrix first. Bitwise the same as forward() on the
  // matrix of produced rows.
  void forward(float* y, const InputRows& rows, int64_t m, void* scratch) const;
  size_t scratch_bytes(int64_t m) const;
  // Whether forward() with m rows runs a oneDNN primitive (which must not run inside a
  // threads::run_as_team scope: it opens its own OpenMP region).
  bool uses_onednn(int64_t m) const;

  int64_t n_out() const;
  int64_t n_in() const;
  // Bytes of packed weights read by one forward call (for bandwidth reports).
  size_t weight_bytes() const;
  // The type the weights are held in after packing (of the first part, for mixed-type parts).
  WeightType packed_type() const;
  // The types of the parts, in order (one entry unless packed from parts of several types).
  std::vector<WeightType> packed_types() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vellum::kernels
