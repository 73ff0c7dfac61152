// Front end of the kernels in kernels.h: picks the ISA version (AVX-512, AVX2, or the scalar
// reference) once per call from cpu::selected_isa() (a relaxed atomic load). Also the paged
// attention work plan of attention_plan.h, compiled here without ISA flags.
#include "kernels/kernels.h"


#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "cpu/isa.h"
#include "kernels/attention_plan.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/threads.h"

namespace vellum::kernels {
namespace {

// The best compiled level at or below the selected one.
enum class Level { kScalar, kAvx2, kAvx512 };
Level level() {
  const cpu::Isa isa = cpu::selected_isa();
  if (isa >= cpu::Isa::kAvx512) return Level::kAvx512;
  if (isa >= cpu::Isa::kAvx2) return Level::kAvx2;
  return Level::kScalar;
}

// The version of a kernel for the selected level (all three share one signature).
template <class Fn>
Fn* pick(Fn* avx512_fn, Fn* avx2_fn, Fn* ref_fn) {
  switch (level()) {
    case Level::kAvx512: return avx512_fn;
    case Level::kAvx2: return avx2_fn;
    case Level::kScalar: break;
  }
  return ref_fn;
}

}  // namespace

size_t kv_row_bytes(KvType type, int64_t head_dim) {
  switch (type) {
    case KvType::kF32: return static_cast<size_t>(head_dim) * 4;
    case KvType::kF16:
    case KvType::kBF16: return static_cast<size_t>(head_dim) * 2;
    case KvType::kQ8_0: return static_cast<size_t>(head_dim / kQK) * sizeof(BlockQ8_0);
    case KvType::kQ4_0: return static_cast<size_t>(head_dim / kQK) * sizeof(BlockQ4_0);
    case KvType::kFp8E4M3:
    case KvType::kFp8E5M2: return sizeof(float) + static_cast<size_t>(head_dim);
  }
  return 0;
}

int64_t kv_block_elems(KvType type) {
  return type == KvType::kQ8_0 || type == KvType::kQ4_0 ? kQK : 1;
}

bool kv_type_pair_supported(KvType k_type, KvType v_type) {
  return k_type == v_type || v_type == KvType::kF16 || v_type == KvType::kBF16 ||
         v_type == KvType::kQ8_0;
}

bool kv_type_is_quantized(KvType type) {
  return type != KvType::kF32 && type != KvType::kF16 && type != KvType::kBF16;
}

size_t weight_row_bytes(WeightType type, int64_t n) {
  const WeightTypeInfo& info = weight_type_info(type);
  return static_cast<size_t>(n / info.block_elems) * info.block_bytes;
}

int64_t weight_block_elems(WeightType type) { return weight_type_info(type).block_elems; }

void rms_norm(float* out, const float* x, const float* weight, int64_t n_rows, int64_t dim,
              float eps) {
  pick(avx512::rms_norm, avx2::rms_norm, ref::rms_norm)(out, x, weight, n_rows, dim, eps);
}

void add_rms_norm(float* x, const float* delta, float* out, const float* weight, int64_t n_rows,
                  int64_t dim, float eps) {
  pick(avx512::add_rms_norm, avx2::add_rms_norm, ref::add_rms_norm)(x, delta, out, weight, n_rows,
                                                                     dim, eps);
}

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  pick(avx512::silu_mul, avx2::silu_mul, ref::silu_mul)(out, gate, up, n);
}

void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
  pick(avx512::gelu_tanh_mul, avx2::gelu_tanh_mul, ref::gelu_tanh_mul)(out, gate, up, n);
}

void add_inplace(float* x, const float* y, int64_t n) {
  pick(avx512::add_inplace, avx2::add_inplace, ref::add_inplace)(x, y, n);
}

void rope_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                  int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                  const float* inv_freq) {
  auto* fn = pick(avx512::rope_inplace, avx2::rope_inplace, ref::rope_inplace);
  fn(x, token_stride, num_tokens, num_heads, head_dim, rot_dim, positions, inv_freq);
}

void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq) {
  auto* fn = pick(avx512::rope_neox_inplace, avx2::rope_neox_inplace, ref::rope_neox_inplace);
  fn(x, token_stride, num_tokens, num_heads, head_dim, rot_dim, positions, inv_freq);
}

void get_rows(float* out, const void* table, WeightType type, int64_t dim, const int32_t* ids,
              int64_t num_ids) {
  pick(avx512::get_rows, avx2::get_rows, ref::get_rows)(out, table, type, dim, ids, num_ids);
}

void hadamard_rotate(float* x, int64_t stride, int64_t num_rows, int64_t n) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t r = 0; r < num_rows; ++r) {
    float* row = x + r * stride;  // (n)
    // Fast Walsh-Hadamard transform: log2 n butterfly passes, then the 1/sqrt(n) normalisation.
    for (int64_t half = 1; half < n; half *= 2) {
      for (int64_t i = 0; i < n; i += 2 * half) {
        for (int64_t j = i; j < i + half; ++j) {
          const float a = row[j];
          const float b = row[j + half];
          row[j] = a + b;
          row[j + half] = a - b;
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) row[i] *= norm;
  }
}

void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType k_type, KvType v_type) {
  auto* fn = pick(avx512::reshape_and_cache, avx2::reshape_and_cache, ref::reshape_and_cache);
  fn(k, k_stride, v, v_stride, k_cache, v_cache, slot_mapping, num_tokens, num_kv_heads, head_dim,
     block_size, k_type, v_type);
}

void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& params,
                     void* workspace) {
  if (params.num_seqs <= 0) return;
  const Level lv = level();
  if (lv == Level::kAvx512 && params.head_dim <= avx512::kMaxAttentionHeadDim) {
    return avx512::paged_attention(out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
                                   query_start_loc, params, workspace);
  }
  if (lv == Level::kAvx2 && params.head_dim <= avx2::kMaxAttentionHeadDim) {
    return avx2::paged_attention(out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
                                 query_start_loc, params, workspace);
  }
  ref::paged_attention(out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
                       query_start_loc, params, workspace);
}

size_t paged_attention_workspace_bytes(const PagedAttentionParams& params, int64_t max_seq_len,
                                       int num_threads) {
  // Only the vector kernels use workspace (their per-thread tiles live on the stack); the AVX-512
  // and AVX2 versions share one layout (attention_plan.h).
  return attention::workspace_bytes(params, max_seq_len, num_threads) + 64;
}

void copy_blocks(void* pool, int64_t block_bytes, const int32_t* src, const int32_t* dst,
                 int64_t num_pairs) {
  auto* base = static_cast<uint8_t*>(pool);
  const auto bytes = static_cast<size_t>(block_bytes);
  // Parallel only when there is enough to copy to pay for waking the team.
  threads::parallel_for(num_pairs, num_pairs * block_bytes >= (int64_t{1} << 20), [&](int64_t i) {
    std::memcpy(base + static_cast<size_t>(dst[i]) * bytes,
                base + static_cast<size_t>(src[i]) * bytes, bytes);
  });
}

void swap_blocks(void* dst_pool, const void* src_pool, int64_t block_bytes, const int32_t* src,
                 const int32_t* dst, int64_t num_pairs) {
  auto* dst_base = static_cast<uint8_t*>(dst_pool);
  const auto* src_base = static_cast<const uint8_t*>(src_pool);
  const auto bytes = static_cast<size_t>(block_bytes);
  threads::parallel_for(num_pairs, num_pairs * block_bytes >= (int64_t{1} << 20), [&](int64_t i) {
    std::memcpy(dst_base + static_cast<size_t>(dst[i]) * bytes,
                src_base + static_cast<size_t>(src[i]) * bytes, bytes);
  });
}

}  // namespace vellum::kernels

// ---- Paged attention work plan (attention_plan.h) ----------------------------------------

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
  const int num_threads = threads::max_threads();
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

int64_t tile_row_offsets(const PagedAttentionParams& p, const ItemRows& r, int64_t kv_head,
                         int64_t t_begin, int64_t max_keys, int64_t* rows) {
  const int64_t n = std::min(max_keys, r.key_end - t_begin);
  const int64_t skip = std::clamp<int64_t>(r.key_begin - t_begin, 0, n - 1);
  const int64_t block_size = p.block_size;
  const int64_t block_stride = p.num_kv_heads * block_size;  // rows per cache block
  const int64_t head_offset = kv_head * block_size;
  for (int64_t t = skip; t < n;) {
    const int64_t pos = t_begin + t;
    const int64_t slot = pos % block_size;
    const int64_t run = std::min(n - t, block_size - slot);  // keys left in this block
    int64_t row = int64_t{r.block_table[pos / block_size]} * block_stride + head_offset + slot;
    for (const int64_t end = t + run; t < end; ++t, ++row) rows[t] = row;
  }
  for (int64_t t = 0; t < skip; ++t) rows[t] = rows[skip];
  return n;
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
