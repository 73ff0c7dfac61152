// How one rank's share of a model is cut (Megatron-style tensor parallelism, plus pipeline stages)
// and the weight slicing that cuts it, at load time, before the weights are packed, so every
// weight type is sliced the same way:
//
//   column-parallel (Q|K|V, gate|up, the LM head): each rank keeps a contiguous range of output
//     rows (its heads, its share of the FFN width, its share of the vocabulary). A GGML row is
//     independent of the others, so any type slices by rows.
//   row-parallel (attention output, down): each rank keeps a contiguous range of input columns
//     of every row and produces a partial sum that the ranks all-reduce. Quantized rows are cut
//     between whole blocks (32 or 256 elements), so the range must hold whole blocks.
//
// Pipeline stages keep a contiguous range of layers; stage 0 embeds tokens, the last one applies
// the final norm and the LM head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/io/model_config.h"
#include "model/kv_cache.h"
#include "model/model_parallel.h"
#include "model/projection.h"

namespace vellum::model {

// [begin, begin + count) of n items split into `parts` near-equal ranges (the first n % parts
// ranges one longer).
struct Range {
  int64_t begin = 0;
  int64_t count = 0;
  int64_t end() const { return begin + count; }
};
Range split_range(int64_t n, int parts, int index);

// A pipeline stage's share of the model's KV cache layout: the groups stay the model's (every
// stage receives every group's block tables), the layers are the stage's `layers` (indexed from
// 0), and only the pool slots they use are kept, renumbered in order.
KvCacheLayout stage_layout(const KvCacheLayout& full, Range layers);

// Checks that the model can be split `tp` ways by heads and FFN width and into `pp` stages;
// throws kInvalidArgument naming the sizes that would work.
void check_parallel_shape(const ModelConfig& config, int tp, int pp);

// One column-parallel part: rows [begin, begin + count) of the 2-D tensor `name`, whose full
// shape is (n_in, total_rows).
struct RowSlice {
  std::string name;
  int64_t total_rows = 0;
  int64_t begin = 0;
  int64_t count = 0;
};
// The row-concatenation of the slices as one projection (parts of one type share one product).
Projection load_row_slices(const WeightSource& file, const std::vector<RowSlice>& slices,
                           int64_t n_in, kernels::MatmulPrecision precision);
kernels::PackedLinear load_row_slices_linear(const WeightSource& file,
                                             const std::vector<RowSlice>& slices, int64_t n_in,
                                             kernels::MatmulPrecision precision);

// Row-parallel: input columns `cols` of every row of `name`, shape (n_in, n_out). Throws naming
// the tensor, its type and its block size when the range does not hold whole blocks.
// The same on raw GGML rows: (n_out, n_in) of `type` at `data`; `what` names them in errors.
kernels::PackedLinear pack_column_slice(const void* data, kernels::WeightType type, int64_t n_out,
                                       int64_t n_in, Range cols, int tp, const std::string& what,
                                       kernels::MatmulPrecision precision);
kernels::PackedLinear load_column_slice(const WeightSource& file, const std::string& name,
                                        int64_t n_out, int64_t n_in, Range cols, int tp,
                                        kernels::MatmulPrecision precision);

}  // namespace vellum::model
