#include "model/forward_batch.h"

#include <algorithm>

#include "common/check.h"

namespace vellum::model {

void ForwardBatch::add_sequence(const int32_t* tokens, int32_t num_new_tokens, int32_t num_cached,
                                const int32_t* block_ids, int32_t num_blocks, int32_t block_size,
                                int32_t num_logits) {
  VELLUM_CHECK(num_new_tokens > 0, ErrorCode::kInternal, "a batch run needs at least one token");
  VELLUM_CHECK(num_logits >= 0 && num_logits <= num_new_tokens, ErrorCode::kInternal,
               "num_logits {} out of range for a run of {} tokens", num_logits, num_new_tokens);
  const int32_t seq_len = num_cached + num_new_tokens;
  VELLUM_CHECK(static_cast<int64_t>(num_blocks) * block_size >= seq_len, ErrorCode::kInternal,
               "block table of {} blocks cannot hold {} tokens", num_blocks, seq_len);
  if (query_start_loc.empty()) query_start_loc.push_back(0);
  for (int32_t i = 0; i < num_new_tokens; ++i) {
    const int32_t pos = num_cached + i;
    token_ids.push_back(tokens[i]);
    positions.push_back(pos);
    slot_mapping.push_back(static_cast<int64_t>(block_ids[pos / block_size]) * block_size +
                           pos % block_size);
  }
  const auto end = static_cast<int32_t>(token_ids.size());
  for (int32_t i = end - num_logits; i < end; ++i) logits_indices.push_back(i);
  seq_lens.push_back(seq_len);
  query_start_loc.push_back(static_cast<int32_t>(token_ids.size()));
  pending_tables_.emplace_back(block_ids, block_ids + num_blocks);
}

void ForwardBatch::finalize() {
  max_blocks_per_seq = 1;
  for (const auto& row : pending_tables_) {
    max_blocks_per_seq = std::max<int32_t>(max_blocks_per_seq, static_cast<int32_t>(row.size()));
  }
  block_tables.assign(pending_tables_.size() * max_blocks_per_seq, 0);
  for (size_t s = 0; s < pending_tables_.size(); ++s) {
    std::copy(pending_tables_[s].begin(), pending_tables_[s].end(),
              block_tables.begin() + static_cast<int64_t>(s) * max_blocks_per_seq);
  }
  pending_tables_.clear();
}

}  // namespace vellum::model
