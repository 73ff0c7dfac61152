// What an engine takes from beside the weights: its tokenizer (the model's own, vLLM's
// --tokenizer, or none with --skip-tokenizer-init) and a Hugging Face model's
// generation_config.json (end-of-sequence ids, and the sampling defaults vLLM applies with
// --generation-config auto).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/io/model_files.h"
#include "tokenizer/tokenizer.h"
#include "vellum/config.h"
#include "vellum/sampling_params.h"

namespace vellum::engine {

// The tokenizer per config: null with skip_tokenizer_init; else config.tokenizer (a directory
// with tokenizer.json, a tokenizer.json, or a GGUF file), else the model's own (GGUF metadata,
// or the directory's tokenizer.json). Throws vellum::Error naming the file and the fix (e.g. a
// Hugging Face directory without tokenizer.json: --tokenizer or --skip-tokenizer-init).
std::unique_ptr<tokenizer::Tokenizer> load_tokenizer(const ModelConfig& config,
                                                     const model::ModelFiles& files);

struct GenerationConfig {
  // eos_token_id of generation_config.json (else config.json's): generation stops on them as on
  // EOS (vLLM adds them to every request's stop ids unless ignore_eos).
  std::vector<int32_t> eos_token_ids;
  // SamplingParams{} with the fields generation_config.json sets (vLLM's "diff sampling
  // params": temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens -> max_tokens).
  SamplingParams default_params;
  std::optional<int64_t> max_new_tokens;  // also default_params.max_tokens when set
  std::vector<std::string> overridden;  // "temperature=0.6", ... for the start-up log
};

// --generation-config: "vllm" reads nothing; "auto" reads the model directory's
// generation_config.json when there is one (GGUF files have none); any other value is a
// directory that must hold one. Throws vellum::Error naming the file and the key.
GenerationConfig load_generation_config(const ModelConfig& config,
                                        const model::ModelFiles& files);

}  // namespace vellum::engine
