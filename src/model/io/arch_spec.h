// What distinguishes one decoder-only architecture from another, as data.
//
// Vellum runs every supported architecture through one decoder (model/decoder.cc). An ArchSpec
// holds the fixed traits of an architecture (how its GGUF tensors are laid out, where its norms
// sit, which RoPE layout and activation it uses, its defaults for keys that converted files often
// omit). ModelConfig::from_gguf combines it with the file's metadata into the per-model
// description the decoder runs (sizes, per-layer windows and RoPE bases, softcaps, experts).
//
// Adding an architecture: one entry in kArchSpecs (arch_spec.cc), plus code only for a trait that
// no entry has yet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::model {

enum class RopeStyle : uint8_t {
  // GGML "normal": adjacent pairs (x[2i], x[2i+1]) rotate (llama: Q/K rows permuted at conversion)
  kNormal,
  kNeox,  // GPT-NeoX / HF rotate_half: (x[i], x[i + rot_dim / 2]) rotate
};

enum class FfnActivation : uint8_t {
  kSwiGlu,  // down(silu(gate(x)) * up(x))
  kGeGlu,   // down(gelu_tanh(gate(x)) * up(x))
};

enum class QkvLayout : uint8_t {
  kSeparate,  // attn_q, attn_k, attn_v
  kFused,     // attn_qkv: rows Q, then K, then V (phi3)
};

enum class GateUpLayout : uint8_t {
  kSeparate,   // ffn_gate, ffn_up
  kFusedInUp,  // ffn_up holds gate rows, then up rows (phi3); no ffn_gate
};

enum class MoeMode : uint8_t {
  kNever,
  kWhenExperts,  // MoE FFN iff {arch}.expert_count > 0 (llama: Mixtral)
  kAlways,       // qwen3moe
};

struct ArchSpec {
  std::string_view name;  // general.architecture
  RopeStyle rope_style = RopeStyle::kNeox;
  FfnActivation activation = FfnActivation::kSwiGlu;
  QkvLayout qkv_layout = QkvLayout::kSeparate;
  GateUpLayout gate_up_layout = GateUpLayout::kSeparate;
  // Gemma: x += post_attention_norm(attn(attn_norm(x))); x += post_ffw_norm(ffn(ffn_norm(x))).
  bool sandwich_norms = false;
  bool scale_embeddings = false;  // Gemma: embedding rows * sqrt(hidden)
  bool qk_norm = false;           // attn_q_norm / attn_k_norm: RMSNorm over each head before RoPE
  bool qkv_bias_required = false;  // qwen2. Other architectures use q/k/v biases when present.
  MoeMode moe = MoeMode::kNever;
  // The metadata key suffix giving the expert FFN width (".feed_forward_length" for llama,
  // ".expert_feed_forward_length" for qwen3moe).
  std::string_view expert_ff_key = ".feed_forward_length";
  // Sliding windows: {arch}.attention.sliding_window = W > 0 makes layers slide by the pattern
  // {arch}.attention.sliding_window_pattern = P: layer l slides iff l % P < P - 1 (llama.cpp's
  // rule). When the pattern key is absent, default_swa_period applies; 0 there means every layer
  // slides (Mistral-style, phi3).
  int64_t default_swa_period = 0;
  // RoPE of sliding layers: base {arch}.rope.freq_base_swa, defaulting to default_rope_theta_swa
  // (0 = the global base), and without rope scaling when swa_rope_unscaled (Gemma 3).
  float default_rope_theta_swa = 0.0f;
  bool swa_rope_unscaled = false;
  // llama.cpp scales q by 1/sqrt(hidden / heads) instead of 1/sqrt(head_dim) for the 27B Gemma
  // (query_pre_attn_scalar 144 / 168), recognised by its layer count; 0 = not used.
  int64_t hidden_over_heads_scale_layers = 0;
  // Softcaps when {arch}.attn_logit_softcapping / final_logit_softcapping are absent (0 = none;
  // llama.cpp's Gemma 2 defaults are 50 and 30).
  float default_attn_logit_softcap = 0.0f;
  float default_final_logit_softcap = 0.0f;
};

// The spec of a GGUF architecture name, or null.
const ArchSpec* find_arch_spec(std::string_view architecture);
// "llama, qwen2, ..." for error messages.
std::string supported_architectures_list();
std::vector<std::string> supported_architecture_names();

}  // namespace vellum::model
