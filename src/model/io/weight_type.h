// The kernel weight type of a GGUF tensor type: the types the matrix kernels run (and
// kernels::ref::dequantize_row reads), or nullopt for a type this build cannot compute with.
#pragma once

#include <optional>

#include "gguf/ggml_type.h"
#include "kernels/kernels.h"

namespace vellum::model {

inline std::optional<kernels::WeightType> kernel_weight_type(gguf::GgmlType type) {
  using gguf::GgmlType;
  using kernels::WeightType;
  switch (type) {
    case GgmlType::F32: return WeightType::kF32;
    case GgmlType::F16: return WeightType::kF16;
    case GgmlType::BF16: return WeightType::kBF16;
    case GgmlType::Q8_0: return WeightType::kQ8_0;
    case GgmlType::Q4_0: return WeightType::kQ4_0;
    case GgmlType::Q4_1: return WeightType::kQ4_1;
    case GgmlType::Q5_0: return WeightType::kQ5_0;
    case GgmlType::Q5_1: return WeightType::kQ5_1;
    case GgmlType::Q2_K: return WeightType::kQ2_K;
    case GgmlType::Q3_K: return WeightType::kQ3_K;
    case GgmlType::Q4_K: return WeightType::kQ4_K;
    case GgmlType::Q5_K: return WeightType::kQ5_K;
    case GgmlType::Q6_K: return WeightType::kQ6_K;
    case GgmlType::IQ4_NL: return WeightType::kIQ4_NL;
    case GgmlType::IQ4_XS: return WeightType::kIQ4_XS;
    default: return std::nullopt;
  }
}

}  // namespace vellum::model
