// Projection: a linear layer whose output rows are the concatenation of several weight tensors
// (Q|K|V, gate|up), so that one call computes all of them.
//
// The parts become one PackedLinear (PackedLinear::pack_parts): parts that share a weight type
// are one matrix product; a file may mix types inside such a group (a Q4_K_M layer with Q4_K q/k
// and Q6_K v), and those parts keep their own type and kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/io/weight_source.h"
#include "kernels/matmul.h"

namespace vellum::model {

class Projection {
 public:
  // A part given as raw GGML rows: `rows` rows of n_in elements of `type` at `data` (e.g. one
  // expert's slice of a stacked 3-D tensor). `data` must stay valid only until from_slices returns.
  struct Slice {
    const void* data = nullptr;
    kernels::WeightType type = kernels::WeightType::kF32;
    int64_t rows = 0;
  };

  // The named 2-D tensors, each checked to be (n_in, rows[i]).
  static Projection load(const WeightSource& file, const std::vector<std::string>& names,
                         const std::vector<int64_t>& rows, int64_t n_in,
                         kernels::MatmulPrecision precision);
  static Projection from_slices(const std::vector<Slice>& slices, int64_t n_in,
                                kernels::MatmulPrecision precision);

  // y: (m, n_out) f32; x: (m, n_in) f32, not aliasing y. scratch: scratch_bytes(m) bytes,
  // 64-byte aligned.
  void forward(float* y, const float* x, int64_t m, void* scratch) const {
    linear_.forward(y, x, m, scratch);
  }
  // The same with rows that may be produced on demand (kernels/input_rows.h): the op that makes
  // them runs fused with the kernels' quantization of their input.
  void forward(float* y, const kernels::InputRows& x, int64_t m, void* scratch) const {
    linear_.forward(y, x, m, scratch);
  }
  size_t scratch_bytes(int64_t m) const { return linear_.scratch_bytes(m); }
  bool uses_onednn(int64_t m) const { return linear_.uses_onednn(m); }

  int64_t n_out() const { return linear_.n_out(); }
  int64_t n_in() const { return linear_.n_in(); }
  size_t weight_bytes() const { return linear_.weight_bytes(); }
  kernels::WeightType packed_type() const { return linear_.packed_type(); }  // of the first part

 private:
  kernels::PackedLinear linear_;
};

}  // namespace vellum::model
