#include "core/kv_cache_block.h"

#include "common/check.h"

namespace vellum::core {

void KVCacheBlock::set_block_hash(const BlockHashWithGroupId& key) {
  VELLUM_CHECK(!block_hash.has_value(), ErrorCode::kInternal,
               "block {} already has a hash; reset_hash() it before caching it again", block_id);
  block_hash = key;
}

}  // namespace vellum::core
