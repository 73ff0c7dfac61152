// Turning GGUF tensors into what the kernels consume: type mapping with clear errors, f32 copies of
// small vectors (norm weights), and packed (optionally fused) linear layers.
#pragma once

#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "model/io/weight_source.h"
#include "kernels/matmul.h"

namespace vellum::model {

// The kernels' weight type for a tensor, or a vellum::Error naming the tensor, its type and the
// supported types.
kernels::WeightType weight_type_of(const WeightSource& file, const gguf::TensorInfo& tensor);

// The tensor, or an error naming it and the file.
const gguf::TensorInfo& require_tensor(const WeightSource& file, std::string_view name);

// A 1-D tensor (or any tensor, flattened) converted to f32. expected_size is checked.
std::vector<float> load_f32_vector(const WeightSource& file, std::string_view name,
                                   int64_t expected_size);

// Packs the row-concatenation of several 2-D weights that share n_in into one linear layer (e.g.
// Q|K|V, gate|up), so one call serves all of them; parts of one type become one matrix product,
// parts of different types keep their own (PackedLinear::pack_parts). Each part's shape is
// checked against (n_in, expected_rows[i]).
kernels::PackedLinear pack_fused_linear(const WeightSource& file,
                                        const std::vector<std::string>& names,
                                        const std::vector<int64_t>& expected_rows, int64_t n_in,
                                        kernels::MatmulPrecision precision);

}  // namespace vellum::model
