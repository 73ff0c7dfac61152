// Test helpers for running a Model directly: a trivial block allocator and a loader.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace vellum::testing {

inline std::unique_ptr<model::Model> load_test_model(
    const std::filesystem::path& path,
    kernels::MatmulPrecision precision = kernels::MatmulPrecision::kAuto) {
  // A GGUF file, or a Hugging Face directory.
  return model::load_model(model::open_model_files(path), model::ModelLoadOptions{precision});
}

// Hands out blocks from a counter; block 0 stays the null block. Good enough for tests that
// drive the model without the KV cache manager.
class SequenceBlocks {
 public:
  explicit SequenceBlocks(int32_t block_size) : block_size_(block_size) {}
  // Makes sure sequence `seq` has room for `num_tokens` tokens.
  void reserve(size_t seq, int32_t num_tokens) {
    if (tables_.size() <= seq) tables_.resize(seq + 1);
    auto& table = tables_[seq];
    while (static_cast<int32_t>(table.size()) * block_size_ < num_tokens) {
      table.push_back(next_block_++);
    }
  }
  const std::vector<int32_t>& table(size_t seq) const { return tables_[seq]; }
  int32_t num_blocks_used() const { return next_block_; }

 private:
  int32_t block_size_;
  int32_t next_block_ = 1;
  std::vector<std::vector<int32_t>> tables_;
};

}  // namespace vellum::testing
