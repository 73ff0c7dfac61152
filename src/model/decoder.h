// The one decoder-only transformer that runs every supported architecture (llama, Mistral,
// SmolLM, Mixtral, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3). What differs between them is
// data in ModelConfig (its ArchSpec and per-layer settings), never a separate forward pass:
//
//   x = embed(tokens) [* sqrt(hidden)]
//   per layer l:
//     h = attn_norm(x);  q|k|v = qkv(h) [+ bias];  [q, k = per-head q_norm, k_norm]
//     q, k = rope(q, k; normal or NEOX layout, the layer's base)
//     a = attention(q, K, V; scale, causal [sliding window of layer l] [logit softcap])
//     a = attn_out(a) [+ bias];  [a = post_attention_norm(a)];  x += a
//     h = ffn_norm(x);  f = dense SwiGLU/GeGLU FFN (fused or separate gate|up) or MoE(h)
//     [f = post_ffw_norm(f)];  x += f
//   logits = lm_head(output_norm(x)) [softcapped]
#pragma once

#include <memory>

#include "model/io/weight_source.h"
#include "model/model.h"

namespace vellum::model {

std::unique_ptr<Model> create_decoder_model(std::shared_ptr<const WeightSource> weights,
                                            const ModelConfig& config,
                                            const ModelLoadOptions& options);

}  // namespace vellum::model
