// GGUF tensor names of the decoder architectures (llama, qwen2/3, gemma2/3, phi3, MoE), as written
// by llama.cpp's converters.
//
// Shapes are in GGML order (shape[0] innermost): a matrix mapping `in` features to `out`
// features is stored as `out` rows of `in` values, shape {in, out}.
#pragma once

#include <string>
#include <string_view>

namespace vellum::model {

namespace llama_tensors {
// Model-level tensors.
inline constexpr std::string_view kTokenEmbd = "token_embd.weight";    // {hidden, vocab}
inline constexpr std::string_view kOutputNorm = "output_norm.weight";  // {hidden}, f32
inline constexpr std::string_view kOutput = "output.weight";  // {hidden, vocab}; absent if tied
inline constexpr std::string_view kRopeFreqs = "rope_freqs.weight";  // {rope_dim / 2}, f32
inline constexpr std::string_view kRopeFactorsLong = "rope_factors_long.weight";  // Phi-3 LongRoPE

// Per-layer suffixes, used with layer_tensor_name().
inline constexpr std::string_view kAttnNorm = "attn_norm.weight";  // {hidden}, f32
inline constexpr std::string_view kAttnQ = "attn_q.weight";        // {hidden, heads * head_dim}
inline constexpr std::string_view kAttnK = "attn_k.weight";  // {hidden, kv_heads * head_dim}
inline constexpr std::string_view kAttnV = "attn_v.weight";  // {hidden, kv_heads * head_dim}
inline constexpr std::string_view kAttnOutput = "attn_output.weight";  // {heads * head_dim, hidden}
inline constexpr std::string_view kFfnNorm = "ffn_norm.weight";        // {hidden}, f32
inline constexpr std::string_view kFfnGate = "ffn_gate.weight";        // {hidden, ff}
inline constexpr std::string_view kFfnUp = "ffn_up.weight";            // {hidden, ff}
inline constexpr std::string_view kFfnDown = "ffn_down.weight";        // {ff, hidden}
// Optional or architecture-specific per-layer tensors.
inline constexpr std::string_view kAttnQkv = "attn_qkv.weight";  // {hidden, q + 2 kv}: Q, K, V rows
inline constexpr std::string_view kAttnQkvBias = "attn_qkv.bias";  // {q + 2 kv}
inline constexpr std::string_view kAttnQBias = "attn_q.bias";      // {heads * head_dim}
inline constexpr std::string_view kAttnKBias = "attn_k.bias";      // {kv_heads * head_dim}
inline constexpr std::string_view kAttnVBias = "attn_v.bias";      // {kv_heads * head_dim}
inline constexpr std::string_view kAttnQNorm = "attn_q_norm.weight";  // {head_dim}, per head
inline constexpr std::string_view kAttnKNorm = "attn_k_norm.weight";  // {head_dim}, per head
inline constexpr std::string_view kAttnOutputBias = "attn_output.bias";  // {hidden}
inline constexpr std::string_view kPostAttentionNorm = "post_attention_norm.weight";  // {hidden}
inline constexpr std::string_view kPostFfwNorm = "post_ffw_norm.weight";              // {hidden}
// MoE: router and the experts stacked along the outermost dimension.
inline constexpr std::string_view kFfnGateInp = "ffn_gate_inp.weight";  // {hidden, experts}, f32
inline constexpr std::string_view kFfnGateExps = "ffn_gate_exps.weight";  // {hidden, eff, experts}
inline constexpr std::string_view kFfnUpExps = "ffn_up_exps.weight";      // {hidden, eff, experts}
inline constexpr std::string_view kFfnDownExps = "ffn_down_exps.weight";  // {eff, hidden, experts}
}  // namespace llama_tensors

// "blk.{layer}.{suffix}", e.g. layer_tensor_name(3, llama_tensors::kAttnQ) == "blk.3.attn_q.weight".
std::string layer_tensor_name(int layer, std::string_view suffix);

}  // namespace vellum::model
