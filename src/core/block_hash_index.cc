#include "core/block_hash_index.h"

#include <algorithm>

namespace vellum::core {

std::optional<BlockId> BlockHashIndex::get_one_block(const BlockHashWithGroupId& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second.first;
}

std::vector<BlockId> BlockHashIndex::get_all_blocks(const BlockHashWithGroupId& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return {};
  std::vector<BlockId> out{it->second.first};
  out.insert(out.end(), it->second.more.begin(), it->second.more.end());
  return out;
}

void BlockHashIndex::insert(const BlockHashWithGroupId& key, BlockId block_id) {
  auto [it, inserted] = map_.try_emplace(key, Entry{block_id, {}});
  if (!inserted) it->second.more.push_back(block_id);
  ++num_blocks_;
}

std::optional<BlockId> BlockHashIndex::pop(const BlockHashWithGroupId& key, BlockId block_id) {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  Entry& entry = it->second;
  if (entry.first == block_id) {
    if (entry.more.empty()) {
      map_.erase(it);
    } else {
      entry.first = entry.more.front();
      entry.more.erase(entry.more.begin());
    }
  } else {
    auto pos = std::find(entry.more.begin(), entry.more.end(), block_id);
    if (pos == entry.more.end()) return std::nullopt;
    entry.more.erase(pos);
  }
  --num_blocks_;
  return block_id;
}

}  // namespace vellum::core
