// A matrix product's input rows: (m, n_in) f32, given as a matrix or produced row by row by the
// op that makes them (a norm, a gated activation).
//
// Most kernels do not read f32 rows: the quantized ones quantize each row per block into int8,
// the AVX512-BF16 and oneDNN bf16 ones round it to bf16. Handed a producer, they make each row
// into a per-thread buffer and convert it while it is in L1, so the f32 matrix between the op and
// the product never goes through memory (issue 14's norm -> quantize and gate*up -> activation
// fusions). Kernels that do read f32 rows (f32, f16 and AVX2 bf16 weights, the scalar code,
// mixed-type projections) get every row produced into the caller's staging matrix first.
//
// The producer computes exactly what the unfused op would write, so fused and unfused products
// are bitwise equal.
#pragma once

#include <cstdint>
#include <functional>

namespace vellum::kernels {

// A buffer of at least n floats (64-byte aligned) owned by the calling thread, for producing one
// row; it grows as needed and is reused by the thread's later calls.
float* thread_row_buffer(int64_t n);

class InputRows {
 public:
  // Writes row r (n_in floats) to dst. Called exactly once per row (it may update state such as
  // the residual stream), from any thread, possibly for several rows at once.
  using Producer = std::function<void(int64_t r, float* dst)>;

  // The rows of a row-major (m, n_in) matrix.
  InputRows(const float* x, int64_t n_in) : x_(x), n_in_(n_in) {}
  // Rows made by `produce` (which must outlive this); `staging`, (m, n_in) floats, receives them
  // when a kernel needs the whole matrix.
  InputRows(const Producer& produce, float* staging, int64_t n_in)
      : produce_(&produce), staging_(staging), n_in_(n_in) {}

  int64_t n_in() const { return n_in_; }
  bool produced() const { return produce_ != nullptr; }

  // Row r: its place in the matrix, or the calling thread's row buffer after producing the row
  // there (valid until the thread's next row() call).
  const float* row(int64_t r) const {
    if (produce_ == nullptr) return x_ + r * n_in_;
    float* buffer = thread_row_buffer(n_in_);
    (*produce_)(r, buffer);
    return buffer;
  }
  // The whole (m, n_in) matrix: the given one, or the staging matrix after producing every row
  // into it (call it once per product).
  const float* matrix(int64_t m) const;

 private:
  const float* x_ = nullptr;
  const Producer* produce_ = nullptr;
  float* staging_ = nullptr;
  int64_t n_in_ = 0;
};

}  // namespace vellum::kernels
