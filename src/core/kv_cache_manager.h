// KVCacheManager (spec §1.6-§1.8 and the V0 features of §2.10): per-request block tables on top of
// the BlockPool, prefix-cache lookup, slot allocation with lookahead and the full-sequence
// admission gate, sliding-window recycling, forks with copy-on-write, and a host swap tier.
//
// Pure bookkeeping on ids, counts and hashes: it never touches KV memory. Whatever moves bytes is
// returned to the caller as (src, dst) lists that the model runner applies before the step:
// take_copy_on_writes() -> copy_blocks, swap_out()/swap_in() -> swap_blocks.
//
// Ownership: the manager owns block tables keyed by request id; it does not own Requests and
// keeps no pointer to them. Not thread-safe: engine core thread only.
//
// Typical use by the scheduler (V1 semantics):
//   Request r(id, prompt, params, kv.block_hasher());         // hashes the prompt's full blocks
//   // admit a waiting request (r.num_computed_tokens == 0):
//   ComputedBlocks hit = kv.get_computed_blocks(r);
//   auto blocks = kv.allocate_slots(r, {.num_new_tokens = n,
//                                       .num_new_computed_tokens = hit.num_computed_tokens,
//                                       .new_computed_blocks = hit.block_ids,
//                                       .full_sequence_must_fit = true});
//   if (!blocks) { /* does not fit: stop admitting */ }
//   r.num_computed_tokens = hit.num_computed_tokens + n;      // the scheduler advances it
//   // a running request: kv.allocate_slots(r, {.num_new_tokens = n}); nullopt -> preempt:
//   kv.free(r.request_id()); r.num_computed_tokens = 0;
//   // before the model step: kv.get_block_ids(id) -> block table row;
//   // kv.take_copy_on_writes() -> copy_blocks; swap_out()/swap_in() results -> swap_blocks.
//   // after sampling: r.append_output_token_ids(t) (extends the hashes); finished -> kv.free(id).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/block_pool.h"
#include "core/host_block_pool.h"
#include "core/kv_events.h"
#include "core/prefix_cache_stats.h"
#include "core/request.h"

namespace vellum::core {

// One KV cache group: layers of one attention type that share a block table (vLLM's
// kv_cache_groups). All groups draw their blocks from the one BlockPool.
struct KVCacheGroupSpec {
  std::optional<int> sliding_window;  // tokens; nullopt = full attention
  friend bool operator==(const KVCacheGroupSpec&, const KVCacheGroupSpec&) = default;
};

struct KVCacheConfig {
  int num_blocks = 0;   // device blocks, including the null block 0 (so num_blocks - 1 usable)
  int block_size = 16;  // tokens per block (vLLM's CPU default is 128; tests use 16)
  int max_model_len = 8192;
  bool enable_caching = true;          // prefix caching
  // The KV cache groups (vLLM's hybrid KV cache manager). Empty: one group whose attention type is
  // `sliding_window` below. Several groups may share a type; at most two types may be mixed, and
  // then one of them must be full attention (Gemma 2/3: full + sliding window).
  std::vector<KVCacheGroupSpec> groups;
  std::optional<int> sliding_window;   // tokens; nullopt = full attention (single-group form)
  bool use_eagle = false;              // drop the last hit block (EAGLE drafts need its KV)
  bool log_stats = false;              // accumulate PrefixCacheStats
  bool enable_kv_cache_events = false;
  int num_host_blocks = 0;             // swap tier capacity in blocks; 0 = no swap tier
  double watermark = 0.01;             // V0: fraction of usable device blocks kept free on admission
  std::string hash_seed;               // seeds NONE_HASH (see BlockHasher); same seed, same hashes
};

// Block ids of one request, one list per KV cache group (group order of the config).
using GroupBlockIds = std::vector<std::vector<BlockId>>;

// Result of get_computed_blocks: the prefix-cache hit, the same number of blocks in every group.
// A sliding-window group's list may contain kNullBlockId (outside the window). The ref counts are
// not changed by the lookup.
struct ComputedBlocks {
  GroupBlockIds groups;  // empty on a miss
  int num_computed_tokens = 0;
  // Group 0's hit blocks: the whole hit of a single-group manager.
  const std::vector<BlockId>& block_ids() const {
    static const std::vector<BlockId> kNone;
    return groups.empty() ? kNone : groups[0];
  }
  // Keeps the first num_blocks hit blocks of every group (and adjusts the token count).
  void truncate(int num_blocks, int block_size);
};

struct AllocateSlotsArgs {
  int num_new_tokens = 0;            // tokens to compute this step (> 0)
  int num_new_computed_tokens = 0;   // prefix-cache hit tokens (new requests only)
  GroupBlockIds new_computed_blocks;  // the hit blocks from get_computed_blocks (.groups)
  int num_lookahead_tokens = 0;      // extra slots for speculative tokens
  bool delay_cache_blocks = false;   // do not cache full blocks in this call
  // Admission gate for waiting requests (scheduler_reserve_full_isl): fail unless the whole
  // current sequence (prompt plus prior output, capped at max_model_len) fits now.
  bool full_sequence_must_fit = false;
};

// V0 admission / swap-in answer.
enum class AllocStatus { kOk, kLater, kNever };

// One block copy for copy_blocks (device -> device), recorded by copy-on-write.
struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

// One block move for swap_blocks. swap_out: src = device id, dst = host id.
// swap_in: src = host id, dst = device id.
struct BlockSwap {
  BlockId src = 0;
  BlockId dst = 0;
  friend bool operator==(const BlockSwap&, const BlockSwap&) = default;
};

class KVCacheManager {
 public:
  explicit KVCacheManager(const KVCacheConfig& config);

  const KVCacheConfig& config() const { return config_; }
  int block_size() const { return config_.block_size; }
  int num_groups() const { return static_cast<int>(windows_.size()); }
  // The sliding window of group g (nullopt: full attention).
  std::optional<int> group_window(int g) const { return windows_[static_cast<size_t>(g)]; }
  bool has_sliding_window_groups() const { return !sliding_groups_.empty(); }
  // The hasher Requests must be built with for prefix caching (block size and seed of this
  // manager). get_computed_blocks rejects requests hashed differently.
  const BlockHasher& block_hasher() const { return block_hasher_; }

  // ---- V1 API (spec §1.6) ----

  // Longest prefix-cache hit, never covering the last token (its logits must be computed).
  // Empty when caching is off or the request skips reading the cache. Records stats if enabled.
  ComputedBlocks get_computed_blocks(const Request& request);

  // Makes room for args.num_new_tokens (+ lookahead) tokens after request.num_computed_tokens +
  // args.num_new_computed_tokens. Returns the newly appended block ids (possibly empty), or
  // nullopt when the pool cannot supply them; a nullopt leaves the manager untouched (hit blocks
  // are not touched), except that sliding-window blocks already outside the window are recycled.
  // For a running request whose shared (forked) last block would be written, the block is copied
  // first (copy-on-write): the table changes in place and take_copy_on_writes() returns the pair.
  // On the first successful allocation sets request.num_cached_tokens (if still -1).
  // Throws kInvalidArgument when num_new_tokens <= 0, when hit blocks are passed for a running
  // request, when the request is swapped out, or when request.num_computed_tokens disagrees with
  // the blocks held (non-zero without blocks; beyond what the table covers).
  [[nodiscard]] std::optional<std::vector<BlockId>> allocate_slots(Request& request,
                                                                   const AllocateSlotsArgs& args);

  // Caches the full blocks covering the first num_tokens tokens (capped by the request's block
  // hashes). allocate_slots does this itself unless delay_cache_blocks is set.
  void cache_blocks(const Request& request, int num_tokens);

  // Frees the request's blocks in reverse table order (the tail block is evicted first) and
  // forgets the request; a swapped-out request releases its host blocks. Returns false (and
  // changes nothing) for a request that holds no blocks: unknown, never allocated or already
  // freed — an abort can race with admission, so this is not an exception.
  bool free(std::string_view request_id);

  // Speculative decoding: frees the request's blocks past those covering its first num_tokens
  // tokens (in every group, tail first). After a verification step they hold only the KV of
  // rejected draft tokens; the next step allocates what it needs again. Cached blocks are never
  // released this way (only full blocks of accepted tokens are cached). No-op for a request that
  // holds no device blocks.
  void trim_blocks(std::string_view request_id, int num_tokens);

  // True if the request holds device blocks (admitted and not freed or swapped out).
  bool is_resident(std::string_view request_id) const;
  // The request's block table in group g (device ids, kNullBlockId for recycled sliding-window
  // blocks). Empty for an unknown request. Invalidated by the next mutation.
  std::span<const BlockId> get_block_ids(std::string_view request_id, int group = 0) const;
  // Blocks the request holds in all groups (null blocks not counted).
  int num_held_blocks(std::string_view request_id) const;
  // Leading blocks shared by every resident request (cascade attention; unused on CPU).
  int get_num_common_prefix_blocks(std::string_view request_id) const;

  double usage() const { return pool_.usage(); }
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  int num_resident_requests() const { return static_cast<int>(device_tables_.size()); }

  // Clears the prefix cache; false if any block is in use. Marks the stats as reset.
  bool reset_prefix_cache();
  // Stats since the last call, then resets them; nullopt unless config.log_stats.
  std::optional<PrefixCacheStats> make_prefix_cache_stats();
  std::vector<KVCacheEvent> take_events() { return pool_.take_events(); }

  // ---- V0 features (spec §2.10) ----

  // V0 admission check with watermark: required = cdiv(num_tokens + lookahead, bs) (capped by
  // the sliding window). kNever if it can never fit beside the watermark, kOk if it fits now.
  AllocStatus can_allocate(const Request& request, int num_lookahead_tokens = 0) const;

  // The child shares every block of the parent (ref counts up, nothing allocated). The caller
  // creates the child Request with the parent's tokens and num_computed_tokens. Throws
  // kInvalidArgument if the parent is not resident or the child id is already in use.
  void fork(std::string_view parent_id, const std::string& child_id);

  // The (src, dst) device block copies recorded by copy-on-write since the last call, less those
  // whose destination was freed or swapped out meanwhile.
  std::vector<BlockCopy> take_copy_on_writes();

  // True if the host tier has room for every distinct device block of the group.
  bool can_swap_out(std::span<const std::string> request_ids) const;
  // Moves the group's blocks to the host tier (blocks shared inside the group are copied once)
  // and frees the device blocks. Returns the (device, host) moves in table order; a block copied
  // on write since the last take_copy_on_writes() is moved from the copy's source, and the copy
  // is dropped (the runner applies swap-outs before copies). Throws
  // kInvalidArgument for a request that is not resident, kOutOfMemory (changing nothing) when the
  // host tier is too small: check can_swap_out first.
  std::vector<BlockSwap> swap_out(std::span<const std::string> request_ids);
  // kNever if the group plus its unseen tokens and lookahead exceed the device total, kOk if the
  // device keeps the watermark free afterwards, else kLater.
  AllocStatus can_swap_in(std::span<const Request* const> group, int num_lookahead_tokens = 0) const;
  // Moves a swapped-out group back to new device blocks; returns the (host, device) moves.
  // Throws kInvalidArgument for a request that is not swapped out, kOutOfMemory (changing nothing)
  // when the device pool cannot hold it.
  std::vector<BlockSwap> swap_in(std::span<const Request* const> group);
  bool is_swapped(std::string_view request_id) const;
  int num_free_host_blocks() const { return host_pool_.num_free_blocks(); }
  int num_host_blocks() const { return host_pool_.num_blocks(); }

  // ---- Introspection ----
  const BlockPool& block_pool() const { return pool_; }
  const HostBlockPool& host_pool() const { return host_pool_; }
  // Pool invariants plus: every resident block's ref count equals the number of table entries
  // referencing it, free blocks are referenced by no table, host ref counts match swapped tables.
  // Throws kInternal on the first violation. Runs after every mutation in debug builds.
  void check_invariants() const;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct GroupTable {
    std::vector<BlockId> block_ids;
    int num_cached_blocks = 0;  // blocks [0, n) are cached (or null)
  };
  // One GroupTable per KV cache group.
  using DeviceTable = std::vector<GroupTable>;
  // Per group: host ids, -1 where the device table held the null block (host id 0 is a real
  // block). Swap-in restores num_cached_blocks as 0: the new device blocks are unhashed.
  using HostTable = std::vector<std::vector<BlockId>>;
  template <typename V>
  using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

  int cdiv_blocks(int num_tokens) const;
  int num_skipped_tokens(int group, int num_computed_tokens) const;
  // Blocks of group g that allocating slots for num_tokens would take from the free queue.
  int num_blocks_to_allocate(int group, const GroupTable* table, int num_tokens,
                             std::span<const BlockId> new_computed_blocks,
                             int total_computed_tokens) const;
  // Longest hit of the groups `group_ids` (all of one attention type) within max_length tokens.
  GroupBlockIds find_longest_cache_hit(std::span<const int> group_ids,
                                       std::span<const BlockHash> hashes, int max_length) const;
  // Shared (ref_cnt > 1) blocks that a write starting at token first_write_token would hit.
  int num_copy_on_write_blocks(const GroupTable& table, int first_write_token) const;
  void copy_on_write(GroupTable& table, int first_write_token);
  // Forgets pending copies whose destination was freed before the step ran (its request was
  // preempted or finished right after its copy-on-write): nobody reads that block.
  void drop_copies_into_free_blocks();
  void debug_check() const;

  KVCacheConfig config_;
  std::vector<std::optional<int>> windows_;  // per group: sliding window, nullopt = full
  std::vector<int> full_groups_;             // full-attention group ids
  std::vector<int> sliding_groups_;          // sliding-window group ids (one window size)
  BlockHasher block_hasher_;
  BlockPool pool_;
  HostBlockPool host_pool_;
  StringMap<DeviceTable> device_tables_;
  StringMap<HostTable> host_tables_;
  std::vector<BlockCopy> pending_copies_;
  std::optional<PrefixCacheStats> stats_;
};

}  // namespace vellum::core
