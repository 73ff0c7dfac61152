// KV cache events (spec §1.3): what entered and left the prefix cache, for external KV-aware
// routers. Emitted only when enabled in the BlockPool; drained with take_events().
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "core/block_hash.h"

namespace vellum::core {

struct BlockStored {
  std::vector<BlockHash> block_hashes;           // the newly cached blocks, in order
  std::optional<BlockHash> parent_block_hash;    // hash of the block before the first one
  std::vector<TokenId> token_ids;                // tokens of the cached range
  int block_size = 0;
  std::optional<int32_t> lora_id;                // nullopt: no adapter
  std::vector<ExtraKeys> extra_keys;             // one entry per cached block
  int group_idx = 0;
};

struct BlockRemoved {
  std::vector<BlockHash> block_hashes;
  int group_idx = 0;
};

struct AllBlocksCleared {};

using KVCacheEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

}  // namespace vellum::core
