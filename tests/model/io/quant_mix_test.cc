// The per-tensor types of make-model's presets, against llama-quantize's choices written out by
// hand for Llama-3.2-1B's shape (16 layers, 32 / 8 heads, tied embeddings, rows of 2048 and
// 8192) and for rows the K types cannot hold.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/io/quant_mix.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;

constexpr int kLayers = 16;

GgmlType type_of(const char* preset, TensorRole role, int layer, int64_t row_size = 2048,
                 int gqa_ratio = 4, bool tied = true) {
  const QuantPreset* p = find_quant_preset(preset);
  EXPECT_NE(p, nullptr) << preset;
  return preset_tensor_type(*p, TensorSite{role, layer, kLayers, row_size, gqa_ratio, tied});
}

// use_more_bits(i, 16): i < 2, i >= 14, or (i - 2) % 3 == 2.
const std::set<int> kMoreBitsLayers = {0, 1, 4, 7, 10, 13, 14, 15};

TEST(QuantMix, Q4_K_M) {
  for (int layer = 0; layer < kLayers; ++layer) {
    const GgmlType more = kMoreBitsLayers.contains(layer) ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kAttnV, layer), more) << layer;
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kFfnDown, layer, 8192), more) << layer;
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kAttnQ, layer), GgmlType::Q4_K);
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kAttnK, layer), GgmlType::Q4_K);
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kAttnOutput, layer), GgmlType::Q4_K);
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kFfnGate, layer), GgmlType::Q4_K);
    EXPECT_EQ(type_of("q4_k_m", TensorRole::kFfnUp, layer), GgmlType::Q4_K);
  }
  // Tied embeddings take the output's rule; untied, token_embd keeps the base type.
  EXPECT_EQ(type_of("q4_k_m", TensorRole::kTokenEmbd, 0), GgmlType::Q6_K);
  EXPECT_EQ(type_of("q4_k_m", TensorRole::kTokenEmbd, 0, 2048, 4, false), GgmlType::Q4_K);
  EXPECT_EQ(type_of("q4_k_m", TensorRole::kOutput, 0, 2048, 4, false), GgmlType::Q6_K);
  EXPECT_EQ(find_quant_preset("q4_k_m")->file_type, 15u);
}

TEST(QuantMix, Q5_K_M) {
  for (int layer = 0; layer < kLayers; ++layer) {
    const GgmlType more = kMoreBitsLayers.contains(layer) ? GgmlType::Q6_K : GgmlType::Q5_K;
    EXPECT_EQ(type_of("q5_k_m", TensorRole::kAttnV, layer), more) << layer;
    EXPECT_EQ(type_of("q5_k_m", TensorRole::kFfnDown, layer, 8192), more) << layer;
    EXPECT_EQ(type_of("q5_k_m", TensorRole::kAttnQ, layer), GgmlType::Q5_K);
    EXPECT_EQ(type_of("q5_k_m", TensorRole::kFfnUp, layer), GgmlType::Q5_K);
  }
  EXPECT_EQ(type_of("q5_k_m", TensorRole::kTokenEmbd, 0), GgmlType::Q6_K);
  EXPECT_EQ(find_quant_preset("q5_k_m")->file_type, 17u);
}

TEST(QuantMix, Q3_K_M) {
  for (int layer = 0; layer < kLayers; ++layer) {
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kAttnV, layer),
              layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K) << layer;
    // Q5_K below n / 16 = 1.
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kFfnDown, layer, 8192),
              layer < 1 ? GgmlType::Q5_K : GgmlType::Q4_K) << layer;
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kAttnOutput, layer), GgmlType::Q4_K);
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kAttnQ, layer), GgmlType::Q3_K);
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kAttnK, layer), GgmlType::Q3_K);
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kFfnGate, layer), GgmlType::Q3_K);
    EXPECT_EQ(type_of("q3_k_m", TensorRole::kFfnUp, layer), GgmlType::Q3_K);
  }
  EXPECT_EQ(type_of("q3_k_m", TensorRole::kTokenEmbd, 0), GgmlType::Q6_K);
  EXPECT_EQ(find_quant_preset("q3_k_m")->file_type, 12u);
}

TEST(QuantMix, Q2_K) {
  for (int layer = 0; layer < kLayers; ++layer) {
    EXPECT_EQ(type_of("q2_k", TensorRole::kAttnV, layer), GgmlType::Q4_K);  // 32 / 8 heads
    EXPECT_EQ(type_of("q2_k", TensorRole::kAttnV, layer, 2048, 2), GgmlType::Q3_K);
    EXPECT_EQ(type_of("q2_k", TensorRole::kAttnOutput, layer), GgmlType::Q3_K);
    EXPECT_EQ(type_of("q2_k", TensorRole::kFfnDown, layer, 8192), GgmlType::Q3_K);
    EXPECT_EQ(type_of("q2_k", TensorRole::kAttnQ, layer), GgmlType::Q2_K);
    EXPECT_EQ(type_of("q2_k", TensorRole::kFfnGate, layer), GgmlType::Q2_K);
  }
  EXPECT_EQ(type_of("q2_k", TensorRole::kTokenEmbd, 0), GgmlType::Q6_K);
  EXPECT_EQ(type_of("q2_k", TensorRole::kOutput, 0, 2048, 4, false), GgmlType::Q6_K);
  EXPECT_EQ(find_quant_preset("q2_k")->file_type, 10u);
}

TEST(QuantMix, PurePresetsUseOneTypeEverywhere) {
  const struct {
    const char* name;
    GgmlType type;
    uint32_t file_type;
  } pure[] = {
      {"f32", GgmlType::F32, 0},      {"f16", GgmlType::F16, 1},      {"bf16", GgmlType::BF16, 32},
      {"q8_0", GgmlType::Q8_0, 7},    {"q4_0", GgmlType::Q4_0, 2},    {"q4_1", GgmlType::Q4_1, 3},
      {"q5_0", GgmlType::Q5_0, 8},    {"q5_1", GgmlType::Q5_1, 9},    {"q3_k", GgmlType::Q3_K, 11},
      {"q4_k", GgmlType::Q4_K, 14},   {"q5_k", GgmlType::Q5_K, 16},   {"q6_k", GgmlType::Q6_K, 18},
      {"iq4_nl", GgmlType::IQ4_NL, 25}, {"iq4_xs", GgmlType::IQ4_XS, 30},
  };
  for (const auto& p : pure) {
    SCOPED_TRACE(p.name);
    EXPECT_EQ(find_quant_preset(p.name)->file_type, p.file_type);
    for (TensorRole role : {TensorRole::kTokenEmbd, TensorRole::kOutput, TensorRole::kAttnV,
                            TensorRole::kFfnDown, TensorRole::kAttnOutput}) {
      EXPECT_EQ(type_of(p.name, role, 0), p.type);
    }
  }
  EXPECT_EQ(find_quant_preset("q4_k_s"), nullptr);
  EXPECT_EQ(quant_preset_names().size(), 18u);
}

// Rows the chosen type's block does not divide: llama-quantize's fallbacks.
TEST(QuantMix, FallbackForRaggedRows) {
  EXPECT_EQ(type_of("q2_k", TensorRole::kAttnQ, 3, 128), GgmlType::Q4_0);
  EXPECT_EQ(type_of("q3_k", TensorRole::kAttnQ, 3, 128), GgmlType::Q4_0);
  EXPECT_EQ(type_of("q4_k", TensorRole::kAttnQ, 3, 384), GgmlType::Q5_0);
  EXPECT_EQ(type_of("q5_k", TensorRole::kAttnQ, 3, 128), GgmlType::Q5_1);
  EXPECT_EQ(type_of("q6_k", TensorRole::kAttnQ, 3, 128), GgmlType::Q8_0);
  EXPECT_EQ(type_of("iq4_xs", TensorRole::kAttnQ, 3, 128), GgmlType::IQ4_NL);
  // Q4_K_M: attn_v of a more-bits layer is Q6_K, which falls back to Q8_0; the output of a mix
  // with such rows is Q8_0.
  EXPECT_EQ(type_of("q4_k_m", TensorRole::kAttnV, 0, 128), GgmlType::Q8_0);
  EXPECT_EQ(type_of("q4_k_m", TensorRole::kAttnV, 2, 128), GgmlType::Q5_0);
  EXPECT_EQ(type_of("q4_k_m", TensorRole::kOutput, 0, 128, 2, false), GgmlType::Q8_0);
  // Rows not even a multiple of 32.
  EXPECT_EQ(type_of("q4_0", TensorRole::kAttnQ, 3, 48), GgmlType::F16);
  EXPECT_EQ(type_of("q4_k", TensorRole::kAttnQ, 3, 48), GgmlType::F16);
  EXPECT_EQ(type_of("f32", TensorRole::kAttnQ, 3, 7), GgmlType::F32);
}

}  // namespace
}  // namespace vellum::model
