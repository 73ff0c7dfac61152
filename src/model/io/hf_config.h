// config.json of a Hugging Face model directory -> the model description the decoder runs
// (ModelConfig), with transformers' semantics and defaults per architecture:
//
//   LlamaForCausalLM, MistralForCausalLM -> llama     MixtralForCausalLM -> llama (MoE)
//   Qwen2ForCausalLM -> qwen2     Qwen3ForCausalLM -> qwen3     Qwen3MoeForCausalLM -> qwen3moe
//   Gemma2ForCausalLM -> gemma2   Gemma3ForCausalLM -> gemma3   Phi3ForCausalLM -> phi3
//
// rope_scaling (linear, llama3, yarn), sliding_window with layer_types (or the architecture's
// default pattern, Qwen's use_sliding_window / max_window_layers), softcaps,
// query_pre_attn_scalar, partial_rotary_factor, tie_word_embeddings and the experts are read;
// anything that would change the math in a way Vellum does not implement (an unknown
// architecture or rope scaling, MLP biases, a quantization_config, shared experts ...) is refused
// with an error naming config.json and the key.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "model/io/model_config.h"

namespace vellum::model {

inline constexpr const char* kHfConfigFile = "config.json";

struct HfModelConfig {
  // Everything but what the tensors decide (weight_type_summary); has_qkv_bias and
  // has_attn_output_bias come from the config and are checked against the tensors.
  ModelConfig config;
  std::string hf_architecture;  // e.g. "LlamaForCausalLM"
};

// Reads and validates `dir`/config.json. Throws vellum::Error (kInvalidModel, kUnsupported)
// naming the file and the key.
HfModelConfig read_hf_config(const std::filesystem::path& dir);

// "LlamaForCausalLM, MistralForCausalLM, ..." for messages.
std::vector<std::string> supported_hf_architectures();

}  // namespace vellum::model
