// WeightSource: the named tensors of one model in the decoder's canonical form, whichever file
// format they came from. This is the seam between the readers (GGUF, Hugging Face safetensors)
// and the decoder: the decoder asks for tensors by their GGUF names (tensor_names.h) with GGML
// shapes and types, and never sees the file format.
//
// A GGUF file is its own canonical form (from_gguf: no copy). A Hugging Face checkpoint is
// renamed and, where its conventions differ, converted once at load (hf_weights.h); the tensors'
// data then point into the safetensors mappings or into buffers this source owns.
//
// Thread-safety: immutable after construction.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"

namespace vellum::model {

class WeightSource {
 public:
  // `path` names the model in error messages (the GGUF file, the Hugging Face directory).
  // `keep_alive` owns whatever the tensors' data point into.
  WeightSource(std::filesystem::path path, std::vector<gguf::TensorInfo> tensors,
               std::vector<std::shared_ptr<const void>> keep_alive);

  // The file's tensors as stored; keeps the file alive.
  static std::shared_ptr<const WeightSource> from_gguf(std::shared_ptr<const gguf::GgufFile> file);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<gguf::TensorInfo>& tensors() const { return tensors_; }
  const gguf::TensorInfo* find_tensor(std::string_view name) const;

 private:
  std::filesystem::path path_;
  std::vector<gguf::TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> index_;  // keys view tensors_ names
  std::vector<std::shared_ptr<const void>> keep_alive_;
};

}  // namespace vellum::model
