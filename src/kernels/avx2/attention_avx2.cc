// Paged attention on AVX2 + FMA: the algorithm of avx512/attention_avx512.cc (read its header)
// on 8-lane vectors. Work item = (sequence, kv head, group of query tokens × the query heads that
// share the kv head); keys in tiles of kKvTile through the block table, online softmax.
//
// Sliding window: row i (a query at position p_i) sees keys [lo_i, p_i], lo_i = max(0, p_i - W + 1).
// An item walks keys from lo of its first row, so no block-table entry before the window of the
// sequence's first query token is ever read; per tile, rows whose window has not started or has
// already ended are skipped, and the others mask keys outside [lo_i, p_i].
// Logit softcap: s = cap · tanh(s / cap) on the scaled scores before the max.
//
// AVX2 differences: 16 ymm registers, so scores go 8 keys at a time (8 FMA chains + the query);
// no masked 16-bit loads, so f16/bf16 rows with a head-dim tail go through load_u16(p, n).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/vec_math.h"

namespace vellum::kernels::avx2 {
namespace {

constexpr int kMaxRows = 16;  // query rows per work item: bounds the tile buffers
constexpr int kKvTile = 32;   // keys per online-softmax step (four vectors of scores)
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

// Per-thread tiles (on the stack: ~100 KB). Rows are zero past head_dim up to a multiple of 8.
struct Tiles {
  alignas(32) float q[kMaxRows][kMaxD];    // scaled queries
  alignas(32) float acc[kMaxRows][kMaxD];  // unnormalised outputs
  alignas(32) float k[kKvTile][kMaxD];     // converted keys (f16/bf16 caches)
  alignas(32) float p[kMaxRows][kKvTile];  // scores, then probabilities
  float m[kMaxRows];
  float l[kMaxRows];
};

// 8 head-dim values of a cache row as f32; the two-argument form reads only the first n < 8
// (the last chunk of a row whose head dim is not a multiple of 8).
struct KvF32 {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load(const float* p, int64_t n) { return load_f32(p, n); }
};
struct KvF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return load_f16(p); }
  static __m256 load(const uint16_t* p, int64_t n) { return load_f16(p, n); }
};
struct KvBF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return load_bf16(p); }
  static __m256 load(const uint16_t* p, int64_t n) { return load_bf16(p, n); }
};

// Sums of each of 8 vectors, as one vector (lane t = sum of v[t]).
inline __m256 reduce_add_8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]);
  const __m256 t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]);
  const __m256 t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // [s0 s1 s2 s3 | s0 s1 s2 s3] (low, high halves)
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // [s4 s5 s6 s7 | s4 s5 s6 s7]
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Scores of one (zero-padded) query row against 8 keys. k_rows: 8 valid f32 rows of head_dim;
// `padded` rows are zero-filled to a multiple of 8 (the converted tile), others are read with a
// masked last chunk.
void scores_8(const float* q_row, const float* const* k_rows, int64_t d, bool padded,
              float* scores) {
  __m256 dot[8];
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) dot[t] = _mm256_setzero_ps();
  int64_t c = 0;
  const int64_t full = padded ? (d + 7) / 8 * 8 : d / 8 * 8;
  for (; c < full; c += 8) {
    const __m256 qv = _mm256_load_ps(q_row + c);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) dot[t] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k_rows[t] + c), dot[t]);
  }
  if (c < d) {
    const __m256 qv = _mm256_load_ps(q_row + c);
    const __m256i mask = tail_mask(d - c);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      dot[t] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k_rows[t] + c, mask), dot[t]);
    }
  }
  _mm256_store_ps(scores, reduce_add_8(dot));
}

// acc[i0 .. i0 + kRows)[c .. c + 8) += P · V[:, c .. c + 8). The row count is a template
// parameter and the tail load is hoisted out (kTail) so that the accumulators stay in registers:
// with a branch on the chunk length inside, GCC kept them on the stack (perf annotate).
template <int kRows, bool kTail, class Kv>
void pv_chunk(Tiles& tl, int64_t i0, const typename Kv::T* const* v_rows, int64_t nt, int64_t c,
              int64_t tail) {
  __m256 a[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) a[r] = _mm256_load_ps(&tl.acc[i0 + r][c]);
  for (int64_t t = 0; t < nt; ++t) {
    const __m256 vv = kTail ? Kv::load(v_rows[t] + c, tail) : Kv::load(v_rows[t] + c);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&tl.p[i0 + r][t]), vv, a[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) _mm256_store_ps(&tl.acc[i0 + r][c], a[r]);
}

template <int kRows, class Kv>
void pv_rows(Tiles& tl, int64_t i0, const typename Kv::T* const* v_rows, int64_t nt, int64_t d) {
  const int64_t full = d / 8 * 8;
  for (int64_t c = 0; c < full; c += 8) pv_chunk<kRows, false, Kv>(tl, i0, v_rows, nt, c, 0);
  if (full < d) pv_chunk<kRows, true, Kv>(tl, i0, v_rows, nt, full, d - full);
}

template <class Kv>
void run_item(const Item& item, Tiles& tl, float* out, const float* q, int64_t q_stride,
              const void* k_cache, const void* v_cache, const int32_t* block_tables,
              const int32_t* seq_lens, const int32_t* query_start_loc,
              const PagedAttentionParams& p, const Geometry& g) {
  const int64_t d = p.head_dim;
  const int64_t d_pad = (d + 7) / 8 * 8;
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

  const __m256 scale = _mm256_set1_ps(p.scale);
  for (int64_t i = 0; i < num_rows; ++i) {
    const float* src = q + (q_begin + item.tok0 + i / hpi) * q_stride + (head0 + i % hpi) * d;
    for (int64_t c = 0; c < d_pad; c += 8) {
      _mm256_store_ps(&tl.q[i][c], _mm256_mul_ps(load_f32(src + c, d - c), scale));
      _mm256_store_ps(&tl.acc[i][c], _mm256_setzero_ps());
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
  constexpr bool kConvertK = !std::is_same_v<T, float>;
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(T);
  const T* k_base = static_cast<const T*>(k_cache);
  const T* v_base = static_cast<const T*>(v_cache);
  // Element offsets of the cache rows of keys [t_begin, t_begin + kKvTile) (clipped to kv_end).
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
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
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
      if constexpr (!kConvertK) {
        k_rows[t] = k_base + offsets[t];
      } else {  // keys are reused by every row and 8 at a time: convert once
        const T* k_row = k_base + offsets[t];
        int64_t c = 0;
        for (; c + 8 <= d; c += 8) _mm256_store_ps(&tl.k[t][c], Kv::load(k_row + c));
        if (c < d) _mm256_store_ps(&tl.k[t][c], Kv::load(k_row + c, d - c));
        k_rows[t] = tl.k[t];
      }
    }

    // Scores, 8 keys at a time per row (a short tile repeats key 0; masked below).
    for (int64_t t = nt; t < kKvTile; ++t) k_rows[t] = k_rows[0];
    for (int64_t i = row_begin; i < row_end; ++i) {
      for (int64_t t = 0; t < nt; t += 8) scores_8(tl.q[i], k_rows + t, d, kConvertK, &tl.p[i][t]);
    }

    // Online softmax update per row, keys outside [lo_i, pos_i] masked to -inf.
    const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t i = row_begin; i < row_end; ++i) {
      const int64_t valid_begin = std::max<int64_t>(0, row_lo(i) - t0);
      const int64_t valid_end = std::min<int64_t>(nt, row_pos(i) - t0 + 1);  // > valid_begin
      __m256 s[kKvTile / 8];
      __m256 valid[kKvTile / 8];
      __m256 vmax = neg_inf;
#pragma GCC unroll 4
      for (int v = 0; v < kKvTile / 8; ++v) {
        const __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * v));
        valid[v] = _mm256_castsi256_ps(_mm256_andnot_si256(
            _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid_begin)), idx),
            _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid_end)), idx)));
        s[v] = _mm256_load_ps(&tl.p[i][8 * v]);
        if (cap > 0.0f) {
          s[v] = _mm256_mul_ps(_mm256_set1_ps(cap),
                               tanh_ps(_mm256_mul_ps(s[v], _mm256_set1_ps(1.0f / cap))));
        }
        s[v] = _mm256_blendv_ps(neg_inf, s[v], valid[v]);
        vmax = _mm256_max_ps(vmax, s[v]);
      }
      const float m_new = std::max(tl.m[i], reduce_max(vmax));
      const float alpha = std::exp(tl.m[i] - m_new);  // 0 on the first tile (m = -inf)
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int v = 0; v < kKvTile / 8; ++v) {
        const __m256 pv = _mm256_and_ps(valid[v], exp_ps(_mm256_sub_ps(s[v], mv)));
        _mm256_store_ps(&tl.p[i][8 * v], pv);
        sum = _mm256_add_ps(sum, pv);
      }
      tl.l[i] = tl.l[i] * alpha + reduce_add(sum);
      tl.m[i] = m_new;
      if (alpha != 1.0f) {
        const __m256 av = _mm256_set1_ps(alpha);
        for (int64_t c = 0; c < d_pad; c += 8) {
          _mm256_store_ps(&tl.acc[i][c], _mm256_mul_ps(_mm256_load_ps(&tl.acc[i][c]), av));
        }
      }
    }

    // acc += P · V, 4 rows per pass so every value vector load feeds 4 FMAs.
    for (int64_t i0 = row_begin; i0 < row_end; i0 += 4) {
      switch (std::min<int64_t>(4, row_end - i0)) {
        case 1: pv_rows<1, Kv>(tl, i0, v_rows, nt, d); break;
        case 2: pv_rows<2, Kv>(tl, i0, v_rows, nt, d); break;
        case 3: pv_rows<3, Kv>(tl, i0, v_rows, nt, d); break;
        default: pv_rows<4, Kv>(tl, i0, v_rows, nt, d); break;
      }
    }
    std::copy(next_offsets, next_offsets + kKvTile, offsets);
  }

  for (int64_t i = 0; i < num_rows; ++i) {
    const __m256 inv_l = _mm256_set1_ps(1.0f / tl.l[i]);
    float* dst = out + out_row(i) * d;
    for (int64_t c = 0; c < d; c += 8) {
      const __m256 r = _mm256_mul_ps(_mm256_load_ps(&tl.acc[i][c]), inv_l);
      if (d - c >= 8) {
        _mm256_storeu_ps(dst + c, r);
      } else {
        store_f32(dst + c, r, d - c);
      }
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

}  // namespace vellum::kernels::avx2
