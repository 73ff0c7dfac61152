// KVCacheManager: the V1 part (spec §1.6-§1.8). Forks, copy-on-write and swap are in
// kv_cache_manager_v0.cc.
#include "core/kv_cache_manager.h"

#include <algorithm>

#include "common/check.h"
#include "core/sliding_window.h"

namespace vellum::core {

KVCacheManager::KVCacheManager(const KVCacheConfig& config)
    : config_(config),
      block_hasher_(config.block_size, config.hash_seed),
      pool_(BlockPoolConfig{.num_blocks = config.num_blocks,
                            .enable_caching = config.enable_caching,
                            .enable_kv_cache_events = config.enable_kv_cache_events}),
      host_pool_(config.num_host_blocks) {
  VELLUM_CHECK(config.block_size > 0, ErrorCode::kInvalidArgument,
               "block_size must be positive, got {}", config.block_size);
  VELLUM_CHECK(config.max_model_len > 0, ErrorCode::kInvalidArgument,
               "max_model_len must be positive, got {}", config.max_model_len);
  VELLUM_CHECK(!config.sliding_window || *config.sliding_window > 0,
               ErrorCode::kInvalidArgument, "sliding_window must be positive, got {}",
               config.sliding_window.value_or(0));
  VELLUM_CHECK(config.watermark >= 0.0 && config.watermark < 1.0, ErrorCode::kInvalidArgument,
               "watermark must be in [0, 1), got {}", config.watermark);
  if (config.log_stats) stats_.emplace();
}

int KVCacheManager::cdiv_blocks(int num_tokens) const {
  return (num_tokens + config_.block_size - 1) / config_.block_size;
}

int KVCacheManager::num_skipped_tokens(int num_computed_tokens) const {
  if (!config_.sliding_window) return 0;
  return sliding_window_num_skipped_tokens(num_computed_tokens, *config_.sliding_window);
}

void KVCacheManager::debug_check() const { VELLUM_DEBUG_ONLY(check_invariants()); }

ComputedBlocks KVCacheManager::get_computed_blocks(const Request& request) {
  ComputedBlocks result;
  if (!config_.enable_caching || request.skip_reading_prefix_cache()) return result;
  VELLUM_CHECK(request.block_hasher() &&
                   request.block_hasher()->block_size() == block_hasher_.block_size() &&
                   request.block_hasher()->none_hash() == block_hasher_.none_hash(),
               ErrorCode::kInvalidArgument,
               "request {} must be built with the manager's BlockHasher (block_size {}, same seed) "
               "when prefix caching is enabled; use KVCacheManager::block_hasher()",
               request.request_id(), config_.block_size);
  // The last token is always recomputed so that its logits exist.
  const int max_cache_hit_length = request.num_tokens() - 1;
  const auto hashes = request.block_hashes();
  if (max_cache_hit_length > 0) {
    if (config_.sliding_window) {
      result.block_ids = find_longest_cache_hit_sliding_window(
          hashes, max_cache_hit_length, *config_.sliding_window, config_.block_size,
          config_.use_eagle, [this](const BlockHash& h) { return pool_.get_cached_block(h, 0); });
    } else {
      const int max_num_blocks =
          std::min(max_cache_hit_length / config_.block_size, static_cast<int>(hashes.size()));
      for (int i = 0; i < max_num_blocks; ++i) {
        auto id = pool_.get_cached_block(hashes[static_cast<size_t>(i)], 0);
        if (!id) break;
        result.block_ids.push_back(*id);
      }
      // EAGLE needs the KV of the last hit block recomputed to get its hidden states.
      if (config_.use_eagle && !result.block_ids.empty()) result.block_ids.pop_back();
    }
  }
  result.num_computed_tokens = static_cast<int>(result.block_ids.size()) * config_.block_size;
  if (stats_) {
    stats_->record(request.num_tokens(), result.num_computed_tokens, request.num_preemptions > 0);
  }
  return result;
}

int KVCacheManager::num_blocks_to_allocate(const DeviceTable* table, int num_tokens,
                                           std::span<const BlockId> new_computed_blocks,
                                           int total_computed_tokens) const {
  const int num_required_blocks = cdiv_blocks(num_tokens);
  if (table != nullptr) {
    // A running request has no new prefix-cache hits.
    return std::max(num_required_blocks - static_cast<int>(table->block_ids.size()), 0);
  }
  const int num_skipped_blocks = num_skipped_tokens(total_computed_tokens) / config_.block_size;
  const int num_hit_blocks = static_cast<int>(new_computed_blocks.size());
  const int num_new_blocks =
      std::max(num_required_blocks - std::max(num_skipped_blocks, num_hit_blocks), 0);
  // Hit blocks with ref_cnt 0 sit in the free queue: touching them takes free capacity too.
  int num_evictable = 0;
  for (size_t i = static_cast<size_t>(std::min(num_skipped_blocks, num_hit_blocks));
       i < new_computed_blocks.size(); ++i) {
    const KVCacheBlock& b = pool_.block(new_computed_blocks[i]);
    if (!b.is_null && b.ref_cnt == 0) ++num_evictable;
  }
  return num_new_blocks + num_evictable;
}

std::optional<std::vector<BlockId>> KVCacheManager::allocate_slots(Request& request,
                                                                   const AllocateSlotsArgs& args) {
  const std::string& request_id = request.request_id();
  VELLUM_CHECK(args.num_new_tokens > 0, ErrorCode::kInvalidArgument,
               "allocate_slots for request {}: num_new_tokens must be > 0, got {}", request_id,
               args.num_new_tokens);
  VELLUM_CHECK(args.num_new_computed_tokens >= 0 && args.num_lookahead_tokens >= 0,
               ErrorCode::kInvalidArgument,
               "allocate_slots for request {}: negative hit ({}) or lookahead ({}) tokens",
               request_id, args.num_new_computed_tokens, args.num_lookahead_tokens);
  VELLUM_CHECK(!is_swapped(request_id), ErrorCode::kInvalidArgument,
               "request {} is swapped out; swap_in it before allocating slots", request_id);
  auto it = device_tables_.find(request_id);
  DeviceTable* table = it == device_tables_.end() ? nullptr : &it->second;
  VELLUM_CHECK(table == nullptr || args.new_computed_blocks.empty(), ErrorCode::kInvalidArgument,
               "request {} is already running: prefix-cache hit blocks are only for new requests",
               request_id);
  VELLUM_CHECK(config_.enable_caching || args.new_computed_blocks.empty(),
               ErrorCode::kInvalidArgument,
               "request {}: hit blocks passed although prefix caching is disabled", request_id);

  VELLUM_CHECK(args.num_new_computed_tokens ==
                   static_cast<int>(args.new_computed_blocks.size()) * config_.block_size,
               ErrorCode::kInvalidArgument,
               "request {}: num_new_computed_tokens {} does not match {} hit blocks of {} tokens; "
               "pass get_computed_blocks()'s result unchanged", request_id,
               args.num_new_computed_tokens, args.new_computed_blocks.size(), config_.block_size);
  // Catch scheduler bookkeeping slips early: a request without blocks has computed nothing, and a
  // running request's table covers everything it has computed.
  VELLUM_CHECK(table != nullptr || request.num_computed_tokens == 0, ErrorCode::kInvalidArgument,
               "request {} holds no blocks but has num_computed_tokens {}; reset it to 0 when the "
               "request is preempted (recompute)", request_id, request.num_computed_tokens);
  VELLUM_CHECK(table == nullptr ||
                   static_cast<int64_t>(table->block_ids.size()) * config_.block_size >=
                       std::min(request.num_computed_tokens, config_.max_model_len),
               ErrorCode::kInvalidArgument,
               "request {} has num_computed_tokens {} but its {} blocks hold only {} tokens",
               request_id, request.num_computed_tokens, table->block_ids.size(),
               table->block_ids.size() * static_cast<size_t>(config_.block_size));
  const int num_local_computed_tokens = request.num_computed_tokens + args.num_new_computed_tokens;
  const int total_computed_tokens = std::min(num_local_computed_tokens, config_.max_model_len);

  if (args.full_sequence_must_fit) {
    const int num_full_tokens = std::min(request.num_tokens(), config_.max_model_len);
    int num_needed =
        num_blocks_to_allocate(table, num_full_tokens, args.new_computed_blocks, total_computed_tokens);
    if (config_.sliding_window) {
      // A sliding-window request holds at most the window plus one chunk at a time.
      const int bound = cdiv_blocks(*config_.sliding_window - 1 + args.num_new_tokens +
                                    args.num_lookahead_tokens) + 1;
      num_needed = std::min(num_needed, bound);
    }
    if (num_needed > pool_.num_free_blocks()) return std::nullopt;
  }

  const int num_tokens_need_slot =
      std::min(total_computed_tokens + args.num_new_tokens + args.num_lookahead_tokens,
               config_.max_model_len);

  // Blocks wholly outside the window are dead whatever happens next; recycle them first so the
  // capacity check below sees them (vLLM does the same).
  if (table != nullptr && config_.sliding_window) {
    std::vector<BlockId> removed = remove_skipped_blocks(
        table->block_ids, total_computed_tokens, *config_.sliding_window, config_.block_size);
    pool_.free_blocks(removed);
  }

  int num_needed = num_blocks_to_allocate(table, num_tokens_need_slot, args.new_computed_blocks,
                                          total_computed_tokens);
  if (table != nullptr) num_needed += num_copy_on_write_blocks(*table, total_computed_tokens);
  if (num_needed > pool_.num_free_blocks()) {
    debug_check();
    return std::nullopt;
  }

  // ---- Commit: nothing below can fail for lack of blocks. ----
  if (table == nullptr) {
    table = &device_tables_[request_id];
    const int num_skipped_blocks = num_skipped_tokens(total_computed_tokens) / config_.block_size;
    std::span<const BlockId> hits = args.new_computed_blocks;
    hits = hits.subspan(std::min(static_cast<size_t>(num_skipped_blocks), hits.size()));
    pool_.touch(hits);
    table->block_ids.assign(static_cast<size_t>(num_skipped_blocks), kNullBlockId);
    table->block_ids.insert(table->block_ids.end(), hits.begin(), hits.end());
    table->num_cached_blocks = static_cast<int>(table->block_ids.size());
    if (request.num_cached_tokens < 0) request.num_cached_tokens = args.num_new_computed_tokens;
  } else {
    copy_on_write(*table, total_computed_tokens);
  }

  std::vector<BlockId> new_block_ids;
  const int num_new_blocks =
      cdiv_blocks(num_tokens_need_slot) - static_cast<int>(table->block_ids.size());
  if (num_new_blocks > 0) {
    new_block_ids = pool_.get_new_blocks(num_new_blocks);
    table->block_ids.insert(table->block_ids.end(), new_block_ids.begin(), new_block_ids.end());
  }

  // Only tokens that exist are cached: lookahead slots and drafts hold no verified KV yet.
  if (config_.enable_caching && !args.delay_cache_blocks) {
    cache_blocks(request, std::min(total_computed_tokens + args.num_new_tokens, request.num_tokens()));
  }
  debug_check();
  return new_block_ids;
}

void KVCacheManager::cache_blocks(const Request& request, int num_tokens) {
  if (!config_.enable_caching) return;
  auto it = device_tables_.find(request.request_id());
  VELLUM_CHECK(it != device_tables_.end(), ErrorCode::kInvalidArgument,
               "cache_blocks: request {} holds no device blocks", request.request_id());
  DeviceTable& table = it->second;
  const int num_full_blocks =
      std::min({num_tokens / config_.block_size, static_cast<int>(table.block_ids.size()),
                static_cast<int>(request.block_hashes().size())});
  if (table.num_cached_blocks >= num_full_blocks) return;
  pool_.cache_full_blocks(request, table.block_ids, table.num_cached_blocks, num_full_blocks,
                          config_.block_size, 0);
  table.num_cached_blocks = num_full_blocks;
  debug_check();
}

bool KVCacheManager::free(std::string_view request_id) {
  if (auto it = device_tables_.find(request_id); it != device_tables_.end()) {
    std::vector<BlockId> reversed(it->second.block_ids.rbegin(), it->second.block_ids.rend());
    pool_.free_blocks(reversed);
    device_tables_.erase(it);
    drop_copies_into_free_blocks();
    debug_check();
    return true;
  }
  if (auto it = host_tables_.find(request_id); it != host_tables_.end()) {
    for (auto id = it->second.block_ids.rbegin(); id != it->second.block_ids.rend(); ++id) {
      if (*id >= 0) host_pool_.free(*id);
    }
    host_tables_.erase(it);
    debug_check();
    return true;
  }
  return false;
}

bool KVCacheManager::is_resident(std::string_view request_id) const {
  return device_tables_.find(request_id) != device_tables_.end();
}

std::span<const BlockId> KVCacheManager::get_block_ids(std::string_view request_id) const {
  auto it = device_tables_.find(request_id);
  if (it == device_tables_.end()) return {};
  return it->second.block_ids;
}

int KVCacheManager::get_num_common_prefix_blocks(std::string_view request_id) const {
  auto it = device_tables_.find(request_id);
  if (it == device_tables_.end()) return 0;
  const int num_requests = static_cast<int>(device_tables_.size());
  int n = 0;
  for (BlockId id : it->second.block_ids) {
    if (id == kNullBlockId || pool_.block(id).ref_cnt != num_requests) break;
    ++n;
  }
  return n;
}

bool KVCacheManager::reset_prefix_cache() {
  if (!pool_.reset_prefix_cache()) return false;
  if (stats_) stats_->reset = true;
  // Cached-block counts stay valid: a reset only happens when no request holds blocks.
  debug_check();
  return true;
}

std::optional<PrefixCacheStats> KVCacheManager::make_prefix_cache_stats() {
  if (!stats_) return std::nullopt;
  PrefixCacheStats out = *stats_;
  *stats_ = PrefixCacheStats{};
  return out;
}

}  // namespace vellum::core
