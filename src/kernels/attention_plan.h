// The ISA-independent half of the vector paged-attention kernels (avx512/attention_avx512.cc,
// avx2/attention_avx2.cc): how a batch is cut into work items, how an item's keys are cut into
// partitions, whether the partitions are spread over threads (split-K, "flash-decoding"), and
// where the partial results live in the caller's workspace.
//
// Compiled without ISA flags, and everything here is plain data or defined out of line in
// kernels.cc: no inline code is built twice with different -m flags (the linker would keep
// one copy, maybe the AVX-512 one, for both).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace vellum::kernels::attention {

inline constexpr int kMaxRows = 16;  // query rows per work item: bounds registers and tile buffers

// Keys per partition. An item's keys are cut at absolute multiples of kPartitionKeys; each
// partition runs its own online softmax from scratch and the partials are merged in partition
// order (merge_partial in the ISA files), whether one thread walks them all or several threads
// share them. 512 keys = 8 tiles of 64 on AVX-512 (16 of 32 on AVX2): long enough that starting
// fresh and merging (num_rows × (head_dim + 2) floats) costs under 1 % of reading the partition's
// K and V (512 × head_dim × 2 values per kv head), short enough that a 4K context already gives 8
// partitions per kv head to spread over the threads. Changing it changes the rounding of every
// output with more than 512 keys (never its batch invariance).
inline constexpr int64_t kPartitionKeys = 512;

// Partitions are split over threads only when there are fewer work items than this many per
// thread (with more items, whole items already keep every thread busy); this is also what bounds
// the workspace for the partials.
inline constexpr int64_t kSplitItemsPerThread = 4;

struct Geometry {
  int64_t group;            // query heads per kv head
  int64_t heads_per_item;   // divides group, <= kMaxRows
  int64_t num_head_groups;  // group / heads_per_item
  int64_t tokens_per_item;  // tokens_per_item * heads_per_item <= kMaxRows
};
Geometry make_geometry(const PagedAttentionParams& p);

// A work item: up to tokens_per_item query tokens of one sequence × the heads_per_item query heads
// of one head group of one kv head.
struct Item {
  int64_t seq;
  int64_t kv_head;
  int64_t head_group;
  int64_t tok0;  // first query token of the item, relative to the sequence's first query token
};

// Where an item's rows and keys are. Row i (i < num_rows) is query token q_token0 + i / heads of
// the batch, at position pos0 + i / heads, and query head head0 + i % heads.
struct ItemRows {
  int64_t q_token0;
  int64_t pos0;
  int64_t head0;
  int64_t heads;     // Geometry::heads_per_item
  int64_t num_rows;
  const int32_t* block_table;  // (max_blocks_per_seq) of the item's sequence
  // Keys [key_begin, key_end): from the window start of row 0 (0 without a window) to the last
  // row's position. No block before key_begin is read.
  int64_t key_begin;
  int64_t key_end;
  // Partitions [partition_begin, partition_end) hold those keys; partition k holds keys
  // [k · kPartitionKeys, (k + 1) · kPartitionKeys).
  int64_t partition_begin;
  int64_t partition_end;
};

// One partition's result for the rows of an item, before normalisation: running max m and sum l
// of e^(s - m) per row (m = -inf: the row saw no key there), unnormalised outputs
// acc (num_rows, acc_stride), 64-byte aligned, acc_stride a multiple of 16 floats.
struct Partial {
  float* m;
  float* l;
  float* acc;
  int64_t acc_stride;
};

// A unit of split work: partition partition_begin + offset of item item_idx.
struct Unit {
  int64_t item_idx;
  Item item;
  int64_t offset;
};

// The work of one paged_attention call, laid out in the caller's workspace: the items, and when
// split, the (item, partition) units and a Partial slot for each. Reads seq_lens and
// query_start_loc; splits per params.split (kernels.h) with num_threads = threads::max_threads().
class Plan {
 public:
  Plan(const PagedAttentionParams& p, const int32_t* block_tables, const int32_t* seq_lens,
       const int32_t* query_start_loc, void* workspace);

  bool split() const { return split_; }
  int64_t num_items() const { return num_items_; }
  int64_t num_units() const;  // only when split()

  Item item(int64_t item_idx) const;
  ItemRows rows(const Item& item) const;
  Unit unit(int64_t unit_idx) const;                        // only when split()
  Partial partial(int64_t item_idx, int64_t offset) const;  // only when split()

 private:
  const PagedAttentionParams& p_;
  Geometry g_;
  const int32_t* block_tables_;
  const int32_t* seq_lens_;
  const int32_t* query_start_loc_;
  int64_t* item_start_;  // (num_seqs + 1) prefix sums of work items per sequence
  int64_t num_items_ = 0;
  bool split_ = false;
  int64_t* slot_start_ = nullptr;  // (num_items + 1) prefix sums of partitions per item, if split
  float* partials_ = nullptr;      // slot_start_[num_items] Partial slots of slot_floats_ each
  int64_t slot_floats_ = 0;
};

// Row indices into the K (or V) pool, rows of kv_row_bytes(type, head_dim) bytes, of the keys
// [t_begin, t_begin + num) of kv head kv_head, num = min(max_keys, r.key_end - t_begin), returned. Keys before
// r.key_begin (a sliding window's start inside the first tile) are not looked up: their slots
// repeat key r.key_begin's offset. One block-table lookup per block, not per key.
int64_t tile_row_offsets(const PagedAttentionParams& p, const ItemRows& r, int64_t kv_head,
                         int64_t t_begin, int64_t max_keys, int64_t* rows);

// Bytes of workspace a Plan needs for batches whose sequences hold at most max_seq_len tokens,
// run with at most num_threads OpenMP threads. Bounded, see kernels.h.
size_t workspace_bytes(const PagedAttentionParams& p, int64_t max_seq_len, int num_threads);

}  // namespace vellum::kernels::attention
