// Paged attention on AVX-512: one kernel for decode tokens and prefill chunks.
//
// Work item = (sequence, kv head, group of up to kMaxRows/heads query tokens). The query heads
// that share a kv head are processed together ("rows" = tokens × heads of the group), so each
// K/V row is read from the cache (and converted from f16/bf16) once per group instead of once
// per head. Keys are walked in tiles of kKvTile tokens through the block table with an online
// (flash-attention) softmax: running max m and sum l per row, f32 accumulators rescaled by
// e^(m_old - m_new). Items are scheduled dynamically over OpenMP threads, so a decode batch
// (many sequences × kv heads) and one long prefill (many query tiles) both fill the threads.
// Not done: splitting one long decode context across threads (flash-decoding); with few
// sequences and few kv heads the threads outnumber the items.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

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
  alignas(64) float v[kKvTile][kMaxD];     // converted values
  alignas(64) float p[kMaxRows][kKvTile];  // scores, then probabilities
  float m[kMaxRows];
  float l[kMaxRows];
};

// Row of cache element (block_id, kv_head, offset, 0), converted to f32 when needed.
const float* kv_row(const void* cache, int64_t elem_index, KvType type, int64_t d,
                    float* convert_to) {
  switch (type) {
    case KvType::kF32: return static_cast<const float*>(cache) + elem_index;
    case KvType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(cache) + elem_index;
      for (int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = tail_mask(d - i);
        _mm512_mask_storeu_ps(convert_to + i, m, load_f16(src + i, m));
      }
      return convert_to;
    }
    case KvType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(cache) + elem_index;
      for (int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = tail_mask(d - i);
        _mm512_mask_storeu_ps(convert_to + i, m, load_bf16(src + i, m));
      }
      return convert_to;
    }
  }
  return nullptr;
}

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
  auto row_pos = [&](int64_t i) { return first_pos + item.tok0 + i / hpi; };
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

  const int64_t kv_end = row_pos(num_rows - 1) + 1;
  const float* k_rows[kKvTile];
  const float* v_rows[kKvTile];
  for (int64_t t0 = 0; t0 < kv_end; t0 += kKvTile) {
    const int64_t nt = std::min<int64_t>(kKvTile, kv_end - t0);
    // Rows whose position is before t0 see none of these keys (causal): skip them.
    const int64_t row_begin = std::max<int64_t>(0, t0 - (first_pos + item.tok0)) * hpi;
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t pos = t0 + t;
      const int64_t elem = ((int64_t{table[pos / p.block_size]} * p.num_kv_heads + item.kv_head) *
                                p.block_size + pos % p.block_size) * d;
      k_rows[t] = kv_row(k_cache, elem, p.kv_type, d, tl.k[t]);
      v_rows[t] = kv_row(v_cache, elem, p.kv_type, d, tl.v[t]);
    }

    // Scores: 4 rows per pass so every key vector load feeds 4 FMAs.
    for (int64_t i0 = row_begin; i0 < num_rows; i0 += 4) {
      const int64_t nr = std::min<int64_t>(4, num_rows - i0);
      for (int64_t t = 0; t < nt; ++t) {
        __m512 dot[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        for (int64_t c = 0; c < num_chunks; ++c) {
          const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
          const __m512 kv = _mm512_maskz_loadu_ps(m, k_rows[t] + c * 16);
          for (int64_t r = 0; r < nr; ++r) {
            dot[r] = _mm512_fmadd_ps(_mm512_load_ps(&tl.q[i0 + r][c * 16]), kv, dot[r]);
          }
        }
        for (int64_t r = 0; r < nr; ++r) tl.p[i0 + r][t] = _mm512_reduce_add_ps(dot[r]);
      }
    }

    // Online softmax update per row.
    for (int64_t i = row_begin; i < num_rows; ++i) {
      const int64_t num_valid = std::min<int64_t>(nt, row_pos(i) - t0 + 1);  // >= 1 here
      const __mmask16 v0 = tail_mask(num_valid);
      const __mmask16 v1 = tail_mask(std::max<int64_t>(0, num_valid - 16));
      const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      const __m512 s0 = _mm512_mask_load_ps(neg_inf, v0, &tl.p[i][0]);
      const __m512 s1 = _mm512_mask_load_ps(neg_inf, v1, &tl.p[i][16]);
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
    for (int64_t i0 = row_begin; i0 < num_rows; i0 += 4) {
      const int64_t nr = std::min<int64_t>(4, num_rows - i0);
      for (int64_t c = 0; c < num_chunks; ++c) {
        const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
        __m512 a[4];
        for (int64_t r = 0; r < nr; ++r) a[r] = _mm512_load_ps(&tl.acc[i0 + r][c * 16]);
        for (int64_t t = 0; t < nt; ++t) {
          const __m512 vv = _mm512_maskz_loadu_ps(m, v_rows[t] + c * 16);
          for (int64_t r = 0; r < nr; ++r) {
            a[r] = _mm512_fmadd_ps(_mm512_set1_ps(tl.p[i0 + r][t]), vv, a[r]);
          }
        }
        for (int64_t r = 0; r < nr; ++r) _mm512_store_ps(&tl.acc[i0 + r][c * 16], a[r]);
      }
    }
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
      run_item(item, tiles, out, q, q_stride, k_cache, v_cache, block_tables, seq_lens,
               query_start_loc, p, g);
    }
  }
}

}  // namespace vellum::kernels::avx512
