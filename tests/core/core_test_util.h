// Helpers shared by the core/ tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/request.h"

namespace vellum::core::testing {

inline std::vector<TokenId> repeat(TokenId t, int n) { return std::vector<TokenId>(static_cast<size_t>(n), t); }

inline std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::vector<TokenId> iota_tokens(int n, TokenId start = 0) {
  std::vector<TokenId> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

// A request hashed with block size `bs` (no hasher when bs == 0).
inline Request make_request(const std::string& id, std::vector<TokenId> tokens, int bs,
                            RequestParams params = {}) {
  std::optional<BlockHasher> hasher;
  if (bs > 0) hasher.emplace(bs);
  return Request(id, std::move(tokens), std::move(params), hasher);
}

inline KVCacheConfig make_config(int num_blocks, int bs, bool enable_caching = true) {
  KVCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = bs;
  c.max_model_len = 8192;
  c.enable_caching = enable_caching;
  return c;
}

// alloc(req, n, hit_tokens, hit_blocks) of the spec.
inline std::optional<std::vector<BlockId>> alloc(KVCacheManager& kv, Request& req, int n,
                                                 int hit_tokens = 0,
                                                 std::vector<BlockId> hit_blocks = {},
                                                 int lookahead = 0) {
  AllocateSlotsArgs args;
  args.num_new_tokens = n;
  args.num_new_computed_tokens = hit_tokens;
  // A single-group manager: the hit is group 0's list.
  if (!hit_blocks.empty()) args.new_computed_blocks.push_back(std::move(hit_blocks));
  args.num_lookahead_tokens = lookahead;
  return kv.allocate_slots(req, args);
}

inline std::vector<BlockId> ids(std::span<const BlockId> s) { return {s.begin(), s.end()}; }

}  // namespace vellum::core::testing
