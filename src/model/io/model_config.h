// ModelConfig: the description of one decoder model that the single decoder (model/decoder.cc)
// runs: its architecture's fixed traits (ArchSpec) and the hyperparameters read from GGUF
// metadata, with everything per layer resolved (sliding or global, RoPE base), checked against
// the file's tensors. Metadata that would change the math in a way Vellum does not implement is
// refused here, never ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/io/arch_spec.h"
#include "model/io/tensor_names.h"

namespace vellum::model {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3, kYarn };
  Type type = Type::kNone;
  float factor = 1.0f;            // kLinear, kLlama3, kYarn: positions are stretched by this much
  float low_freq_factor = 1.0f;   // kLlama3
  float high_freq_factor = 4.0f;  // kLlama3
  int64_t original_max_position = 8192;  // kLlama3, kYarn: context length before scaling
  // kYarn (llama.cpp's ggml_rope_yarn): dimensions below the beta_fast correction dimension keep
  // their frequency, those above beta_slow's are divided by `factor`, a linear ramp between;
  // rotated q and k are scaled by attn_factor * (1 + 0.1 ln factor).
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float ext_factor = 1.0f;
  float attn_factor = 1.0f;
};

// GGUF metadata keys Vellum writes for Llama-3 rope scaling. llama.cpp has no keys for it (its
// converter writes only the rope_freqs tensor) and would mis-read `{arch}.rope.scaling.factor` as
// linear scaling, so the llama3 parameters live under their own names.
inline constexpr const char* kRopeScalingLlama3FactorSuffix = ".rope.scaling.llama3.factor";
inline constexpr const char* kRopeScalingLlama3LowSuffix = ".rope.scaling.llama3.low_freq_factor";
inline constexpr const char* kRopeScalingLlama3HighSuffix = ".rope.scaling.llama3.high_freq_factor";

struct ModelConfig {
  std::string architecture;  // general.architecture, e.g. "llama", "gemma2"
  ArchSpec arch;             // the fixed traits of `architecture`
  std::string name;          // general.name, else the file name
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense FFN width (0 when every layer is MoE)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // rotated dims per head (<= head_dim, even)
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;  // output.weight absent: the LM head is token_embd.weight
  bool has_rope_freqs = false;       // the file has rope_freqs.weight ({rope_dim / 2}, f32)

  // Attention. Scores are (q . k) * attention_scale, then softcapped when attn_logit_softcap > 0.
  float attention_scale = 0.0f;      // 1/sqrt(head_dim) unless the model says otherwise
  float attn_logit_softcap = 0.0f;   // 0 = none (Gemma 2: 50)
  float final_logit_softcap = 0.0f;  // 0 = none (Gemma 2: 30): logits = c * tanh(logits / c)
  // Sliding window in tokens, including the query's own position (0 = none), and which layers
  // slide (num_layers entries; all false without a window).
  int64_t sliding_window = 0;
  std::vector<bool> layer_is_sliding;
  float rope_theta_swa = 10000.0f;  // RoPE base of sliding layers

  // Mixture of experts (num_experts == 0: dense FFN in every layer).
  int64_t num_experts = 0;
  int64_t num_experts_used = 0;           // top-k
  int64_t expert_intermediate_size = 0;   // FFN width of one expert
  bool normalize_expert_weights = true;   // renormalise the top-k router probabilities to sum 1

  // q/k/v (attn_q.bias ... or attn_qkv.bias) and attn_output biases present in the file.
  bool has_qkv_bias = false;
  bool has_attn_output_bias = false;

  int64_t num_sliding_layers() const;
  std::string weight_type_summary;   // e.g. "Q8_0 x 113, F32 x 34"

  // Reads `{arch}.*` metadata and validates it and every tensor shape. Throws vellum::Error:
  // kUnsupported for an unknown architecture (listing the supported ones), an unsupported rope
  // scaling type, metadata whose math Vellum does not implement, or a tensor the decoder would not
  // use; kInvalidModel for missing keys, inconsistent values, missing tensors (named) or wrong
  // shapes.
  static ModelConfig from_gguf(const gguf::GgufFile& file);

  // RoPE inverse frequencies, rope_dim / 2 of them:
  //   inv_freq[i] = rope_theta^(-2i / rope_dim) / factor_i
  // factor_i is rope_freqs[i] when `rope_freqs` is given (the rope_freqs.weight tensor as f32),
  // else from Llama-3 scaling, else rope_scaling.factor for linear scaling, else 1.
  std::vector<float> rope_inv_freq(const float* rope_freqs) const;
  // The same for sliding-window layers: base rope_theta_swa, and no rope scaling when the
  // architecture's sliding layers run unscaled (Gemma 3).
  std::vector<float> rope_inv_freq_sliding(const float* rope_freqs) const;
};

// The per-frequency divisors of Llama-3 rope scaling (what llama.cpp's converter stores in
// rope_freqs.weight): rope_dim / 2 values, 1 for high frequencies, `factor` for low ones and a
// smooth blend between.
std::vector<float> llama3_rope_factors(const RopeScaling& scaling, float rope_theta,
                                       int64_t rope_dim);

// YaRN's per-frequency divisors (rope_dim / 2 values, between 1 and `factor`), and the magnitude
// scale of the rotated q and k.
std::vector<float> yarn_rope_factors(const RopeScaling& scaling, float rope_theta,
                                     int64_t rope_dim);
float yarn_mscale(const RopeScaling& scaling);

}  // namespace vellum::model
