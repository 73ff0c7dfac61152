// The llama architecture family (Llama 2/3.x, TinyLlama, SmolLM, Mistral 7B without sliding
// window): pre-norm decoder with RMSNorm, RoPE, grouped-query attention and a SwiGLU FFN.
#pragma once

#include <memory>

#include "model/model.h"

namespace vellum::model {

std::unique_ptr<Model> create_llama_model(std::shared_ptr<const gguf::GgufFile> file,
                                          const ModelConfig& config,
                                          const ModelLoadOptions& options);

}  // namespace vellum::model
