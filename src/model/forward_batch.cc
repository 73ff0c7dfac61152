#include "model/forward_batch.h"

#include <algorithm>

#include "common/check.h"

namespace vellum::model {

void ForwardBatch::add_sequence(const int32_t* tokens, int32_t num_new_tokens, int32_t num_cached,
                                std::span<const std::span<const int32_t>> group_block_ids,
                                int32_t block_size, int32_t num_logits) {
  VELLUM_CHECK(num_new_tokens > 0, ErrorCode::kInternal, "a batch run needs at least one token");
  VELLUM_CHECK(num_logits >= 0 && num_logits <= num_new_tokens, ErrorCode::kInternal,
               "num_logits {} out of range for a run of {} tokens", num_logits, num_new_tokens);
  VELLUM_CHECK(!group_block_ids.empty(), ErrorCode::kInternal, "a sequence without block tables");
  if (query_start_loc.empty()) {
    query_start_loc.push_back(0);
    kv_groups.resize(group_block_ids.size());
    pending_tables_.resize(group_block_ids.size());
  }
  VELLUM_CHECK(group_block_ids.size() == kv_groups.size(), ErrorCode::kInternal,
               "a sequence with {} KV cache groups in a batch of {}", group_block_ids.size(),
               kv_groups.size());
  const int32_t seq_len = num_cached + num_new_tokens;
  for (size_t g = 0; g < group_block_ids.size(); ++g) {
    const std::span<const int32_t> block_ids = group_block_ids[g];
    VELLUM_CHECK(static_cast<int64_t>(block_ids.size()) * block_size >= seq_len,
                 ErrorCode::kInternal, "block table of {} blocks cannot hold {} tokens",
                 block_ids.size(), seq_len);
    std::vector<int64_t>& slots = kv_groups[g].slot_mapping;
    for (int32_t pos = num_cached; pos < seq_len; ++pos) {
      const int32_t block = block_ids[static_cast<size_t>(pos / block_size)];
      VELLUM_CHECK(block != 0, ErrorCode::kInternal,
                   "position {} of a run maps to the null block (a sliding-window hole)", pos);
      slots.push_back(static_cast<int64_t>(block) * block_size + pos % block_size);
    }
    pending_tables_[g].emplace_back(block_ids.begin(), block_ids.end());
  }
  for (int32_t i = 0; i < num_new_tokens; ++i) {
    token_ids.push_back(tokens[i]);
    positions.push_back(num_cached + i);
  }
  const auto end = static_cast<int32_t>(token_ids.size());
  for (int32_t i = end - num_logits; i < end; ++i) logits_indices.push_back(i);
  seq_lens.push_back(seq_len);
  query_start_loc.push_back(static_cast<int32_t>(token_ids.size()));
}

void ForwardBatch::add_sequence(const int32_t* tokens, int32_t num_new_tokens, int32_t num_cached,
                                const int32_t* block_ids, int32_t num_blocks, int32_t block_size,
                                int32_t num_logits) {
  const std::span<const int32_t> table(block_ids, static_cast<size_t>(num_blocks));
  add_sequence(tokens, num_new_tokens, num_cached, std::span(&table, 1), block_size, num_logits);
}

void ForwardBatch::finalize() {
  for (size_t g = 0; g < kv_groups.size(); ++g) {
    KvGroupTables& t = kv_groups[g];
    const auto& rows = pending_tables_[g];
    t.max_blocks_per_seq = 1;
    for (const auto& row : rows) {
      t.max_blocks_per_seq = std::max<int32_t>(t.max_blocks_per_seq, static_cast<int32_t>(row.size()));
    }
    t.block_tables.assign(rows.size() * static_cast<size_t>(t.max_blocks_per_seq), 0);
    for (size_t s = 0; s < rows.size(); ++s) {
      std::copy(rows[s].begin(), rows[s].end(),
                t.block_tables.begin() + static_cast<int64_t>(s) * t.max_blocks_per_seq);
    }
  }
  pending_tables_.clear();
}

}  // namespace vellum::model
