// The weight-type presets of `vellum make-model --dtype`: one type for every matrix ("pure"), or
// one of llama.cpp's mixes, with the per-tensor choices llama-quantize makes for the llama
// architecture without an importance matrix (llama-quant.cpp, llama_tensor_get_type_impl and
// tensor_type_fallback).
//
// Pure presets (f32 ... iq4_xs): token_embd, output and every layer matrix in that type.
// Mixes (q2_k, q3_k_m, q4_k_m, q5_k_m), as llama-quantize:
//   output.weight (and token_embd.weight when the embeddings are tied): Q6_K
//   q4_k_m / q5_k_m: attn_v and ffn_down Q6_K on the layers use_more_bits() picks, else Q4_K / Q5_K
//   q3_k_m: attn_v Q5_K on layers 0-1 else Q4_K; attn_output Q4_K; ffn_down Q5_K on the first
//           n/16 layers else Q4_K; the rest Q3_K
//   q2_k:   attn_v Q4_K when n_head / n_head_kv >= 4 else Q3_K; attn_output, ffn_down Q3_K;
//           the rest Q2_K
// Fallback, for pure presets and mixes alike: a matrix whose rows (ne[0]) are not a multiple of
// the chosen type's block takes llama-quantize's fallback: Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0;
// Q5_K -> Q5_1; Q6_K -> Q8_0; IQ4_XS -> IQ4_NL; F16 if even that does not fit (rows not a
// multiple of 32). In a mix, output.weight with such rows is Q8_0 (llama-quantize's rule).
// 1-D tensors (norms, rope_freqs) are always F32.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace vellum::model {

enum class QuantMix { kPure, kQ2_K, kQ3_K_M, kQ4_K_M, kQ5_K_M };

struct QuantPreset {
  const char* name;    // "q4_k_m"
  gguf::GgmlType base; // the type of the matrices no rule moves
  QuantMix mix;
  // general.file_type: llama.cpp's llama_ftype (LLAMA_FTYPE_MOSTLY_Q4_K_M = 15, ...). Pure
  // q3_k / q4_k / q5_k carry the _S preset's id (11 / 14 / 16), the closest llama.cpp has.
  uint32_t file_type;
};

// The preset called `name`, or nullptr.
const QuantPreset* find_quant_preset(std::string_view name);
// Every preset name, in a stable order: "f32", "f16", "bf16", "q8_0", ...
std::vector<std::string> quant_preset_names();

// Where a matrix sits in a llama model.
enum class TensorRole {
  kTokenEmbd, kOutput, kAttnQ, kAttnK, kAttnV, kAttnOutput, kFfnGate, kFfnUp, kFfnDown,
};

struct TensorSite {
  TensorRole role = TensorRole::kAttnQ;
  int layer = 0;          // for the per-layer matrices
  int num_layers = 1;
  int64_t row_size = 0;   // ne[0]: elements per row
  int gqa_ratio = 1;      // n_head / n_head_kv
  bool tied_embeddings = false;  // no output.weight: token_embd is also the LM head
};

// The storage type of the matrix at `site` under `preset`.
gguf::GgmlType preset_tensor_type(const QuantPreset& preset, const TensorSite& site);

}  // namespace vellum::model
