// Opening a model for the engine, whatever its format: a GGUF file, or a Hugging Face model
// directory (config.json + safetensors). Both end as the same two things the decoder needs: the
// model description (ModelConfig) and its tensors (WeightSource).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/io/model_config.h"
#include "model/io/weight_source.h"

namespace vellum::model {

// vLLM's --load-format: auto (a directory is a Hugging Face checkpoint, a file GGUF), gguf,
// safetensors.
enum class LoadFormat { kAuto, kGguf, kSafetensors };
// Throws kInvalidArgument naming the valid values.
LoadFormat parse_load_format(const std::string& name);

struct ModelFiles {
  std::filesystem::path path;
  LoadFormat format = LoadFormat::kGguf;       // kGguf or kSafetensors, never kAuto
  std::shared_ptr<const gguf::GgufFile> gguf;  // the GGUF file; null for a directory
  std::string hf_architecture;                 // config.json's, e.g. "LlamaForCausalLM"
  ModelConfig config;
  std::shared_ptr<const WeightSource> weights;

  bool is_hf() const { return format == LoadFormat::kSafetensors; }
};

// Opens and validates the model at `path`. Throws vellum::Error naming the file and the problem
// (missing file or directory, wrong format for --load-format, bad config or tensors).
ModelFiles open_model_files(const std::filesystem::path& path,
                            LoadFormat format = LoadFormat::kAuto);

}  // namespace vellum::model
