// KVCacheManager: the V0 features V1 dropped (spec §2.10) — watermark admission, forks with
// copy-on-write, and the host swap tier — plus the invariant check over both tiers.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "core/kv_cache_manager.h"

namespace vellum::core {
namespace {

// Watermark in blocks, as V0 computes it: int(watermark * total).
int watermark_blocks(double watermark, int num_usable_blocks) {
  return static_cast<int>(watermark * num_usable_blocks);
}

}  // namespace

AllocStatus KVCacheManager::can_allocate(const Request& request, int num_lookahead_tokens) const {
  int num_required = 0;
  for (const std::optional<int>& window : windows_) {
    int n = cdiv_blocks(request.num_tokens() + num_lookahead_tokens);
    if (window) n = std::min(n, cdiv_blocks(*window) + 1);
    num_required += n;
  }
  const int num_usable = pool_.num_blocks() - 1;
  const int num_watermark = watermark_blocks(config_.watermark, num_usable);
  if (num_usable - num_required < num_watermark) return AllocStatus::kNever;
  if (pool_.num_free_blocks() - num_required >= num_watermark) return AllocStatus::kOk;
  return AllocStatus::kLater;
}

void KVCacheManager::fork(std::string_view parent_id, const std::string& child_id) {
  auto parent = device_tables_.find(parent_id);
  VELLUM_CHECK(parent != device_tables_.end(), ErrorCode::kInvalidArgument,
               "fork: parent request {} holds no device blocks (not admitted, freed or swapped)",
               parent_id);
  VELLUM_CHECK(!is_resident(child_id) && !is_swapped(child_id), ErrorCode::kInvalidArgument,
               "fork: child request id {} is already in use", child_id);
  DeviceTable child = parent->second;  // copy before emplace: emplace may rehash
  for (const GroupTable& t : child) pool_.touch(t.block_ids);
  device_tables_.emplace(child_id, std::move(child));
  debug_check();
}

int KVCacheManager::num_copy_on_write_blocks(const GroupTable& table, int first_write_token) const {
  int n = 0;
  for (size_t i = static_cast<size_t>(first_write_token / config_.block_size);
       i < table.block_ids.size(); ++i) {
    const BlockId id = table.block_ids[i];
    if (id != kNullBlockId && pool_.block(id).ref_cnt > 1) ++n;
  }
  return n;
}

void KVCacheManager::copy_on_write(GroupTable& table, int first_write_token) {
  for (size_t i = static_cast<size_t>(first_write_token / config_.block_size);
       i < table.block_ids.size(); ++i) {
    const BlockId src = table.block_ids[i];
    if (src == kNullBlockId || pool_.block(src).ref_cnt <= 1) continue;
    const BlockId dst = pool_.get_new_blocks(1).front();
    const BlockId drop[] = {src};
    pool_.free_blocks(drop);  // the sibling keeps src; its ref_cnt stays > 0
    table.block_ids[i] = dst;
    pending_copies_.push_back({src, dst});
    // dst carries no hash: let cache_blocks hash it again once full.
    table.num_cached_blocks = std::min(table.num_cached_blocks, static_cast<int>(i));
  }
}

std::vector<BlockCopy> KVCacheManager::take_copy_on_writes() {
  std::vector<BlockCopy> out;
  out.swap(pending_copies_);
  return out;
}

bool KVCacheManager::can_swap_out(std::span<const std::string> request_ids) const {
  std::unordered_set<BlockId> distinct;
  for (const std::string& id : request_ids) {
    auto it = device_tables_.find(id);
    VELLUM_CHECK(it != device_tables_.end(), ErrorCode::kInvalidArgument,
                 "can_swap_out: request {} holds no device blocks", id);
    for (const GroupTable& t : it->second) {
      for (BlockId b : t.block_ids) {
        if (b != kNullBlockId) distinct.insert(b);
      }
    }
  }
  return static_cast<int>(distinct.size()) <= host_pool_.num_free_blocks();
}

std::vector<BlockSwap> KVCacheManager::swap_out(std::span<const std::string> request_ids) {
  // Validate everything before mutating anything.
  std::vector<BlockId> distinct;  // first-seen order
  std::unordered_map<BlockId, size_t> slot_of;
  for (size_t r = 0; r < request_ids.size(); ++r) {
    const std::string& id = request_ids[r];
    auto it = device_tables_.find(id);
    VELLUM_CHECK(it != device_tables_.end(), ErrorCode::kInvalidArgument,
                 "swap_out: request {} holds no device blocks (not admitted, freed or already "
                 "swapped out)", id);
    VELLUM_CHECK(std::find(request_ids.begin(), request_ids.begin() + static_cast<ptrdiff_t>(r), id) ==
                     request_ids.begin() + static_cast<ptrdiff_t>(r),
                 ErrorCode::kInvalidArgument, "swap_out: request {} is listed twice", id);
    for (const GroupTable& t : it->second) {
      for (BlockId b : t.block_ids) {
        if (b != kNullBlockId && slot_of.emplace(b, distinct.size()).second) distinct.push_back(b);
      }
    }
  }
  VELLUM_CHECK(static_cast<int>(distinct.size()) <= host_pool_.num_free_blocks(),
               ErrorCode::kOutOfMemory,
               "swap_out needs {} host blocks but {} are free; check can_swap_out first or raise "
               "the swap space", distinct.size(), host_pool_.num_free_blocks());

  const std::vector<BlockId> host_ids = host_pool_.allocate(static_cast<int>(distinct.size()));
  std::vector<bool> used(distinct.size(), false);  // the first reference owns the allocation
  for (const std::string& id : request_ids) {
    auto it = device_tables_.find(id);
    HostTable host(it->second.size());
    for (size_t g = 0; g < it->second.size(); ++g) {
      const std::vector<BlockId>& device = it->second[g].block_ids;
      host[g].reserve(device.size());
      for (BlockId b : device) {
        if (b == kNullBlockId) {
          host[g].push_back(-1);
          continue;
        }
        const size_t slot = slot_of.at(b);
        if (used[slot]) {
          host_pool_.incref(host_ids[slot]);
        } else {
          used[slot] = true;
        }
        host[g].push_back(host_ids[slot]);
      }
      std::vector<BlockId> reversed(device.rbegin(), device.rend());
      pool_.free_blocks(reversed);
    }
    device_tables_.erase(it);
    host_tables_.emplace(id, std::move(host));
  }
  std::vector<BlockSwap> mapping;
  mapping.reserve(distinct.size());
  for (size_t i = 0; i < distinct.size(); ++i) {
    // A block copied on write in this step (its request was served, then preempted) does not
    // hold its data yet: swap-outs run before the copies, and its device block may be reused in
    // the same step. Swap out the copy's source instead, which holds the same data until then,
    // and drop the copy.
    BlockId src = distinct[i];
    auto copy = std::find_if(pending_copies_.begin(), pending_copies_.end(),
                             [&](const BlockCopy& c) { return c.dst == distinct[i]; });
    if (copy != pending_copies_.end()) {
      src = copy->src;
      pending_copies_.erase(copy);
    }
    mapping.push_back({src, host_ids[i]});
  }
  debug_check();
  return mapping;
}

void KVCacheManager::drop_copies_into_free_blocks() {
  std::erase_if(pending_copies_,
                [&](const BlockCopy& c) { return pool_.block(c.dst).ref_cnt == 0; });
}

AllocStatus KVCacheManager::can_swap_in(std::span<const Request* const> group,
                                        int num_lookahead_tokens) const {
  std::unordered_set<BlockId> distinct;
  int num_touched = 0;
  for (const Request* request : group) {
    auto it = host_tables_.find(request->request_id());
    VELLUM_CHECK(it != host_tables_.end(), ErrorCode::kInvalidArgument,
                 "can_swap_in: request {} is not swapped out", request->request_id());
    // Blocks for the tokens not yet in the table (unseen tokens and lookahead slots).
    const int num_slots =
        std::min(request->num_tokens() + num_lookahead_tokens, config_.max_model_len);
    for (const std::vector<BlockId>& ids : it->second) {
      for (BlockId h : ids) {
        if (h >= 0) distinct.insert(h);
      }
      num_touched += std::max(cdiv_blocks(num_slots) - static_cast<int>(ids.size()), 0);
    }
  }
  num_touched += static_cast<int>(distinct.size());
  const int num_usable = pool_.num_blocks() - 1;
  if (num_usable < num_touched) return AllocStatus::kNever;
  if (pool_.num_free_blocks() - num_touched >= watermark_blocks(config_.watermark, num_usable)) {
    return AllocStatus::kOk;
  }
  return AllocStatus::kLater;
}

std::vector<BlockSwap> KVCacheManager::swap_in(std::span<const Request* const> group) {
  std::vector<BlockId> distinct;
  std::unordered_map<BlockId, size_t> slot_of;
  for (size_t r = 0; r < group.size(); ++r) {
    const std::string& id = group[r]->request_id();
    auto it = host_tables_.find(id);
    VELLUM_CHECK(it != host_tables_.end(), ErrorCode::kInvalidArgument,
                 "swap_in: request {} is not swapped out", id);
    for (size_t q = 0; q < r; ++q) {
      VELLUM_CHECK(group[q]->request_id() != id, ErrorCode::kInvalidArgument,
                   "swap_in: request {} is listed twice", id);
    }
    for (const std::vector<BlockId>& ids : it->second) {
      for (BlockId h : ids) {
        if (h >= 0 && slot_of.emplace(h, distinct.size()).second) distinct.push_back(h);
      }
    }
  }
  VELLUM_CHECK(static_cast<int>(distinct.size()) <= pool_.num_free_blocks(),
               ErrorCode::kOutOfMemory,
               "swap_in needs {} device blocks but {} are free; check can_swap_in first",
               distinct.size(), pool_.num_free_blocks());

  const std::vector<BlockId> device_ids = pool_.get_new_blocks(static_cast<int>(distinct.size()));
  std::vector<bool> used(distinct.size(), false);
  for (const Request* request : group) {
    auto it = host_tables_.find(request->request_id());
    DeviceTable table(it->second.size());
    for (size_t g = 0; g < it->second.size(); ++g) {
      const std::vector<BlockId>& host = it->second[g];
      table[g].block_ids.reserve(host.size());
      for (BlockId h : host) {
        if (h < 0) {
          table[g].block_ids.push_back(kNullBlockId);
          continue;
        }
        const size_t slot = slot_of.at(h);
        const BlockId d = device_ids[slot];
        if (used[slot]) {
          const BlockId ref[] = {d};
          pool_.touch(ref);
        } else {
          used[slot] = true;
        }
        table[g].block_ids.push_back(d);
      }
      for (auto h = host.rbegin(); h != host.rend(); ++h) {
        if (*h >= 0) host_pool_.free(*h);
      }
      // The new device blocks carry no hash; cache_blocks hashes them again when next called.
      table[g].num_cached_blocks = 0;
    }
    host_tables_.erase(it);
    device_tables_.emplace(request->request_id(), std::move(table));
  }
  std::vector<BlockSwap> mapping;
  mapping.reserve(distinct.size());
  for (size_t i = 0; i < distinct.size(); ++i) mapping.push_back({distinct[i], device_ids[i]});
  debug_check();
  return mapping;
}

bool KVCacheManager::is_swapped(std::string_view request_id) const {
  return host_tables_.find(request_id) != host_tables_.end();
}

void KVCacheManager::check_invariants() const {
  pool_.check_invariants();
  host_pool_.check_invariants();
  std::vector<int> device_refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, tables] : device_tables_) {
    VELLUM_CHECK(!is_swapped(id), ErrorCode::kInternal,
                 "request {} is both resident and swapped out", id);
    VELLUM_CHECK(static_cast<int>(tables.size()) == num_groups(), ErrorCode::kInternal,
                 "request {} has {} group tables for {} KV cache groups", id, tables.size(),
                 num_groups());
    for (int g = 0; g < num_groups(); ++g) {
    const GroupTable& table = tables[static_cast<size_t>(g)];
    VELLUM_CHECK(table.num_cached_blocks >= 0 &&
                     table.num_cached_blocks <= static_cast<int>(table.block_ids.size()),
                 ErrorCode::kInternal, "request {} has num_cached_blocks {} for {} blocks", id,
                 table.num_cached_blocks, table.block_ids.size());
    for (size_t i = 0; i < table.block_ids.size(); ++i) {
      const BlockId b = table.block_ids[i];
      VELLUM_CHECK(b >= 0 && b < pool_.num_blocks(), ErrorCode::kInternal,
                   "request {} holds out-of-range block {}", id, b);
      if (b == kNullBlockId) continue;
      ++device_refs[static_cast<size_t>(b)];
      if (config_.enable_caching && static_cast<int>(i) < table.num_cached_blocks) {
        VELLUM_CHECK(pool_.block(b).block_hash.has_value() &&
                         pool_.block(b).block_hash->group_id == g,
                     ErrorCode::kInternal,
                     "request {} counts block {} (index {}, group {}) as cached but it has no "
                     "hash of that group", id, b, i, g);
      }
    }
    }
  }
  for (BlockId b = 1; b < pool_.num_blocks(); ++b) {
    VELLUM_CHECK(pool_.block(b).ref_cnt == device_refs[static_cast<size_t>(b)],
                 ErrorCode::kInternal, "block {} has ref_cnt {} but {} block-table references", b,
                 pool_.block(b).ref_cnt, device_refs[static_cast<size_t>(b)]);
  }
  std::vector<int> host_refs(static_cast<size_t>(host_pool_.num_blocks()), 0);
  for (const auto& [id, table] : host_tables_) {
    for (const std::vector<BlockId>& ids : table) {
      for (BlockId h : ids) {
        if (h < 0) continue;
        VELLUM_CHECK(h < host_pool_.num_blocks(), ErrorCode::kInternal,
                     "swapped request {} holds out-of-range host block {}", id, h);
        ++host_refs[static_cast<size_t>(h)];
      }
    }
  }
  for (BlockId h = 0; h < host_pool_.num_blocks(); ++h) {
    VELLUM_CHECK(host_pool_.ref_cnt(h) == host_refs[static_cast<size_t>(h)], ErrorCode::kInternal,
                 "host block {} has ref_cnt {} but {} swapped-table references", h,
                 host_pool_.ref_cnt(h), host_refs[static_cast<size_t>(h)]);
  }
}

}  // namespace vellum::core
