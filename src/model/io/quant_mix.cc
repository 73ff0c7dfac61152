#include "model/io/quant_mix.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;

constexpr QuantPreset kPresets[] = {
    {"f32", GgmlType::F32, QuantMix::kPure, 0},
    {"f16", GgmlType::F16, QuantMix::kPure, 1},
    {"bf16", GgmlType::BF16, QuantMix::kPure, 32},
    {"q8_0", GgmlType::Q8_0, QuantMix::kPure, 7},
    {"q4_0", GgmlType::Q4_0, QuantMix::kPure, 2},
    {"q4_1", GgmlType::Q4_1, QuantMix::kPure, 3},
    {"q5_0", GgmlType::Q5_0, QuantMix::kPure, 8},
    {"q5_1", GgmlType::Q5_1, QuantMix::kPure, 9},
    {"q3_k", GgmlType::Q3_K, QuantMix::kPure, 11},
    {"q4_k", GgmlType::Q4_K, QuantMix::kPure, 14},
    {"q5_k", GgmlType::Q5_K, QuantMix::kPure, 16},
    {"q6_k", GgmlType::Q6_K, QuantMix::kPure, 18},
    {"iq4_nl", GgmlType::IQ4_NL, QuantMix::kPure, 25},
    {"iq4_xs", GgmlType::IQ4_XS, QuantMix::kPure, 30},
    {"q2_k", GgmlType::Q2_K, QuantMix::kQ2_K, 10},
    {"q3_k_m", GgmlType::Q3_K, QuantMix::kQ3_K_M, 12},
    {"q4_k_m", GgmlType::Q4_K, QuantMix::kQ4_K_M, 15},
    {"q5_k_m", GgmlType::Q5_K, QuantMix::kQ5_K_M, 17},
};

// llama.cpp's choice of the layers that get more bits: the first and last eighth and every
// third layer in between.
bool use_more_bits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 ||
         (layer - num_layers / 8) % 3 == 2;
}

GgmlType mix_type(const QuantPreset& preset, const TensorSite& s) {
  const GgmlType base = preset.base;
  if (s.role == TensorRole::kOutput || (s.tied_embeddings && s.role == TensorRole::kTokenEmbd)) {
    return s.row_size % gguf::ggml_block_size(base) != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
  }
  switch (s.role) {
    case TensorRole::kAttnV:
      switch (preset.mix) {
        case QuantMix::kQ2_K: return s.gqa_ratio >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
        case QuantMix::kQ3_K_M: return s.layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
        case QuantMix::kQ4_K_M:
        case QuantMix::kQ5_K_M: return use_more_bits(s.layer, s.num_layers) ? GgmlType::Q6_K : base;
        case QuantMix::kPure: return base;
      }
      return base;
    case TensorRole::kFfnDown:
      switch (preset.mix) {
        case QuantMix::kQ2_K: return GgmlType::Q3_K;
        // llama-quantize: Q5_K below n/16, else Q4_K for every architecture but Falcon.
        case QuantMix::kQ3_K_M: return s.layer < s.num_layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
        case QuantMix::kQ4_K_M:
        case QuantMix::kQ5_K_M: return use_more_bits(s.layer, s.num_layers) ? GgmlType::Q6_K : base;
        case QuantMix::kPure: return base;
      }
      return base;
    case TensorRole::kAttnOutput:
      if (preset.mix == QuantMix::kQ2_K) return GgmlType::Q3_K;
      if (preset.mix == QuantMix::kQ3_K_M) return GgmlType::Q4_K;
      return base;
    default:
      return base;
  }
}

// llama-quantize's tensor_type_fallback: a type whose block does not divide the rows.
GgmlType fallback(GgmlType type, int64_t row_size) {
  if (row_size % gguf::ggml_block_size(type) == 0) return type;
  GgmlType replacement;
  switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: replacement = GgmlType::Q4_0; break;
    case GgmlType::Q4_K: replacement = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: replacement = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: replacement = GgmlType::Q8_0; break;
    case GgmlType::IQ4_XS: replacement = GgmlType::IQ4_NL; break;
    default: replacement = GgmlType::F16; break;  // a 32-block type on rows not a multiple of 32
  }
  return row_size % gguf::ggml_block_size(replacement) == 0 ? replacement : GgmlType::F16;
}

}  // namespace

const QuantPreset* find_quant_preset(std::string_view name) {
  for (const QuantPreset& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::vector<std::string> quant_preset_names() {
  std::vector<std::string> names;
  for (const QuantPreset& p : kPresets) names.emplace_back(p.name);
  return names;
}

gguf::GgmlType preset_tensor_type(const QuantPreset& preset, const TensorSite& site) {
  const GgmlType type = preset.mix == QuantMix::kPure ? preset.base : mix_type(preset, site);
  return fallback(type, site.row_size);
}

}  // namespace vellum::model
