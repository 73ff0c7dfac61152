#include "model/io/hf_checkpoint.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/check.h"

namespace vellum::model {

namespace fs = std::filesystem;

HfCheckpoint HfCheckpoint::open(const fs::path& dir) {
  HfCheckpoint ckpt;
  ckpt.dir_ = dir;
  const fs::path single = dir / kHfSafetensorsFile;
  const fs::path index_path = dir / kHfSafetensorsIndexFile;
  // weight_map of the index: tensor name -> shard file name.
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shard_names;
  if (fs::exists(index_path)) {
    std::ifstream in(index_path, std::ios::binary);
    VELLUM_CHECK(in.good(), ErrorCode::kIo, "cannot open '{}'", index_path.string());
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      VELLUM_THROW(ErrorCode::kInvalidModel, "'{}' is not valid JSON: {}", index_path.string(),
                   e.what());
    }
    VELLUM_CHECK(index.is_object() && index.contains("weight_map") &&
                     index["weight_map"].is_object() && !index["weight_map"].empty(),
                 ErrorCode::kInvalidModel,
                 "'{}' has no \"weight_map\" object mapping tensor names to shard files",
                 index_path.string());
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      VELLUM_CHECK(shard.is_string(), ErrorCode::kInvalidModel,
                   "'{}': weight_map entry '{}' is not a file name", index_path.string(), tensor);
      const std::string shard_name = shard.get<std::string>();
      VELLUM_CHECK(!shard_name.empty() && fs::path(shard_name).filename() == shard_name,
                   ErrorCode::kInvalidModel,
                   "'{}': weight_map entry '{}' names '{}', which is not a file in the directory",
                   index_path.string(), tensor, shard_name);
      weight_map.emplace(tensor, shard_name);
      if (std::find(shard_names.begin(), shard_names.end(), shard_name) == shard_names.end()) {
        shard_names.push_back(shard_name);
      }
    }
    std::sort(shard_names.begin(), shard_names.end());
  } else if (fs::exists(single)) {
    shard_names.push_back(kHfSafetensorsFile);
  } else {
    VELLUM_THROW(ErrorCode::kInvalidModel,
                 "{}: no {} or {} in the directory; Vellum loads Hugging Face checkpoints in the "
                 "safetensors format (PyTorch .bin checkpoints are not supported)",
                 dir.string(), kHfSafetensorsFile, kHfSafetensorsIndexFile);
  }

  for (const std::string& name : shard_names) {
    const fs::path path = dir / name;
    VELLUM_CHECK(fs::exists(path), ErrorCode::kInvalidModel,
                 "'{}' names the shard '{}', which is missing from {}", index_path.string(), name,
                 dir.string());
    ckpt.shards_.push_back(SafetensorsFile::open(path));
  }
  for (size_t s = 0; s < ckpt.shards_.size(); ++s) {
    const SafetensorsFile& shard = *ckpt.shards_[s];
    for (const SafetensorsTensor& t : shard.tensors()) {
      if (!weight_map.empty()) {
        const auto it = weight_map.find(t.name);
        VELLUM_CHECK(it != weight_map.end(), ErrorCode::kInvalidModel,
                     "{}: tensor '{}' is not listed in '{}'; the shard does not match the index",
                     shard.path().string(), t.name, index_path.string());
        VELLUM_CHECK(it->second == shard.path().filename().string(), ErrorCode::kInvalidModel,
                     "{}: holds tensor '{}', which '{}' places in '{}'; the shard does not match "
                     "the index",
                     shard.path().string(), t.name, index_path.string(), it->second);
      }
      const bool inserted = ckpt.index_.emplace(t.name, ckpt.tensors_.size()).second;
      VELLUM_CHECK(inserted, ErrorCode::kInvalidModel, "{}: tensor '{}' appears in two shards",
                   shard.path().string(), t.name);
      ckpt.tensors_.push_back(&t);
      ckpt.shard_of_.emplace(&t, s);
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    VELLUM_CHECK(ckpt.index_.contains(tensor), ErrorCode::kInvalidModel,
                 "'{}' places tensor '{}' in '{}', but that shard does not hold it; the shard "
                 "does not match the index",
                 index_path.string(), tensor, shard);
  }
  return ckpt;
}

const SafetensorsTensor* HfCheckpoint::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : tensors_[it->second];
}

const fs::path& HfCheckpoint::file_of(const SafetensorsTensor& tensor) const {
  return shards_[shard_of_.at(&tensor)]->path();
}

}  // namespace vellum::model
