#include "core/sliding_window.h"

#include <algorithm>

namespace vellum::core {

std::vector<BlockId> remove_skipped_blocks(std::vector<BlockId>& block_ids, int num_computed_tokens,
                                           int sliding_window, int block_size) {
  std::vector<BlockId> removed;
  const int num_skipped_tokens = sliding_window_num_skipped_tokens(num_computed_tokens, sliding_window);
  if (num_skipped_tokens <= 0) return removed;
  const int num_skipped_blocks =
      std::min(num_skipped_tokens / block_size, static_cast<int>(block_ids.size()));
  for (int i = num_skipped_blocks - 1; i >= 0; --i) {
    BlockId& id = block_ids[static_cast<size_t>(i)];
    if (id == kNullBlockId) break;  // everything before was recycled by an earlier call
    removed.push_back(id);
    id = kNullBlockId;
  }
  return removed;
}

std::vector<BlockId> find_longest_cache_hit_sliding_window(
    std::span<const BlockHash> block_hashes, int max_length, int sliding_window, int block_size,
    bool use_eagle, const std::function<std::optional<BlockId>(const BlockHash&)>& lookup) {
  int num_contiguous_needed = (sliding_window - 1 + block_size - 1) / block_size;
  if (use_eagle) ++num_contiguous_needed;
  const int max_num_blocks =
      std::min(max_length / block_size, static_cast<int>(block_hashes.size()));
  std::vector<BlockId> computed(static_cast<size_t>(max_num_blocks), kNullBlockId);
  int num_contiguous = 0;
  bool match_found = false;
  for (int i = max_num_blocks - 1; i >= 0; --i) {
    if (auto id = lookup(block_hashes[static_cast<size_t>(i)])) {
      computed[static_cast<size_t>(i)] = *id;
      ++num_contiguous;
      if (num_contiguous >= num_contiguous_needed) {
        computed.resize(static_cast<size_t>(i + num_contiguous));
        match_found = true;
        break;
      }
    } else {
      num_contiguous = 0;
    }
  }
  // Without a full run, the cached run at the very start (possibly empty) is still a hit.
  if (!match_found) computed.resize(static_cast<size_t>(num_contiguous));
  if (use_eagle && !computed.empty()) computed.pop_back();
  return computed;
}

}  // namespace vellum::core
