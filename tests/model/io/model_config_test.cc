// ModelConfig from real and generated GGUF files; validation errors; RoPE frequencies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gguf/gguf.h"
#include "model/io/model_config.h"
#include "model_io_test_util.h"
#include "test_util.h"

namespace vellum::model {
namespace {

using testing::make_tiny;
using testing::rewrite;
using ::testing::HasSubstr;

std::string config_error(const std::filesystem::path& path) {
  const auto file = gguf::GgufFile::open(path);
  try {
    (void)ModelConfig::from_gguf(*file);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "ModelConfig::from_gguf accepted " << path;
  return {};
}

TEST(ModelConfig, Stories260K) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(*file);
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.intermediate_size, file->find_tensor("blk.0.ffn_up.weight")->shape[1]);
  EXPECT_EQ(c.max_position_embeddings, file->get_int("llama.context_length"));
  EXPECT_FLOAT_EQ(c.rms_norm_eps, static_cast<float>(*file->get_float(
                                      "llama.attention.layer_norm_rms_epsilon")));
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FALSE(c.has_rope_freqs);
  EXPECT_EQ(c.tie_word_embeddings, file->find_tensor("output.weight") == nullptr);
  EXPECT_THAT(c.weight_type_summary, HasSubstr("F32 x "));
}

TEST(ModelConfig, TinyRandomBigVocabF16) {
  VELLUM_REQUIRE_MODEL_FILE(path, "llama-2-tiny-random.gguf");
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(*file);
  EXPECT_EQ(c.name, "LLaMA v2");
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.rope_dim, 4);
  EXPECT_EQ(c.intermediate_size, 32);
  EXPECT_FALSE(c.tie_word_embeddings);
  // models/README.md says this file has rope_freqs; it does not (12 tensors, no rope_freqs).
  EXPECT_FALSE(c.has_rope_freqs);
  EXPECT_EQ(c.weight_type_summary, "F16 x 9, F32 x 3");
}

TEST(ModelConfig, GeneratedTiny) {
  const auto path = make_tiny("config-tiny.gguf");
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(*file);
  EXPECT_EQ(c.name, "vellum-tiny-random");
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_dim, 32);
  EXPECT_EQ(c.intermediate_size, 384);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.vocab_size, file->get_int("llama.vocab_size"));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.has_rope_freqs);
}

TEST(ModelConfig, Llama3RopeMetadataAndRopeFreqsTensor) {
  // The tiny model with the 1B model's rope settings, head_dim 32 -> 16 frequencies.
  const RopeScaling scaling{RopeScaling::Type::kLlama3, 32.0f, 1.0f, 4.0f, 8192};
  const std::vector<float> factors = llama3_rope_factors(scaling, 500000.0f, 32);
  const auto path = rewrite(make_tiny("rope-src.gguf"), "rope-llama3.gguf", [&](gguf::GgufWriter& w) {
    w.set_f32("llama.rope.freq_base", 500000.0f);
    w.set_f32("llama.rope.scaling.llama3.factor", 32.0f);
    w.set_f32("llama.rope.scaling.llama3.low_freq_factor", 1.0f);
    w.set_f32("llama.rope.scaling.llama3.high_freq_factor", 4.0f);
    w.set_u32("llama.rope.scaling.original_context_length", 8192);
    std::vector<uint8_t> bytes(factors.size() * 4);
    std::memcpy(bytes.data(), factors.data(), bytes.size());
    w.add_tensor("rope_freqs.weight", gguf::GgmlType::F32, {16}, bytes);
  });
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(*file);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_TRUE(c.has_rope_freqs);
  const auto* tensor = reinterpret_cast<const float*>(file->find_tensor("rope_freqs.weight")->data);
  const std::vector<float> from_tensor = c.rope_inv_freq(tensor);
  const std::vector<float> from_metadata = c.rope_inv_freq(nullptr);
  ASSERT_EQ(from_tensor.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(from_tensor[i], from_metadata[i]) << i;
}

TEST(RopeInvFreq, Llama3MatchesHandComputedValues) {
  ModelConfig c;
  c.rope_dim = 64;
  c.rope_theta = 500000.0f;
  c.rope_scaling = {RopeScaling::Type::kLlama3, 32.0f, 1.0f, 4.0f, 8192};
  const std::vector<float> inv = c.rope_inv_freq(nullptr);
  ASSERT_EQ(inv.size(), 32u);
  // i = 0: wavelength 2*pi < 8192 / 4: unscaled.
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  // i = 10: freq = 500000^(-20/64) = 0.0165604, wavelength 379 < 2048: unscaled.
  EXPECT_NEAR(inv[10], 0.016560440f, 1e-8);
  // i = 16: freq = 500000^(-1/2) = 1/707.107; wavelength 2*pi*707.107 = 4442.88 lies between
  // 2048 and 8192: smooth = (8192 / 4442.88 - 1) / 3 = 0.281134,
  // factor = 1 / ((1 - smooth) / 32 + smooth) = 3.292262, inv = 0.00141421 / 3.292262.
  EXPECT_NEAR(inv[16], 4.2955680e-4f, 1e-9);
  // i = 20: wavelength 22911 > 8192: divided by 32.
  EXPECT_NEAR(inv[20], 2.7424818e-4f / 32.0f, 1e-11);
  EXPECT_NEAR(inv[31], 9.4183067e-8f, 1e-13);

  const std::vector<float> factors = llama3_rope_factors(c.rope_scaling, 500000.0f, 64);
  EXPECT_FLOAT_EQ(factors[0], 1.0f);
  EXPECT_NEAR(factors[16], 3.2922621f, 1e-5);
  EXPECT_FLOAT_EQ(factors[31], 32.0f);
}

TEST(RopeInvFreq, PlainLinearAndExplicitFactors) {
  ModelConfig c;
  c.rope_dim = 8;
  c.rope_theta = 10000.0f;
  std::vector<float> inv = c.rope_inv_freq(nullptr);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[1], 0.1f);  // 10000^(-2/8)
  EXPECT_FLOAT_EQ(inv[2], 0.01f);
  EXPECT_FLOAT_EQ(inv[3], 0.001f);
  c.rope_scaling.type = RopeScaling::Type::kLinear;
  c.rope_scaling.factor = 4.0f;
  inv = c.rope_inv_freq(nullptr);
  EXPECT_FLOAT_EQ(inv[1], 0.025f);
  const float explicit_factors[4] = {1.0f, 2.0f, 5.0f, 10.0f};
  inv = c.rope_inv_freq(explicit_factors);  // the tensor wins over metadata
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[1], 0.05f);
  EXPECT_FLOAT_EQ(inv[2], 0.002f);
  EXPECT_FLOAT_EQ(inv[3], 0.0001f);
}

TEST(ModelConfigErrors, UnsupportedArchitecture) {
  const auto src = make_tiny("arch-src.gguf");
  const auto path = rewrite(src, "arch-gpt2.gguf", [](gguf::GgufWriter& w) {
    w.set_string("general.architecture", "gpt2");
  });
  const std::string msg = config_error(path);
  EXPECT_THAT(msg, HasSubstr("architecture 'gpt2' is not supported (supported: llama, qwen2, "
                             "qwen3, qwen3moe, gemma2, gemma3, phi3)"));
}

TEST(ModelConfigErrors, MissingTensorIsNamed) {
  const auto path = rewrite(make_tiny("missing-src.gguf"), "missing.gguf",
                            [](gguf::GgufWriter&) {}, "blk.2.ffn_down.weight");
  EXPECT_THAT(config_error(path), HasSubstr("tensor 'blk.2.ffn_down.weight' is missing"));
}

TEST(ModelConfigErrors, WrongTensorShape) {
  const auto path = rewrite(make_tiny("shape-src.gguf"), "shape.gguf", [](gguf::GgufWriter& w) {
    w.add_tensor("blk.1.attn_k.weight", gguf::GgmlType::F32, {128, 32},
                 std::vector<uint8_t>(128 * 32 * 4));
  }, "blk.1.attn_k.weight");
  EXPECT_THAT(config_error(path),
              HasSubstr("tensor 'blk.1.attn_k.weight' has shape [128, 32], expected [128, 64]"));
}

TEST(ModelConfigErrors, HeadsMustDivide) {
  const auto path = rewrite(make_tiny("heads-src.gguf"), "heads.gguf", [](gguf::GgufWriter& w) {
    w.set_u32("llama.attention.head_count_kv", 3);
  });
  EXPECT_THAT(config_error(path), HasSubstr("head_count 4 is not a multiple of head_count_kv 3"));
}

TEST(ModelConfigErrors, MissingRequiredKey) {
  const auto path = rewrite(make_tiny("key-src.gguf"), "key.gguf", [](gguf::GgufWriter& w) {
    w.remove("llama.block_count");
  });
  EXPECT_THAT(config_error(path), HasSubstr("'llama.block_count' is missing"));
}

TEST(ModelConfigErrors, UnsupportedRopeScaling) {
  const auto path = rewrite(make_tiny("longrope-type-src.gguf"), "longrope-type.gguf",
                            [](gguf::GgufWriter& w) {
                              w.set_string("llama.rope.scaling.type", "longrope");
                            });
  EXPECT_THAT(config_error(path), HasSubstr("rope scaling type 'longrope' is not supported"));
}

TEST(ModelConfig, YarnRopeScaling) {
  // Tiny: head_dim = rope_dim = 32, base 10000. Factor 4 over an original context of 512:
  // correction dims floor(1.62) = 1 (beta_fast 32) and ceil(7.64) = 8 (beta_slow 1).
  const auto path = rewrite(make_tiny("yarn-src.gguf"), "yarn.gguf", [](gguf::GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "yarn");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
    w.set_u32("llama.rope.scaling.original_context_length", 512);
  });
  const ModelConfig c = ModelConfig::from_gguf(*gguf::GgufFile::open(path));
  ASSERT_EQ(c.rope_scaling.type, RopeScaling::Type::kYarn);
  const std::vector<float> factors = yarn_rope_factors(c.rope_scaling, c.rope_theta, c.rope_dim);
  ASSERT_EQ(factors.size(), 16u);
  EXPECT_FLOAT_EQ(factors[0], 1.0f);
  EXPECT_FLOAT_EQ(factors[1], 1.0f);                         // ramp 1: extrapolated
  EXPECT_NEAR(factors[4], 1.0f / (4.0f / 7 + 3.0f / 28), 1e-6);  // ramp 4/7
  EXPECT_FLOAT_EQ(factors[8], 4.0f);                          // ramp 0: interpolated
  EXPECT_FLOAT_EQ(factors[15], 4.0f);
  EXPECT_FLOAT_EQ(c.rope_inv_freq(nullptr)[8], std::pow(10000.0f, -16.0f / 32) / 4.0f);
  // mscale = 1 + 0.1 ln 4 on q and k: the score scale gains mscale^2.
  const float mscale = 1.0f + 0.1f * std::log(4.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, mscale * mscale / std::sqrt(32.0f));
}

TEST(ModelConfigErrors, VocabOnlyFileHasNoWeights) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_THAT(config_error(path), HasSubstr("tensor 'token_embd.weight' is missing"));
}

// ---- Architecture descriptions read from the arch/ test models (README there) ----

ModelConfig arch_config(const std::filesystem::path& path) {
  return ModelConfig::from_gguf(*gguf::GgufFile::open(path));
}

TEST(ArchConfig, Gemma2DefaultPeriodSoftcapsAndScale) {
  VELLUM_REQUIRE_MODEL_FILE(path, "arch/gemma2-f16.gguf");
  const ModelConfig c = arch_config(path);
  EXPECT_EQ(c.arch.name, "gemma2");
  EXPECT_EQ(c.sliding_window, 32);
  // No sliding_window_pattern key: llama.cpp's default period 2, layers 0 and 2 slide.
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{true, false, true}));
  EXPECT_FLOAT_EQ(c.attn_logit_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 0.125f);
  EXPECT_TRUE(c.arch.sandwich_norms);
  EXPECT_TRUE(c.arch.scale_embeddings);
  EXPECT_EQ(c.arch.activation, FfnActivation::kGeGlu);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(ArchConfig, Gemma3PatternAndPerLayerRopeBase) {
  VELLUM_REQUIRE_MODEL_FILE(path, "arch/gemma3-f16.gguf");
  const ModelConfig c = arch_config(path);
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{true, true, false}));
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_theta_swa, 10000.0f);
  EXPECT_FLOAT_EQ(c.attn_logit_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_TRUE(c.arch.qk_norm);
  EXPECT_FLOAT_EQ(c.rope_inv_freq(nullptr)[1], std::pow(1e6f, -2.0f / 64));
  EXPECT_FLOAT_EQ(c.rope_inv_freq_sliding(nullptr)[1], std::pow(10000.0f, -2.0f / 64));
}

TEST(ArchConfig, Qwen2BiasesPhi3FusedNoWindow) {
  VELLUM_REQUIRE_MODEL_FILE(qwen2, "arch/qwen2-f16.gguf");
  VELLUM_REQUIRE_MODEL_FILE(phi3, "arch/phi3-f16.gguf");
  const ModelConfig q = arch_config(qwen2);
  EXPECT_TRUE(q.has_qkv_bias);
  EXPECT_EQ(q.arch.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(q.num_sliding_layers(), 0);
  const ModelConfig p = arch_config(phi3);
  EXPECT_EQ(p.arch.qkv_layout, QkvLayout::kFused);
  EXPECT_EQ(p.arch.gate_up_layout, GateUpLayout::kFusedInUp);
  EXPECT_EQ(p.sliding_window, 0);
  EXPECT_FALSE(p.has_qkv_bias);
}

TEST(ArchConfig, MoeExperts) {
  VELLUM_REQUIRE_MODEL_FILE(mixtral, "arch/llama-moe-f16.gguf");
  VELLUM_REQUIRE_MODEL_FILE(qwen3moe, "arch/qwen3moe-f16.gguf");
  for (const auto& path : {mixtral, qwen3moe}) {
    const ModelConfig c = arch_config(path);
    EXPECT_EQ(c.num_experts, 4) << path;
    EXPECT_EQ(c.num_experts_used, 2) << path;
    EXPECT_EQ(c.expert_intermediate_size, 32) << path;
    EXPECT_TRUE(c.normalize_expert_weights) << path;
    EXPECT_EQ(c.intermediate_size, 0) << path;
  }
}

TEST(ArchConfig, Gemma3PatternKeyOverridesDefault) {
  VELLUM_REQUIRE_MODEL_FILE(src, "arch/gemma2-f16.gguf");
  const auto path = rewrite(src, "gemma2-pattern0.gguf", [](gguf::GgufWriter& w) {
    w.set_u32("gemma2.attention.sliding_window_pattern", 0);  // every layer slides
  });
  EXPECT_EQ(arch_config(path).layer_is_sliding, (std::vector<bool>{true, true, true}));
}

TEST(ModelConfigErrors, UnimplementedMathKeyIsRefused) {
  const auto path = rewrite(make_tiny("scale-src.gguf"), "logit-scale.gguf",
                            [](gguf::GgufWriter& w) { w.set_f32("llama.logit_scale", 0.5f); });
  EXPECT_THAT(config_error(path), HasSubstr("'llama.logit_scale' = 0.5 asks for logit scaling"));
}

TEST(ModelConfigErrors, UnusedTensorIsRefused) {
  const auto path = rewrite(make_tiny("bias-src.gguf"), "ffn-bias.gguf", [](gguf::GgufWriter& w) {
    w.add_tensor("blk.0.ffn_down.bias", gguf::GgmlType::F32, {128},
                 std::vector<uint8_t>(128 * 4));
  });
  EXPECT_THAT(config_error(path),
              HasSubstr("tensor 'blk.0.ffn_down.bias' is not used by Vellum's llama decoder"));
}

TEST(ModelConfigErrors, LongRopeIsRefused) {
  const auto path = rewrite(make_tiny("longrope-src.gguf"), "longrope.gguf",
                            [](gguf::GgufWriter& w) {
                              w.add_tensor("rope_factors_long.weight", gguf::GgmlType::F32, {16},
                                           std::vector<uint8_t>(16 * 4));
                            });
  EXPECT_THAT(config_error(path), HasSubstr("LongRoPE"));
}

TEST(ModelConfigErrors, NonSoftmaxGatingIsRefused) {
  VELLUM_REQUIRE_MODEL_FILE(src, "arch/llama-moe-f16.gguf");
  const auto path = rewrite(src, "moe-sigmoid.gguf", [](gguf::GgufWriter& w) {
    w.set_u32("llama.expert_gating_func", 2);
  });
  EXPECT_THAT(config_error(path), HasSubstr("only softmax expert gating"));
}

TEST(ModelConfigErrors, ExpertsInADenseOnlyArchitecture) {
  VELLUM_REQUIRE_MODEL_FILE(src, "arch/qwen2-f16.gguf");
  const auto path = rewrite(src, "qwen2-experts.gguf", [](gguf::GgufWriter& w) {
    w.set_u32("qwen2.expert_count", 4);
  });
  EXPECT_THAT(config_error(path), HasSubstr("mixture-of-experts qwen2 models are not supported"));
}

TEST(TensorNames, LayerTensorName) {
  EXPECT_EQ(layer_tensor_name(3, llama_tensors::kAttnQ), "blk.3.attn_q.weight");
  EXPECT_EQ(layer_tensor_name(15, llama_tensors::kFfnDown), "blk.15.ffn_down.weight");
}

}  // namespace
}  // namespace vellum::model
