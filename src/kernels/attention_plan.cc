#include "kernels/attention_plan.h"

#include <omp.h>

#include <algorithm>

namespace vellum::kernels::attention {
namespace {

int64_t align64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Floats of one Partial slot: m and l for kMaxRows rows (128 bytes), then the rows' outputs padded
// to a multiple of 16 floats (the AVX-512 vector; AVX2 uses the first multiple of 8 of it).
int64_t acc_stride(const PagedAttentionParams& p) { return (p.head_dim + 15) / 16 * 16; }
int64_t slot_floats(const PagedAttentionParams& p, const Geometry& g) {
  return 2 * kMaxRows + g.tokens_per_item * g.heads_per_item * acc_stride(p);
}

// Workspace layout: item_start, then slot_start, then the Partial slots, each 64-byte aligned.
int64_t item_start_bytes(const PagedAttentionParams& p) { return align64((p.num_seqs + 1) * 8); }

}  // namespace

Geometry make_geometry(const PagedAttentionParams& p) {
  Geometry g;
  g.group = p.num_heads / p.num_kv_heads;
  g.heads_per_item = std::min<int64_t>(g.group, kMaxRows);
  while (g.group % g.heads_per_item != 0) --g.heads_per_item;
  g.num_head_groups = g.group / g.heads_per_item;
  g.tokens_per_item = std::max<int64_t>(1, kMaxRows / g.heads_per_item);
  return g;
}

Plan::Plan(const PagedAttentionParams& p, const int32_t* block_tables, const int32_t* seq_lens,
           const int32_t* query_start_loc, void* workspace)
    : p_(p), g_(make_geometry(p)), block_tables_(block_tables), seq_lens_(seq_lens),
      query_start_loc_(query_start_loc), item_start_(static_cast<int64_t*>(workspace)) {
  const int64_t items_per_tile = p.num_kv_heads * g_.num_head_groups;
  item_start_[0] = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t q_len = query_start_loc[s + 1] - query_start_loc[s];
    const int64_t num_tiles = (q_len + g_.tokens_per_item - 1) / g_.tokens_per_item;
    item_start_[s + 1] = item_start_[s] + num_tiles * items_per_tile;
  }
  num_items_ = item_start_[p.num_seqs];

  // Splitting pays when items are too few to keep the threads busy and some item has more than
  // one partition to share out. The item limit is also the workspace bound (workspace_bytes).
  const int num_threads = omp_get_max_threads();
  if (p.split == AttentionSplit::kNever ||
      (p.split == AttentionSplit::kAuto && num_threads == 1) ||
      num_items_ >= kSplitItemsPerThread * num_threads) {
    return;
  }
  auto* bytes = static_cast<char*>(workspace) + item_start_bytes(p);
  slot_start_ = reinterpret_cast<int64_t*>(bytes);
  partials_ = reinterpret_cast<float*>(bytes + align64((num_items_ + 1) * 8));
  slot_floats_ = slot_floats(p, g_);
  int64_t max_partitions = 0;
  slot_start_[0] = 0;
  for (int64_t idx = 0; idx < num_items_; ++idx) {
    const ItemRows r = rows(item(idx));
    const int64_t num_partitions = r.partition_end - r.partition_begin;
    max_partitions = std::max(max_partitions, num_partitions);
    slot_start_[idx + 1] = slot_start_[idx] + num_partitions;
  }
  split_ = p.split == AttentionSplit::kAlways || max_partitions > 1;
}

Item Plan::item(int64_t item_idx) const {
  const int64_t s =
      std::upper_bound(item_start_, item_start_ + p_.num_seqs + 1, item_idx) - item_start_ - 1;
  const int64_t items_per_tile = p_.num_kv_heads * g_.num_head_groups;
  const int64_t local = item_idx - item_start_[s];
  const int64_t rest = local % items_per_tile;
  return {s, rest / g_.num_head_groups, rest % g_.num_head_groups,
          local / items_per_tile * g_.tokens_per_item};
}

ItemRows Plan::rows(const Item& item) const {
  const int64_t q_begin = query_start_loc_[item.seq];
  const int64_t q_len = query_start_loc_[item.seq + 1] - q_begin;
  const int64_t num_tokens = std::min(g_.tokens_per_item, q_len - item.tok0);
  ItemRows r;
  r.q_token0 = q_begin + item.tok0;
  r.pos0 = seq_lens_[item.seq] - q_len + item.tok0;
  r.heads = g_.heads_per_item;
  r.head0 = item.kv_head * g_.group + item.head_group * r.heads;
  r.num_rows = num_tokens * r.heads;
  r.block_table = block_tables_ + item.seq * p_.max_blocks_per_seq;
  r.key_begin = p_.sliding_window > 0 ? std::max<int64_t>(0, r.pos0 - p_.sliding_window + 1) : 0;
  r.key_end = r.pos0 + num_tokens;
  r.partition_begin = r.key_begin / kPartitionKeys;
  r.partition_end = (r.key_end - 1) / kPartitionKeys + 1;
  return r;
}

int64_t Plan::num_units() const { return slot_start_[num_items_]; }

Unit Plan::unit(int64_t unit_idx) const {
  const int64_t item_idx =
      std::upper_bound(slot_start_, slot_start_ + num_items_ + 1, unit_idx) - slot_start_ - 1;
  return {item_idx, item(item_idx), unit_idx - slot_start_[item_idx]};
}

Partial Plan::partial(int64_t item_idx, int64_t offset) const {
  float* slot = partials_ + (slot_start_[item_idx] + offset) * slot_floats_;
  return {slot, slot + kMaxRows, slot + 2 * kMaxRows, acc_stride(p_)};
}

size_t workspace_bytes(const PagedAttentionParams& p, int64_t max_seq_len, int num_threads) {
  // A split batch has fewer than kSplitItemsPerThread · num_threads items, each with at most
  // ceil(max_seq_len / kPartitionKeys) partitions.
  const int64_t max_split_items = kSplitItemsPerThread * std::max(num_threads, 1);
  const int64_t max_partitions =
      (std::max<int64_t>(max_seq_len, 1) + kPartitionKeys - 1) / kPartitionKeys;
  const int64_t partial_bytes = (max_split_items - 1) * max_partitions *
                                slot_floats(p, make_geometry(p)) * int64_t{sizeof(float)};
  return static_cast<size_t>(item_start_bytes(p) + align64(max_split_items * 8) + partial_bytes);
}

}  // namespace vellum::kernels::attention
