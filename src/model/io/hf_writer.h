// Writes a Hugging Face model directory (config.json, generation_config.json, model.safetensors)
// holding exactly the weights of a GGUF model: the inverse of hf_weights.h (HF tensor names,
// [out, in] layout, Llama q/k rows in HF order, Gemma norms without the +1, one tensor per
// expert). Loading the directory gives back the GGUF's tensors bit for bit, so both run the same
// logits. Used by `vellum make-model --format hf`.
#pragma once

#include <filesystem>

#include "gguf/gguf.h"

namespace vellum::model {

// Throws vellum::Error: kUnsupported for tensor types safetensors checkpoints do not hold here
// (anything but F32, F16, BF16) or metadata with no config.json equivalent (LongRoPE, explicit
// rope_freqs other than llama3's), kIo when the directory cannot be written.
void write_hf_directory(const gguf::GgufFile& file, const std::filesystem::path& dir);

}  // namespace vellum::model
