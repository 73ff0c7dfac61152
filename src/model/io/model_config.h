// ModelConfig: the hyperparameters of a llama-family model, read from GGUF metadata and checked
// against the file's tensor shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/io/tensor_names.h"

namespace vellum::model {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;            // kLinear, kLlama3: positions are stretched by this much
  float low_freq_factor = 1.0f;   // kLlama3
  float high_freq_factor = 4.0f;  // kLlama3
  int64_t original_max_position = 8192;  // kLlama3: context length before scaling
};

// GGUF metadata keys Vellum writes for Llama-3 rope scaling. llama.cpp has no keys for it (its
// converter writes only the rope_freqs tensor) and would mis-read `{arch}.rope.scaling.factor` as
// linear scaling, so the llama3 parameters live under their own names.
inline constexpr const char* kRopeScalingLlama3FactorSuffix = ".rope.scaling.llama3.factor";
inline constexpr const char* kRopeScalingLlama3LowSuffix = ".rope.scaling.llama3.low_freq_factor";
inline constexpr const char* kRopeScalingLlama3HighSuffix = ".rope.scaling.llama3.high_freq_factor";

struct ModelConfig {
  std::string architecture;  // "llama"
  std::string name;          // general.name, else the file name
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
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
  std::string weight_type_summary;   // e.g. "Q8_0 x 113, F32 x 34"

  // Reads `{arch}.*` metadata and validates it and every tensor shape. Throws vellum::Error:
  // kUnsupported for an architecture other than llama or an unsupported rope scaling type,
  // kInvalidModel for missing keys, inconsistent values, missing tensors (named) or wrong shapes.
  static ModelConfig from_gguf(const gguf::GgufFile& file);

  // RoPE inverse frequencies, rope_dim / 2 of them:
  //   inv_freq[i] = rope_theta^(-2i / rope_dim) / factor_i
  // factor_i is rope_freqs[i] when `rope_freqs` is given (the rope_freqs.weight tensor as f32),
  // else from Llama-3 scaling, else rope_scaling.factor for linear scaling, else 1.
  std::vector<float> rope_inv_freq(const float* rope_freqs) const;
};

// The per-frequency divisors of Llama-3 rope scaling (what llama.cpp's converter stores in
// rope_freqs.weight): rope_dim / 2 values, 1 for high frequencies, `factor` for low ones and a
// smooth blend between.
std::vector<float> llama3_rope_factors(const RopeScaling& scaling, float rope_theta,
                                       int64_t rope_dim);

}  // namespace vellum::model
