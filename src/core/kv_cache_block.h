// Metadata of one KV cache block (spec §1.1). The bytes live in model/KvCache; this is bookkeeping.
#pragma once

#include <cstdint>
#include <optional>

#include "core/block_hash.h"

namespace vellum::core {

using BlockId = int32_t;

// The null block: a placeholder in block tables (sliding-window holes, padding). Never
// allocated, freed, cached or reference counted.
inline constexpr BlockId kNullBlockId = 0;

struct KVCacheBlock {
  BlockId block_id = -1;  // -1 for the free queue's sentinels
  int32_t ref_cnt = 0;
  // Set while the block is in the prefix-cache index (possibly while free: eviction is lazy).
  std::optional<BlockHashWithGroupId> block_hash;
  // Intrusive links of FreeBlockQueue; both null when the block is not in a queue.
  KVCacheBlock* prev_free = nullptr;
  KVCacheBlock* next_free = nullptr;
  bool is_null = false;

  // Fails (kInternal) if a hash is already set.
  void set_block_hash(const BlockHashWithGroupId& key);
  void reset_hash() { block_hash.reset(); }
};

}  // namespace vellum::core
