// BlockHashToBlockMap (spec §1.4): the prefix-cache index, key -> blocks in insertion order.
// Duplicates are allowed (two physical blocks may carry the same hash) so that block tables stay
// append-only. Stores block ids; the BlockPool owns the blocks.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "core/block_hash.h"
#include "core/kv_cache_block.h"

namespace vellum::core {

class BlockHashIndex {
 public:
  // The first inserted block still present under `key`, or nullopt.
  std::optional<BlockId> get_one_block(const BlockHashWithGroupId& key) const;
  // All blocks under `key` in insertion order (empty when absent).
  std::vector<BlockId> get_all_blocks(const BlockHashWithGroupId& key) const;
  void insert(const BlockHashWithGroupId& key, BlockId block_id);
  // Removes exactly `block_id` from `key`; nullopt (and no change) if it is not there. The key
  // disappears with its last block.
  std::optional<BlockId> pop(const BlockHashWithGroupId& key, BlockId block_id);

  // Number of keys (not blocks).
  int num_keys() const { return static_cast<int>(map_.size()); }
  int num_blocks() const { return num_blocks_; }
  bool empty() const { return map_.empty(); }
  void clear() {
    map_.clear();
    num_blocks_ = 0;
  }
  // Calls fn(key, block_id) for every entry (invariant checks).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const auto& [key, entry] : map_) {
      fn(key, entry.first);
      for (BlockId id : entry.more) fn(key, id);
    }
  }

 private:
  // Almost always one block per key: the first is stored inline (no allocation); the rare
  // duplicates follow in insertion order.
  struct Entry {
    BlockId first;
    std::vector<BlockId> more;
  };
  std::unordered_map<BlockHashWithGroupId, Entry, BlockHashWithGroupIdHasher> map_;
  int num_blocks_ = 0;
};

}  // namespace vellum::core
