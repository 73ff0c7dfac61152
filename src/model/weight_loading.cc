#include "model/weight_loading.h"

#include <fmt/ranges.h>

#include <cstring>

#include "common/check.h"
#include "kernels/quant_types.h"
#include "model/io/weight_type.h"

namespace vellum::model {

kernels::WeightType weight_type_of(const WeightSource& file, const gguf::TensorInfo& tensor) {
  if (const auto type = kernel_weight_type(tensor.type)) return *type;
  VELLUM_THROW(ErrorCode::kUnsupported,
               "{}: tensor '{}' has type {}, which this build cannot run; supported tensor types: "
               "{} (re-quantize the model to one of them)",
               file.path().string(), tensor.name, gguf::ggml_type_name(tensor.type),
               kernels::supported_weight_types_list());
}

const gguf::TensorInfo& require_tensor(const WeightSource& file, std::string_view name) {
  const gguf::TensorInfo* tensor = file.find_tensor(name);
  VELLUM_CHECK(tensor != nullptr, ErrorCode::kInvalidModel,
               "{}: required tensor '{}' is missing; the file is incomplete or not a llama-family "
               "model",
               file.path().string(), name);
  return *tensor;
}

std::vector<float> load_f32_vector(const WeightSource& file, std::string_view name,
                                   int64_t expected_size) {
  const gguf::TensorInfo& tensor = require_tensor(file, name);
  VELLUM_CHECK(tensor.num_elements() == expected_size, ErrorCode::kInvalidModel,
               "{}: tensor '{}' has {} elements, expected {}", file.path().string(), name,
               tensor.num_elements(), expected_size);
  const kernels::WeightType type = weight_type_of(file, tensor);
  std::vector<float> out(static_cast<size_t>(expected_size));
  const int32_t row = 0;
  kernels::get_rows(out.data(), tensor.data, type, expected_size, &row, 1);
  return out;
}

kernels::PackedLinear pack_fused_linear(const WeightSource& file,
                                        const std::vector<std::string>& names,
                                        const std::vector<int64_t>& expected_rows, int64_t n_in,
                                        kernels::MatmulPrecision precision) {
  VELLUM_ASSERT(!names.empty() && names.size() == expected_rows.size());
  std::vector<kernels::PackedLinear::Part> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    const gguf::TensorInfo& t = require_tensor(file, names[i]);
    VELLUM_CHECK(t.shape.size() == 2 && t.shape[0] == n_in && t.shape[1] == expected_rows[i],
                 ErrorCode::kInvalidModel,
                 "{}: tensor '{}' has shape [{}], expected [{}, {}]", file.path().string(), t.name,
                 fmt::join(t.shape, ", "), n_in, expected_rows[i]);
    const kernels::WeightType type = weight_type_of(file, t);
    VELLUM_CHECK(n_in % kernels::weight_block_elems(type) == 0, ErrorCode::kInvalidModel,
                 "{}: tensor '{}' ({}) has rows of {} elements, not a multiple of its block size "
                 "{}",
                 file.path().string(), t.name, gguf::ggml_type_name(t.type), n_in,
                 kernels::weight_block_elems(type));
    parts.push_back({t.data, type, expected_rows[i]});
  }
  return kernels::PackedLinear::pack_parts(parts, n_in, precision);
}

}  // namespace vellum::model
