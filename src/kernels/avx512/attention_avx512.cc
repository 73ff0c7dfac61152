// Paged attention on AVX-512: one kernel for decode tokens and prefill chunks.
//
// Work item = (sequence, kv head, group of up to kMaxRows/heads query tokens). The query heads
// that share a kv head are processed together ("rows" = tokens × heads of the group), so each
// K/V row is read from the cache (and converted from f16/bf16) once per group instead of once
// per head. Keys are walked in tiles of kKvTile tokens through the block table with an online
// (flash-attention) softmax: running max m and sum l per row, f32 accumulators rescaled by
// e^(m_old - m_new). Items are scheduled dynamically over OpenMP threads, so a decode batch
// (many sequences × kv heads) and one long prefill (many query tiles) both fill the threads.
// Sliding window: row i (a query at position p_i) sees keys [lo_i, p_i], lo_i = max(0, p_i - W + 1).
// An item walks keys from lo of its first row, so no block-table entry before the window of the
// sequence's first query token is ever read; per tile, rows whose window has not started or has
// already ended are skipped, and the others mask keys outside [lo_i, p_i].
// Logit softcap: s = cap · tanh(s / cap) on the scaled scores before the max.
// Not done: splitting one long decode context across threads (flash-decoding); with few
// sequences and few kv heads the threads outnumber the items.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/vec_math.h"

namespace vellum::kernels::avx512 {
namespace {

constexpr int kMaxRows = 16;   // query rows per work item: bounds registers and tile buffers
constexpr int kKvTile = 32;    // keys per online-softmax step (two vectors of scores)
constexpr int kMaxD = static_cast<int>(kMaxAttentionHeadDim);

struct Item {
  int64_t seq;
  int64_t kv_head;
  int64_t head_group;
  int64_t tok0;  // first query token of the item, relative to the sequence's first query token
};

struct Geometry {
  int64_t group;            // query heads per kv head
  int64_t heads_per_item;   // divides group, <= kMaxRows
  int64_t num_head_groups;  // group / heads_per_item
  int64_t tokens_per_item;
};

Geometry make_geometry(const PagedAttentionParams& p) {
  Geometry g;
  g.group = p.num_heads / p.num_kv_heads;
  g.heads_per_item = std::min<int64_t>(g.group, kMaxRows);
  while (g.group % g.heads_per_item != 0) --g.heads_per_item;
  g.num_head_groups = g.group / g.heads_per_item;
  g.tokens_per_item = std::max<int64_t>(1, kMaxRows / g.heads_per_item);
  return g;
}

// Per-thread tiles (on the stack: ~100 KB, well inside an OpenMP worker's stack).
struct Tiles {
  alignas(64) float q[kMaxRows][kMaxD];    // scaled queries
  alignas(64) float acc[kMaxRows][kMaxD];  // unnormalised outputs
  alignas(64) float k[kKvTile][kMaxD];     // converted keys (f16/bf16 caches)
  alignas(64) float p[kMaxRows][kKvTile];  // scores, then probabilities
  float m[kMaxRows];
  float l[kMaxRows];
};

// Loads 16 (masked) head-dim values of a cache row as f32.
struct KvF32 {
  using T = float;
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct KvF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) { return load_f16(p, m); }
};
struct KvBF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) { return load_bf16(p, m); }
};

// Sums of each of 16 vectors, as one vector (lane t = sum of v[t]): a transpose-and-add tree,
// 45 shuffles/adds for 16 sums instead of ~8 dependent steps per _mm512_reduce_add_ps.
inline __m512 reduce_add_16(const __m512* v) {
  __m512 x[8], y[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // lane quad: [a0+a2, b0+b2, a1+a3, b1+b3]
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // lane quad: partial sums of 4 consecutive vectors
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], 0xee));
  }
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of one query row against 16 keys: 16 independent FMA chains over the head dim (the
// keys come from L1), then one reduce_add_16. k_rows has 16 valid pointers (callers pad a
// short tile with a repeated row; those scores are masked later).
void scores_16(const float* q_row, const float* const* k_rows, int64_t num_chunks,
               __mmask16 last_mask, float* scores) {
  __m512 dot[16];
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) dot[t] = _mm512_setzero_ps();
  for (int64_t c = 0; c < num_chunks; ++c) {
    const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
    const __m512 qv = _mm512_load_ps(q_row + c * 16);  // zero past head_dim
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      dot[t] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k_rows[t] + c * 16), dot[t]);
    }
  }
  _mm512_store_ps(scores, reduce_add_16(dot));
}

// The row counts are template parameters so that the per-row accumulators stay in registers
// (with a run-time count GCC keeps the arrays on the stack, one store-to-load chain per FMA).
// V is read straight from the cache (converted in registers): each value vector is used by
// kRows rows right away, so a converted copy would only add a store and a load.
template <int kRows, class Kv>
void pv_rows(Tiles& tl, int64_t i0, const typename Kv::T* const* v_rows, int64_t nt,
             int64_t num_chunks, __mmask16 last_mask) {
  for (int64_t c = 0; c < num_chunks; ++c) {
    const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
    __m512 a[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) a[r] = _mm512_load_ps(&tl.acc[i0 + r][c * 16]);
    for (int64_t t = 0; t < nt; ++t) {
      const __m512 vv = Kv::load(v_rows[t] + c * 16, m);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        a[r] = _mm512_fmadd_ps(_mm512_set1_ps(tl.p[i0 + r][t]), vv, a[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) _mm512_store_ps(&tl.acc[i0 + r][c * 16], a[r]);
  }
}

template <class Kv>
void run_item(const Item& item, Tiles& tl, float* out, const float* q, int64_t q_stride,
              const void* k_cache, const void* v_cache, const int32_t* block_tables,
              const int32_t* seq_lens, const int32_t* query_start_loc,
              const PagedAttentionParams& p, const Geometry& g) {
  const int64_t d = p.head_dim;
  const int64_t num_chunks = (d + 15) / 16;
  const __mmask16 last_mask = tail_mask(d - (num_chunks - 1) * 16);
  const int64_t q_begin = query_start_loc[item.seq];
  const int64_t q_len = query_start_loc[item.seq + 1] - q_begin;
  const int64_t first_pos = seq_lens[item.seq] - q_len;  // position of the first query token
  const int64_t num_tokens = std::min(g.tokens_per_item, q_len - item.tok0);
  const int64_t hpi = g.heads_per_item;
  const int64_t num_rows = num_tokens * hpi;  // row i: token tok0 + i / hpi, head i % hpi
  const int64_t head0 = item.kv_head * g.group + item.head_group * hpi;
  const int32_t* table = block_tables + item.seq * p.max_blocks_per_seq;
  const int64_t item_pos0 = first_pos + item.tok0;  // position of the item's first token
  const int64_t window = p.sliding_window;
  auto row_pos = [&](int64_t i) { return item_pos0 + i / hpi; };
  auto row_lo = [&](int64_t i) {
    return window > 0 ? std::max<int64_t>(0, row_pos(i) - window + 1) : int64_t{0};
  };
  auto out_row = [&](int64_t i) {
    return (q_begin + item.tok0 + i / hpi) * p.num_heads + head0 + i % hpi;
  };

  const __m512 scale = _mm512_set1_ps(p.scale);
  for (int64_t i = 0; i < num_rows; ++i) {
    const float* src = q + (q_begin + item.tok0 + i / hpi) * q_stride + (head0 + i % hpi) * d;
    for (int64_t c = 0; c < num_chunks; ++c) {
      const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
      _mm512_store_ps(&tl.q[i][c * 16], _mm512_mul_ps(_mm512_maskz_loadu_ps(m, src + c * 16), scale));
      _mm512_store_ps(&tl.acc[i][c * 16], _mm512_setzero_ps());
    }
    tl.m[i] = -std::numeric_limits<float>::infinity();
    tl.l[i] = 0.0f;
  }

  // Key tiles start at multiples of kKvTile whatever the item's first row, so a row sums its
  // keys in the same tiles however the queries were grouped into items (chunked prefill, other
  // requests sharing the step): batch invariance. Keys before the item's window (kv_first) are
  // never read: their slots in the first tile repeat key kv_first and are masked like any key
  // outside a row's window (no change without a sliding window: kv_first is 0).
  const int64_t kv_first = row_lo(0);
  const int64_t kv_begin = kv_first / kKvTile * kKvTile;
  const int64_t kv_end = row_pos(num_rows - 1) + 1;
  using T = typename Kv::T;
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(T);
  const T* k_base = static_cast<const T*>(k_cache);
  const T* v_base = static_cast<const T*>(v_cache);
  // Element offsets of the cache rows of keys [t_begin, t_begin + kKvTile) (clipped to kv_end),
  // walking the block table without a division per key.
  auto tile_offsets = [&](int64_t t_begin, int64_t* offsets) {
    const int64_t n = std::min<int64_t>(kKvTile, kv_end - t_begin);
    const int64_t skip = std::max<int64_t>(0, kv_first - t_begin);  // < n
    int64_t block = (t_begin + skip) / p.block_size;
    int64_t offset = (t_begin + skip) % p.block_size;
    for (int64_t t = skip; t < n; ++t) {
      offsets[t] = ((int64_t{table[block]} * p.num_kv_heads + item.kv_head) * p.block_size + offset) * d;
      if (++offset == p.block_size) {
        offset = 0;
        ++block;
      }
    }
    for (int64_t t = 0; t < skip; ++t) offsets[t] = offsets[skip];
    return n;
  };
  // Blocks are scattered, so each is a new short stream the hardware prefetcher has to find;
  // prefetching the next tile's K/V rows while this one is computed keeps DRAM busy.
  auto prefetch = [&](const int64_t* offsets, int64_t n) {
    for (int64_t t = 0; t < n; ++t) {
      const char* k_row = reinterpret_cast<const char*>(k_base + offsets[t]);
      const char* v_row = reinterpret_cast<const char*>(v_base + offsets[t]);
      for (size_t line = 0; line < row_bytes; line += 64) {
        prefetch_l2(k_row + line);
        prefetch_l2(v_row + line);
      }
    }
  };
  int64_t offsets[kKvTile];
  int64_t next_offsets[kKvTile];
  prefetch(offsets, tile_offsets(kv_begin, offsets));
  const float* k_rows[kKvTile];
  const T* v_rows[kKvTile];
  const float cap = p.logit_softcap;
  for (int64_t t0 = kv_begin; t0 < kv_end; t0 += kKvTile) {
    const int64_t nt = std::min<int64_t>(kKvTile, kv_end - t0);
    if (t0 + kKvTile < kv_end) prefetch(next_offsets, tile_offsets(t0 + kKvTile, next_offsets));
    // Rows that see at least one of these keys: position >= t0 (causal) and window start
    // < t0 + nt. Positions grow with the row index, so both bounds are row ranges.
    const int64_t row_begin = std::max<int64_t>(0, t0 - item_pos0) * hpi;
    const int64_t row_end =
        window > 0 ? std::min(num_rows, std::max<int64_t>(0, t0 + nt + window - 1 - item_pos0) * hpi)
                   : num_rows;
    for (int64_t t = 0; t < nt; ++t) {
      v_rows[t] = v_base + offsets[t];
      if constexpr (std::is_same_v<T, float>) {
        k_rows[t] = k_base + offsets[t];
      } else {  // keys are reused by every row and 16 at a time: convert once
        for (int64_t c = 0; c < num_chunks; ++c) {
          const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
          _mm512_store_ps(&tl.k[t][c * 16], Kv::load(k_base + offsets[t] + c * 16, m));
        }
        k_rows[t] = tl.k[t];
      }
    }

    // Scores, 16 keys at a time per row.
    for (int64_t t = nt; t < kKvTile; ++t) k_rows[t] = k_rows[0];
    for (int64_t i = row_begin; i < row_end; ++i) {
      for (int64_t t = 0; t < nt; t += 16) {
        scores_16(tl.q[i], k_rows + t, num_chunks, last_mask, &tl.p[i][t]);
      }
    }

    // Online softmax update per row, keys outside [lo_i, pos_i] masked to -inf.
    for (int64_t i = row_begin; i < row_end; ++i) {
      const int64_t valid_end = std::min<int64_t>(nt, row_pos(i) - t0 + 1);
      const int64_t valid_begin = std::max<int64_t>(0, row_lo(i) - t0);  // < valid_end here
      const __mmask16 v0 = static_cast<__mmask16>(tail_mask(valid_end) & ~tail_mask(valid_begin));
      const __mmask16 v1 = static_cast<__mmask16>(tail_mask(std::max<int64_t>(0, valid_end - 16)) &
                                                  ~tail_mask(std::max<int64_t>(0, valid_begin - 16)));
      const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      __m512 s0 = _mm512_mask_load_ps(neg_inf, v0, &tl.p[i][0]);
      __m512 s1 = _mm512_mask_load_ps(neg_inf, v1, &tl.p[i][16]);
      if (cap > 0.0f) {
        const __m512 cap_v = _mm512_set1_ps(cap);
        const __m512 inv_cap = _mm512_set1_ps(1.0f / cap);
        s0 = _mm512_mask_mul_ps(neg_inf, v0, cap_v, tanh_ps(_mm512_mul_ps(s0, inv_cap)));
        s1 = _mm512_mask_mul_ps(neg_inf, v1, cap_v, tanh_ps(_mm512_mul_ps(s1, inv_cap)));
      }
      const float m_new = std::max(tl.m[i], _mm512_reduce_max_ps(_mm512_max_ps(s0, s1)));
      const float alpha = std::exp(tl.m[i] - m_new);  // 0 on the first tile (m = -inf)
      const __m512 mv = _mm512_set1_ps(m_new);
      const __m512 p0 = _mm512_maskz_mov_ps(v0, exp_ps(_mm512_sub_ps(s0, mv)));
      const __m512 p1 = _mm512_maskz_mov_ps(v1, exp_ps(_mm512_sub_ps(s1, mv)));
      _mm512_store_ps(&tl.p[i][0], p0);
      _mm512_store_ps(&tl.p[i][16], p1);
      tl.l[i] = tl.l[i] * alpha + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
      tl.m[i] = m_new;
      if (alpha != 1.0f) {
        const __m512 av = _mm512_set1_ps(alpha);
        for (int64_t c = 0; c < num_chunks; ++c) {
          _mm512_store_ps(&tl.acc[i][c * 16], _mm512_mul_ps(_mm512_load_ps(&tl.acc[i][c * 16]), av));
        }
      }
    }

    // acc += P · V, 4 rows per pass so every value vector load feeds 4 FMAs.
    for (int64_t i0 = row_begin; i0 < row_end; i0 += 4) {
      switch (std::min<int64_t>(4, row_end - i0)) {
        case 1: pv_rows<1, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
        case 2: pv_rows<2, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
        case 3: pv_rows<3, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
        default: pv_rows<4, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
      }
    }
    std::copy(next_offsets, next_offsets + kKvTile, offsets);
  }

  for (int64_t i = 0; i < num_rows; ++i) {
    const __m512 inv_l = _mm512_set1_ps(1.0f / tl.l[i]);
    float* dst = out + out_row(i) * d;
    for (int64_t c = 0; c < num_chunks; ++c) {
      const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
      _mm512_mask_storeu_ps(dst + c * 16, m, _mm512_mul_ps(_mm512_load_ps(&tl.acc[i][c * 16]), inv_l));
    }
  }
}

}  // namespace

size_t paged_attention_workspace_bytes(const PagedAttentionParams& params) {
  return static_cast<size_t>(params.num_seqs + 1) * sizeof(int64_t);
}

void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& p,
                     void* workspace) {
  const Geometry g = make_geometry(p);
  // item_start: (num_seqs + 1) prefix sums of work items per sequence.
  auto* item_start = static_cast<int64_t*>(workspace);
  const int64_t items_per_tile = p.num_kv_heads * g.num_head_groups;
  item_start[0] = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t q_len = query_start_loc[s + 1] - query_start_loc[s];
    const int64_t num_tiles = (q_len + g.tokens_per_item - 1) / g.tokens_per_item;
    item_start[s + 1] = item_start[s] + num_tiles * items_per_tile;
  }
  const int64_t num_items = item_start[p.num_seqs];

#pragma omp parallel
  {
    Tiles tiles;
#pragma omp for schedule(dynamic, 1)
    for (int64_t idx = 0; idx < num_items; ++idx) {
      const int64_t s = std::upper_bound(item_start, item_start + p.num_seqs + 1, idx) - item_start - 1;
      const int64_t local = idx - item_start[s];
      const int64_t rest = local % items_per_tile;
      const Item item{s, rest / g.num_head_groups, rest % g.num_head_groups,
                      local / items_per_tile * g.tokens_per_item};
      switch (p.kv_type) {
        case KvType::kF32:
          run_item<KvF32>(item, tiles, out, q, q_stride, k_cache, v_cache, block_tables,
                          seq_lens, query_start_loc, p, g);
          break;
        case KvType::kF16:
          run_item<KvF16>(item, tiles, out, q, q_stride, k_cache, v_cache, block_tables,
                          seq_lens, query_start_loc, p, g);
          break;
        case KvType::kBF16:
          run_item<KvBF16>(item, tiles, out, q, q_stride, k_cache, v_cache, block_tables,
                           seq_lens, query_start_loc, p, g);
          break;
      }
    }
  }
}

}  // namespace vellum::kernels::avx512
