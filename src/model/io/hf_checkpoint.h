// The safetensors files of a Hugging Face model directory: one `model.safetensors`, or the shards
// named by `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}).
//
// Every shard is memory-mapped and validated (safetensors.h); the index must agree with the
// shards exactly: each tensor it names is in the shard it names, and no shard holds a tensor the
// index does not list (or lists elsewhere). A directory with neither file, an index naming a
// missing shard, or a disagreement is refused with an error naming the file.
//
// Thread-safety: immutable after open().
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/io/safetensors.h"

namespace vellum::model {

inline constexpr const char* kHfSafetensorsFile = "model.safetensors";
inline constexpr const char* kHfSafetensorsIndexFile = "model.safetensors.index.json";

class HfCheckpoint {
 public:
  // Throws vellum::Error (kIo, kInvalidModel) naming the file and the problem.
  static HfCheckpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<std::shared_ptr<const SafetensorsFile>>& shards() const { return shards_; }
  // Every tensor of every shard, in shard order then data order.
  const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;
  // The shard file holding `tensor` (for error messages).
  const std::filesystem::path& file_of(const SafetensorsTensor& tensor) const;

 private:
  std::filesystem::path dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::vector<const SafetensorsTensor*> tensors_;
  std::unordered_map<std::string_view, size_t> index_;  // name -> tensors_ index
  std::unordered_map<const SafetensorsTensor*, size_t> shard_of_;
};

}  // namespace vellum::model
