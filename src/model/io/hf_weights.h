// The tensors of a Hugging Face checkpoint as the decoder's canonical tensors (WeightSource: GGUF
// names, GGML shapes), converted where the conventions differ, exactly as llama.cpp's
// convert_hf_to_gguf.py converts them, so a checkpoint and its converted GGUF give the same bytes:
//
//   model.embed_tokens -> token_embd     model.layers.N.self_attn.q_proj -> blk.N.attn_q ...
//   [out, in] row-major -> GGML {in, out}: the same bytes, no copy.
//   Llama / Mistral / Mixtral q_proj, k_proj (and biases): rows permuted per head for the
//     adjacent-pair RoPE the llama architecture runs (GGUF row 2j + s = HF row s * d/2 + j).
//   Gemma 2 / 3 norm weights (every *norm.weight): stored as w, used as 1 + w (f32).
//   Mixtral / Qwen3-MoE experts: one 2-D tensor per expert, stacked into {in, out, experts}.
//   MoE routers: converted to f32.
//
// Every tensor is checked against the config (name, shape; F32, F16 or BF16), and a tensor that
// the decoder would not use is refused, naming the tensor and its file. Only rotary_emb.inv_freq
// buffers (recomputed from the config) are skipped, as transformers and vLLM skip them.
#pragma once

#include <memory>

#include "model/io/hf_checkpoint.h"
#include "model/io/model_config.h"
#include "model/io/weight_source.h"

namespace vellum::model {

// `config` from read_hf_config(checkpoint.dir()); sets its weight_type_summary. Throws
// vellum::Error (kInvalidModel, kUnsupported) naming the file and the tensor.
std::shared_ptr<const WeightSource> load_hf_weights(const HfCheckpoint& checkpoint,
                                                    ModelConfig& config);

}  // namespace vellum::model
