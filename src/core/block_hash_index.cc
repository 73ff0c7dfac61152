#include "core/block_hash_index.h"

#include <algorithm>

namespace vellum::core {

std::optional<BlockId> BlockHashIndex::get_one_block(const BlockHashWithGroupId& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second.front();
}

std::vector<BlockId> BlockHashIndex::get_all_blocks(const BlockHashWithGroupId& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return {};
  return it->second;
}

void BlockHashIndex::insert(const BlockHashWithGroupId& key, BlockId block_id) {
  map_[key].push_back(block_id);
  ++num_blocks_;
}

std::optional<BlockId> BlockHashIndex::pop(const BlockHashWithGroupId& key, BlockId block_id) {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  auto& ids = it->second;
  auto pos = std::find(ids.begin(), ids.end(), block_id);
  if (pos == ids.end()) return std::nullopt;
  ids.erase(pos);
  --num_blocks_;
  if (ids.empty()) map_.erase(it);
  return block_id;
}

}  // namespace vellum::core
