// Projection: a linear layer whose output rows are the concatenation of several weight tensors
// (Q|K|V, gate|up), so that one call computes all of them.
//
// Parts that share a weight type are fused into one PackedLinear (one matrix product). A file may
// mix types inside such a group (a Q4_K_M layer with Q4_K q/k and Q6_K v); those parts run as
// separate products whose outputs are scattered into their columns.
// TODO(merge): once pack_fused_linear fuses parts of different types, load() can pass all parts
// in one call and the scatter path serves only expert slices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
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
  static Projection load(const gguf::GgufFile& file, const std::vector<std::string>& names,
                         const std::vector<int64_t>& rows, int64_t n_in,
                         kernels::MatmulPrecision precision);
  static Projection from_slices(const std::vector<Slice>& slices, int64_t n_in,
                                kernels::MatmulPrecision precision);

  // y: (m, n_out) f32; x: (m, n_in) f32, not aliasing y. scratch: scratch_bytes(m) bytes,
  // 64-byte aligned. part_out: part_out_floats(m) floats (unused when everything is fused).
  void forward(float* y, const float* x, int64_t m, void* scratch, float* part_out) const;
  size_t scratch_bytes(int64_t m) const;
  int64_t part_out_floats(int64_t m) const;

  int64_t n_out() const { return n_out_; }
  int64_t n_in() const { return n_in_; }
  size_t weight_bytes() const;
  kernels::WeightType packed_type() const;  // of the first group

 private:
  struct Group {
    kernels::PackedLinear linear;  // rows [row_offset, row_offset + linear.n_out())
    int64_t row_offset = 0;
  };
  std::vector<Group> groups_;
  int64_t n_out_ = 0;
  int64_t n_in_ = 0;
};

}  // namespace vellum::model
