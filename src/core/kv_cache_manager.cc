// KVCacheManager: the V1 part (spec §1.6-§1.8). Forks, copy-on-write and swap are in
// kv_cache_manager_v0.cc.
#include "core/kv_cache_manager.h"

#include <algorithm>

#include "common/check.h"
#include "core/sliding_window.h"

namespace vellum::core {

void ComputedBlocks::truncate(int num_blocks, int block_size) {
  for (auto& g : groups) {
    if (static_cast<int>(g.size()) > num_blocks) g.resize(static_cast<size_t>(num_blocks));
  }
  if (num_blocks == 0) groups.clear();
  num_computed_tokens = std::min(num_computed_tokens, num_blocks * block_size);
}

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
  VELLUM_CHECK(config.groups.empty() || !config.sliding_window, ErrorCode::kInvalidArgument,
               "give the sliding window either per group (groups) or for the single group "
               "(sliding_window), not both");
  if (config.groups.empty()) {
    windows_.push_back(config.sliding_window);
  } else {
    for (const KVCacheGroupSpec& g : config.groups) windows_.push_back(g.sliding_window);
  }
  std::optional<int> window;
  for (int g = 0; g < num_groups(); ++g) {
    const std::optional<int>& w = windows_[static_cast<size_t>(g)];
    VELLUM_CHECK(!w || *w > 0, ErrorCode::kInvalidArgument,
                 "sliding_window must be positive, got {} (group {})", w.value_or(0), g);
    if (!w) {
      full_groups_.push_back(g);
      continue;
    }
    VELLUM_CHECK(!window || *window == *w, ErrorCode::kInvalidArgument,
                 "KV cache groups with sliding windows of {} and {} tokens: one window size per "
                 "model is supported", *window, *w);
    window = w;
    sliding_groups_.push_back(g);
  }
  VELLUM_CHECK(config.watermark >= 0.0 && config.watermark < 1.0, ErrorCode::kInvalidArgument,
               "watermark must be in [0, 1), got {}", config.watermark);
  if (config.log_stats) stats_.emplace();
}

int KVCacheManager::cdiv_blocks(int num_tokens) const {
  return (num_tokens + config_.block_size - 1) / config_.block_size;
}

int KVCacheManager::num_skipped_tokens(int group, int num_computed_tokens) const {
  const std::optional<int>& window = windows_[static_cast<size_t>(group)];
  if (!window) return 0;
  return sliding_window_num_skipped_tokens(num_computed_tokens, *window);
}

void KVCacheManager::debug_check() const { VELLUM_DEBUG_ONLY(check_invariants()); }

GroupBlockIds KVCacheManager::find_longest_cache_hit(std::span<const int> group_ids,
                                                    std::span<const BlockHash> hashes,
                                                    int max_length) const {
  GroupBlockIds out(group_ids.size());
  if (group_ids.empty() || max_length <= 0) return out;
  const std::optional<int>& window = windows_[static_cast<size_t>(group_ids[0])];
  if (!window) {
    // Full attention: left to right, every group must hit each block.
    const int max_num_blocks =
        std::min(max_length / config_.block_size, static_cast<int>(hashes.size()));
    for (int i = 0; i < max_num_blocks; ++i) {
      std::vector<BlockId> ids = pool_.get_cached_block(hashes[static_cast<size_t>(i)], group_ids);
      if (ids.empty()) break;
      for (size_t g = 0; g < group_ids.size(); ++g) out[g].push_back(ids[g]);
    }
    // EAGLE needs the KV of the last hit block recomputed to get its hidden states.
    if (config_.use_eagle && !out[0].empty()) {
      for (auto& g : out) g.pop_back();
    }
    return out;
  }
  // Sliding window: the search runs on the first group, a block counting as cached only when
  // every group of the type has it; the other groups' ids are read back at the same positions.
  out[0] = find_longest_cache_hit_sliding_window(
      hashes, max_length, *window, config_.block_size, config_.use_eagle,
      [&](const BlockHash& h) -> std::optional<BlockId> {
        std::vector<BlockId> ids = pool_.get_cached_block(h, group_ids);
        if (ids.empty()) return std::nullopt;
        return ids[0];
      });
  for (size_t g = 1; g < group_ids.size(); ++g) {
    out[g].resize(out[0].size(), kNullBlockId);
    for (size_t i = 0; i < out[0].size(); ++i) {
      if (out[0][i] == kNullBlockId) continue;
      out[g][i] = *pool_.get_cached_block(hashes[i], group_ids[g]);
    }
  }
  return out;
}

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
    // vLLM's hybrid coordinator: the full-attention hit first, then the sliding-window hit within
    // it (a shorter full-attention prefix always hits too), and the full hit cut to that length.
    GroupBlockIds full = find_longest_cache_hit(full_groups_, hashes, max_cache_hit_length);
    int hit_length = full_groups_.empty() ? max_cache_hit_length
                                          : static_cast<int>(full[0].size()) * config_.block_size;
    GroupBlockIds sliding = find_longest_cache_hit(sliding_groups_, hashes, hit_length);
    if (!sliding_groups_.empty()) hit_length = static_cast<int>(sliding[0].size()) * config_.block_size;
    const size_t num_hit_blocks = static_cast<size_t>(hit_length / config_.block_size);
    if (num_hit_blocks > 0) {
      result.groups.resize(static_cast<size_t>(num_groups()));
      for (size_t i = 0; i < full_groups_.size(); ++i) {
        full[i].resize(num_hit_blocks);
        result.groups[static_cast<size_t>(full_groups_[i])] = std::move(full[i]);
      }
      for (size_t i = 0; i < sliding_groups_.size(); ++i) {
        result.groups[static_cast<size_t>(sliding_groups_[i])] = std::move(sliding[i]);
      }
      result.num_computed_tokens = hit_length;
    }
  }
  if (stats_) {
    stats_->record(request.num_tokens(), result.num_computed_tokens, request.num_preemptions > 0);
  }
  return result;
}

int KVCacheManager::num_blocks_to_allocate(int group, const GroupTable* table, int num_tokens,
                                           std::span<const BlockId> new_computed_blocks,
                                           int total_computed_tokens) const {
  const int num_required_blocks = cdiv_blocks(num_tokens);
  if (table != nullptr) {
    // A running request has no new prefix-cache hits.
    return std::max(num_required_blocks - static_cast<int>(table->block_ids.size()), 0);
  }
  const int num_skipped_blocks = num_skipped_tokens(group, total_computed_tokens) / config_.block_size;
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
  VELLUM_CHECK(args.new_computed_blocks.empty() ||
                   static_cast<int>(args.new_computed_blocks.size()) == num_groups(),
               ErrorCode::kInvalidArgument,
               "request {}: hit blocks for {} KV cache groups, the manager has {}", request_id,
               args.new_computed_blocks.size(), num_groups());
  const size_t num_hit_blocks =
      args.new_computed_blocks.empty() ? 0 : args.new_computed_blocks[0].size();
  for (const auto& hits : args.new_computed_blocks) {
    VELLUM_CHECK(hits.size() == num_hit_blocks, ErrorCode::kInvalidArgument,
                 "request {}: hit block lists of different lengths across KV cache groups",
                 request_id);
  }
  VELLUM_CHECK(args.num_new_computed_tokens == static_cast<int>(num_hit_blocks) * config_.block_size,
               ErrorCode::kInvalidArgument,
               "request {}: num_new_computed_tokens {} does not match {} hit blocks of {} tokens; "
               "pass get_computed_blocks()'s result unchanged", request_id,
               args.num_new_computed_tokens, num_hit_blocks, config_.block_size);
  // Catch scheduler bookkeeping slips early: a request without blocks has computed nothing, and a
  // running request's table covers everything it has computed.
  VELLUM_CHECK(table != nullptr || request.num_computed_tokens == 0, ErrorCode::kInvalidArgument,
               "request {} holds no blocks but has num_computed_tokens {}; reset it to 0 when the "
               "request is preempted (recompute)", request_id, request.num_computed_tokens);
  VELLUM_CHECK(table == nullptr ||
                   static_cast<int64_t>((*table)[0].block_ids.size()) * config_.block_size >=
                       std::min(request.num_computed_tokens, config_.max_model_len),
               ErrorCode::kInvalidArgument,
               "request {} has num_computed_tokens {} but its {} blocks hold only {} tokens",
               request_id, request.num_computed_tokens, (*table)[0].block_ids.size(),
               (*table)[0].block_ids.size() * static_cast<size_t>(config_.block_size));
  const int num_local_computed_tokens = request.num_computed_tokens + args.num_new_computed_tokens;
  const int total_computed_tokens = std::min(num_local_computed_tokens, config_.max_model_len);
  const auto hits_of = [&](int g) -> std::span<const BlockId> {
    if (args.new_computed_blocks.empty()) return {};
    return args.new_computed_blocks[static_cast<size_t>(g)];
  };
  const auto group_table = [&](int g) -> GroupTable* {
    return table == nullptr ? nullptr : &(*table)[static_cast<size_t>(g)];
  };

  if (args.full_sequence_must_fit) {
    const int num_full_tokens = std::min(request.num_tokens(), config_.max_model_len);
    int num_needed = 0;
    for (int g = 0; g < num_groups(); ++g) {
      int n = num_blocks_to_allocate(g, group_table(g), num_full_tokens, hits_of(g),
                                     total_computed_tokens);
      if (const auto& window = windows_[static_cast<size_t>(g)]) {
        // A sliding-window request holds at most the window plus one chunk at a time.
        const int bound =
            cdiv_blocks(*window - 1 + args.num_new_tokens + args.num_lookahead_tokens) + 1;
        n = std::min(n, bound);
      }
      num_needed += n;
    }
    if (num_needed > pool_.num_free_blocks()) return std::nullopt;
  }

  const int num_tokens_need_slot =
      std::min(total_computed_tokens + args.num_new_tokens + args.num_lookahead_tokens,
               config_.max_model_len);

  // Blocks wholly outside the window are dead whatever happens next; recycle them first so the
  // capacity check below sees them (vLLM does the same).
  if (table != nullptr) {
    for (int g : sliding_groups_) {
      std::vector<BlockId> removed =
          remove_skipped_blocks((*table)[static_cast<size_t>(g)].block_ids, total_computed_tokens,
                                *windows_[static_cast<size_t>(g)], config_.block_size);
      pool_.free_blocks(removed);
    }
  }

  int num_needed = 0;
  for (int g = 0; g < num_groups(); ++g) {
    num_needed += num_blocks_to_allocate(g, group_table(g), num_tokens_need_slot, hits_of(g),
                                         total_computed_tokens);
    if (table != nullptr) num_needed += num_copy_on_write_blocks(*group_table(g), total_computed_tokens);
  }
  if (num_needed > pool_.num_free_blocks()) {
    debug_check();
    return std::nullopt;
  }

  // ---- Commit: nothing below can fail for lack of blocks. ----
  if (table == nullptr) {
    table = &device_tables_[request_id];
    table->resize(static_cast<size_t>(num_groups()));
    for (int g = 0; g < num_groups(); ++g) {
      GroupTable& t = (*table)[static_cast<size_t>(g)];
      const int num_skipped_blocks = num_skipped_tokens(g, total_computed_tokens) / config_.block_size;
      std::span<const BlockId> hits = hits_of(g);
      hits = hits.subspan(std::min(static_cast<size_t>(num_skipped_blocks), hits.size()));
      pool_.touch(hits);
      t.block_ids.assign(static_cast<size_t>(num_skipped_blocks), kNullBlockId);
      t.block_ids.insert(t.block_ids.end(), hits.begin(), hits.end());
      t.num_cached_blocks = static_cast<int>(t.block_ids.size());
    }
    if (request.num_cached_tokens < 0) request.num_cached_tokens = args.num_new_computed_tokens;
  } else {
    for (GroupTable& t : *table) copy_on_write(t, total_computed_tokens);
  }

  // New blocks are taken group by group; the result lists them in that order.
  std::vector<BlockId> new_block_ids;
  for (GroupTable& t : *table) {
    const int num_new_blocks = cdiv_blocks(num_tokens_need_slot) - static_cast<int>(t.block_ids.size());
    if (num_new_blocks <= 0) continue;
    std::vector<BlockId> ids = pool_.get_new_blocks(num_new_blocks);
    t.block_ids.insert(t.block_ids.end(), ids.begin(), ids.end());
    new_block_ids.insert(new_block_ids.end(), ids.begin(), ids.end());
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
  for (int g = 0; g < num_groups(); ++g) {
    GroupTable& table = it->second[static_cast<size_t>(g)];
    const int num_full_blocks =
        std::min({num_tokens / config_.block_size, static_cast<int>(table.block_ids.size()),
                  static_cast<int>(request.block_hashes().size())});
    if (table.num_cached_blocks >= num_full_blocks) continue;
    pool_.cache_full_blocks(request, table.block_ids, table.num_cached_blocks, num_full_blocks,
                            config_.block_size, g);
    table.num_cached_blocks = num_full_blocks;
  }
  debug_check();
}

bool KVCacheManager::free(std::string_view request_id) {
  if (auto it = device_tables_.find(request_id); it != device_tables_.end()) {
    for (const GroupTable& t : it->second) {
      std::vector<BlockId> reversed(t.block_ids.rbegin(), t.block_ids.rend());
      pool_.free_blocks(reversed);
    }
    device_tables_.erase(it);
    drop_copies_into_free_blocks();
    debug_check();
    return true;
  }
  if (auto it = host_tables_.find(request_id); it != host_tables_.end()) {
    for (const std::vector<BlockId>& ids : it->second) {
      for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
        if (*id >= 0) host_pool_.free(*id);
      }
    }
    host_tables_.erase(it);
    debug_check();
    return true;
  }
  return false;
}

void KVCacheManager::trim_blocks(std::string_view request_id, int num_tokens) {
  auto it = device_tables_.find(request_id);
  if (it == device_tables_.end()) return;
  const size_t num_kept = static_cast<size_t>(cdiv_blocks(std::max(num_tokens, 0)));
  for (GroupTable& t : it->second) {
    if (t.block_ids.size() <= num_kept) continue;
    VELLUM_CHECK(t.num_cached_blocks <= static_cast<int>(num_kept), ErrorCode::kInternal,
                 "trim_blocks: request {} would release {} cached blocks", request_id,
                 t.num_cached_blocks - static_cast<int>(num_kept));
    std::vector<BlockId> tail(t.block_ids.rbegin(),
                              t.block_ids.rend() - static_cast<ptrdiff_t>(num_kept));
    pool_.free_blocks(tail);
    t.block_ids.resize(num_kept);
  }
  drop_copies_into_free_blocks();
  debug_check();
}

bool KVCacheManager::is_resident(std::string_view request_id) const {
  return device_tables_.find(request_id) != device_tables_.end();
}

std::span<const BlockId> KVCacheManager::get_block_ids(std::string_view request_id,
                                                       int group) const {
  VELLUM_CHECK(group >= 0 && group < num_groups(), ErrorCode::kInvalidArgument,
               "KV cache group {} out of range [0, {})", group, num_groups());
  auto it = device_tables_.find(request_id);
  if (it == device_tables_.end()) return {};
  return it->second[static_cast<size_t>(group)].block_ids;
}

int KVCacheManager::num_held_blocks(std::string_view request_id) const {
  auto it = device_tables_.find(request_id);
  if (it == device_tables_.end()) return 0;
  int n = 0;
  for (const GroupTable& t : it->second) {
    n += static_cast<int>(std::count_if(t.block_ids.begin(), t.block_ids.end(),
                                        [](BlockId b) { return b != kNullBlockId; }));
  }
  return n;
}

int KVCacheManager::get_num_common_prefix_blocks(std::string_view request_id) const {
  auto it = device_tables_.find(request_id);
  if (it == device_tables_.end()) return 0;
  const int num_requests = static_cast<int>(device_tables_.size());
  int n = 0;
  for (BlockId id : it->second[0].block_ids) {
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
