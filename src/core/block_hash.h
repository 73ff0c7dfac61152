// Chained block hashing for prefix caching (spec §1.5).
//
// A block's hash is SHA-256 over a canonical encoding of (parent hash, the block's token ids,
// extra keys). Chaining makes every hash a hash of the whole prefix. Only full blocks are hashed.
// SHA-256 (not a fast non-cryptographic hash) because a collision would let one tenant read
// another tenant's KV cache; the cost is ~1 µs per 16-token block, paid once per block.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace vellum::core {

using TokenId = int32_t;

// A 256-bit digest. Value type, compared bytewise.
struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
  // The first 8 bytes, for hash tables (the digest is uniformly distributed).
  uint64_t prefix64() const {
    uint64_t v;
    std::memcpy(&v, bytes.data(), sizeof(v));
    return v;
  }
  std::string to_hex() const;
};

// The key of the cache index: a block hash plus the KV cache group it belongs to.
struct BlockHashWithGroupId {
  BlockHash hash;
  int32_t group_id = 0;

  friend bool operator==(const BlockHashWithGroupId&, const BlockHashWithGroupId&) = default;
};

struct BlockHashWithGroupIdHasher {
  size_t operator()(const BlockHashWithGroupId& k) const {
    return static_cast<size_t>(k.hash.prefix64() ^ (static_cast<uint64_t>(k.group_id) * 0x9E3779B97F4A7C15ull));
  }
};

// A multimodal item placed in the prompt (identifier = content hash of the item). Items of a
// request are sorted by offset.
struct MultiModalFeature {
  std::string identifier;
  int64_t offset = 0;  // first token position of the item
  int64_t length = 0;  // number of placeholder tokens
};

// One extra key: a plain string (LoRA name, cache salt) or a multimodal (identifier, offset of the
// item relative to the block start; negative when the item began in an earlier block).
using MultiModalKey = std::pair<std::string, int64_t>;
using ExtraKey = std::variant<std::string, MultiModalKey>;
// nullopt means "no extra keys" (upstream None), which hashes differently from an empty tuple.
using ExtraKeys = std::optional<std::vector<ExtraKey>>;

// The inputs of a request that feed the extra keys.
struct ExtraKeySources {
  std::span<const MultiModalFeature> mm_features;  // sorted by offset
  std::string_view lora_name;                      // empty: no adapter
  std::string_view cache_salt;                     // empty: no salt
};

struct ExtraKeysResult {
  ExtraKeys keys;
  int next_mm_idx = 0;  // where the next block's multimodal scan starts
};

// Extra keys of the token range [start, end) in this order: LoRA name, overlapping multimodal
// items, cache salt (only when start == 0). start_mm_idx < 0 counts from the end (-1: last item).
ExtraKeysResult generate_block_hash_extra_keys(const ExtraKeySources& sources, int64_t start,
                                               int64_t end, int start_mm_idx);

// hash((parent or NONE_HASH, tokens, extra)).
BlockHash hash_block_tokens(const BlockHash& none_hash, const std::optional<BlockHash>& parent,
                            std::span<const TokenId> token_ids, const ExtraKeys& extra_keys);

// Hashes the newly completed full blocks of a token sequence. Stateless apart from its
// configuration; copied by value into each Request.
class BlockHasher {
 public:
  // `seed` makes NONE_HASH reproducible: NONE_HASH = SHA-256("vellum.none_hash" + seed).
  explicit BlockHasher(int block_size, std::string_view seed = "");

  int block_size() const { return block_size_; }
  const BlockHash& none_hash() const { return none_hash_; }

  // Appends to `block_hashes` the hashes of every full block of `all_token_ids` past the ones
  // already in `block_hashes`. Does nothing when no new block is full.
  void extend_block_hashes(std::span<const TokenId> all_token_ids, const ExtraKeySources& sources,
                           std::vector<BlockHash>& block_hashes) const;

 private:
  int block_size_;
  BlockHash none_hash_;
};

}  // namespace vellum::core
