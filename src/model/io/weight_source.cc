#include "model/io/weight_source.h"

#include "common/check.h"

namespace vellum::model {

WeightSource::WeightSource(std::filesystem::path path, std::vector<gguf::TensorInfo> tensors,
                           std::vector<std::shared_ptr<const void>> keep_alive)
    : path_(std::move(path)), tensors_(std::move(tensors)), keep_alive_(std::move(keep_alive)) {
  index_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const bool inserted = index_.emplace(tensors_[i].name, i).second;
    VELLUM_CHECK(inserted, ErrorCode::kInvalidModel, "{}: tensor '{}' appears twice",
                 path_.string(), tensors_[i].name);
  }
}

std::shared_ptr<const WeightSource> WeightSource::from_gguf(
    std::shared_ptr<const gguf::GgufFile> file) {
  VELLUM_ASSERT(file != nullptr);
  std::filesystem::path path = file->path();
  std::vector<gguf::TensorInfo> tensors = file->tensors();
  return std::make_shared<const WeightSource>(
      std::move(path), std::move(tensors),
      std::vector<std::shared_ptr<const void>>{std::move(file)});
}

const gguf::TensorInfo* WeightSource::find_tensor(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace vellum::model
