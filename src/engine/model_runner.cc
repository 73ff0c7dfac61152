#include "engine/model_runner.h"

#include "common/check.h"

namespace vellum::engine {

ModelRunner::ModelRunner(model::Model& model, const model::KvCacheShape& shape, int64_t num_blocks,
                         int64_t num_host_blocks)
    : model_(model), cache_(shape, num_blocks) {
  if (num_host_blocks > 0) host_cache_.emplace(shape, num_host_blocks);
}

namespace {
void split(std::span<const BlockMove> moves, std::vector<int32_t>& src, std::vector<int32_t>& dst) {
  src.clear();
  dst.clear();
  for (const BlockMove& m : moves) {
    src.push_back(m.src);
    dst.push_back(m.dst);
  }
}
}  // namespace

void ModelRunner::apply_block_copies(std::span<const BlockMove> copies) {
  if (copies.empty()) return;
  split(copies, src_ids_, dst_ids_);
  cache_.copy_blocks(src_ids_.data(), dst_ids_.data(), static_cast<int64_t>(copies.size()));
}

void ModelRunner::swap_out(std::span<const BlockMove> moves) {
  if (moves.empty()) return;
  VELLUM_CHECK(host_cache_.has_value(), ErrorCode::kInternal, "swap-out without a swap space");
  split(moves, src_ids_, dst_ids_);
  model::KvCache::swap_blocks(*host_cache_, cache_, src_ids_.data(), dst_ids_.data(),
                              static_cast<int64_t>(moves.size()));
}

void ModelRunner::swap_in(std::span<const BlockMove> moves) {
  if (moves.empty()) return;
  VELLUM_CHECK(host_cache_.has_value(), ErrorCode::kInternal, "swap-in without a swap space");
  split(moves, src_ids_, dst_ids_);
  model::KvCache::swap_blocks(cache_, *host_cache_, src_ids_.data(), dst_ids_.data(),
                              static_cast<int64_t>(moves.size()));
}

std::span<float> ModelRunner::execute(std::span<const RunnerSequence> sequences) {
  batch_.clear();
  const auto block_size = static_cast<int32_t>(cache_.shape().block_size);
  for (const RunnerSequence& s : sequences) {
    tables_.assign(s.group_block_ids.begin(), s.group_block_ids.end());
    batch_.add_sequence(s.new_tokens.data(), static_cast<int32_t>(s.new_tokens.size()),
                        s.num_computed_tokens, tables_, block_size, s.num_logits);
  }
  batch_.finalize();
  const size_t need = static_cast<size_t>(batch_.num_logits() * vocab_size());
  if (logits_.size() < need) logits_.resize(need);
  model_.forward(batch_, cache_, logits_.data());
  return {logits_.data(), need};
}

}  // namespace vellum::engine
