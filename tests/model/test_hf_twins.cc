// The Hugging Face copies in ../shared/models/arch/hf/ against their GGUF twins: loading a copy
// must give the decoder exactly the twin's model description and tensors (names, types, GGML
// shapes and bytes), after the HF conventions are undone (Llama q/k row order, Gemma's norm
// offset, per-expert tensors). The reference tests (test_arch_reference.cc) then run both.

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>

#include "model/io/model_files.h"
#include "test_util.h"

namespace vellum {
namespace {

class HfTwin : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTwin, SameConfigAndTensorsAsGgufTwin) {
  const std::string name = GetParam();
  VELLUM_REQUIRE_MODEL_FILE(dir, "arch/hf/" + name);
  VELLUM_REQUIRE_MODEL_FILE(twin, "arch/" + name + "-f16.gguf");
  const model::ModelFiles hf = model::open_model_files(dir);
  const model::ModelFiles gguf = model::open_model_files(twin);
  ASSERT_TRUE(hf.is_hf());
  ASSERT_FALSE(gguf.is_hf());

  const model::ModelConfig& a = hf.config;
  const model::ModelConfig& b = gguf.config;
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_theta_swa, b.rope_theta_swa);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_scale, b.attention_scale);
  EXPECT_EQ(a.attn_logit_softcap, b.attn_logit_softcap);
  EXPECT_EQ(a.final_logit_softcap, b.final_logit_softcap);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.layer_is_sliding, b.layer_is_sliding);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_used, b.num_experts_used);
  EXPECT_EQ(a.expert_intermediate_size, b.expert_intermediate_size);
  EXPECT_EQ(a.normalize_expert_weights, b.normalize_expert_weights);
  EXPECT_EQ(a.has_qkv_bias, b.has_qkv_bias);
  EXPECT_EQ(a.has_attn_output_bias, b.has_attn_output_bias);

  const auto& ours = hf.weights->tensors();
  const auto& theirs = gguf.weights->tensors();
  EXPECT_EQ(ours.size(), theirs.size());
  for (const gguf::TensorInfo& t : theirs) {
    const gguf::TensorInfo* o = hf.weights->find_tensor(t.name);
    ASSERT_NE(o, nullptr) << name << ": " << t.name << " missing from the HF load";
    EXPECT_EQ(o->type, t.type) << name << ": " << t.name;
    EXPECT_EQ(o->shape, t.shape) << name << ": " << t.name;
    ASSERT_EQ(o->nbytes, t.nbytes) << name << ": " << t.name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0)
        << name << ": " << t.name << " differs from the GGUF twin's bytes";
  }
}

INSTANTIATE_TEST_SUITE_P(Copies, HfTwin,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3",
                                           "llama-moe", "qwen3moe"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace vellum
