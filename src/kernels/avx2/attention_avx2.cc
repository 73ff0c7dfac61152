// Paged attention on AVX2 + FMA: the algorithm of avx512/attention_avx512.cc (read its header)
// on 8-lane vectors. Work item = (sequence, kv head, group of query tokens × the query heads that
// share the kv head); keys in tiles of kKvTile through the block table, online softmax from
// scratch per partition of attention::kPartitionKeys keys at absolute positions; partials merged
// in partition order by merge_partial, by the thread that walks the whole item or, when the
// items are too few for the threads (attention_plan.h), by a combine pass over partials that
// the threads stored in the workspace. Bitwise the same either way, and batch-invariant.
//
// Sliding window: row i (a query at position p_i) sees keys [lo_i, p_i], lo_i = max(0, p_i - W + 1).
// An item walks keys from lo of its first row, so no block-table entry before the window of the
// sequence's first query token is ever read; per tile, rows whose window has not started or has
// already ended are skipped, and the others mask keys outside [lo_i, p_i].
// Logit softcap: s = cap · tanh(s / cap) on the scaled scores before the max.
//
// AVX2 differences: 16 ymm registers, so scores go 8 keys at a time (8 FMA chains + the query);
// no masked 16-bit loads, so f16/bf16 rows with a head-dim tail go through load_u16(p, n).
// Quantized caches (q8_0, q4_0, fp8): K rows are converted to f32 once per tile like f16/bf16
// (each key is reused by every row), V chunks are converted in registers as they are read; the
// cache itself is never copied. K and V are template parameters apart, so they may differ in type.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention_plan.h"
#include "kernels/threads.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels::avx2 {
namespace {

using attention::ItemRows;
using attention::kMaxRows;
using attention::Partial;
using attention::Plan;

constexpr int kKvTile = 32;   // keys per online-softmax step (four vectors of scores)
constexpr int kMaxD = static_cast<int>(kMaxAttentionHeadDim);
static_assert(attention::kPartitionKeys % kKvTile == 0, "a tile never straddles two partitions");

// Online-softmax state of an item's rows: running max m, sum l of e^(s - m), and the
// unnormalised outputs acc.
struct RowStates {
  alignas(32) float acc[kMaxRows][kMaxD];
  float m[kMaxRows];
  float l[kMaxRows];
};

// Per-thread tiles (on the stack: ~85 KB). Rows are zero past head_dim up to a multiple of 8.
struct Tiles {
  alignas(32) float q[kMaxRows][kMaxD];    // scaled queries
  alignas(32) float k[kKvTile][kMaxD];     // converted keys (f16/bf16 caches)
  alignas(32) float p[kMaxRows][kKvTile];  // scores, then probabilities
  RowStates part;                          // the current partition's
  RowStates total;                         // merged over the partitions so far
};

// The arguments of paged_attention that the per-item functions read.
struct Inputs {
  float* out;
  const float* q;
  int64_t q_stride;
  const void* k_cache;
  const void* v_cache;
  const PagedAttentionParams& p;
};

// Head-dim values c .. c + 8 of a cache row (row: its first byte) as f32; the three-argument
// form reads only the first n < 8 (the last chunk of a row whose head dim is not a multiple of
// 8; never for the quantized types, whose head dim is a multiple of 32).
using Row = const uint8_t*;
struct KvF32 {
  static constexpr KvType kType = KvType::kF32;
  static const float* at(Row row, int64_t c) { return reinterpret_cast<const float*>(row) + c; }
  static __m256 load(Row row, int64_t c) { return _mm256_loadu_ps(at(row, c)); }
  static __m256 load(Row row, int64_t c, int64_t n) { return load_f32(at(row, c), n); }
};
struct KvF16 {
  static constexpr KvType kType = KvType::kF16;
  static const uint16_t* at(Row row, int64_t c) { return reinterpret_cast<const uint16_t*>(row) + c; }
  static __m256 load(Row row, int64_t c) { return load_f16(at(row, c)); }
  static __m256 load(Row row, int64_t c, int64_t n) { return load_f16(at(row, c), n); }
};
struct KvBF16 {
  static constexpr KvType kType = KvType::kBF16;
  static const uint16_t* at(Row row, int64_t c) { return reinterpret_cast<const uint16_t*>(row) + c; }
  static __m256 load(Row row, int64_t c) { return load_bf16(at(row, c)); }
  static __m256 load(Row row, int64_t c, int64_t n) { return load_bf16(at(row, c), n); }
};
// GGML block_q8_0 rows: value c sits in block c / 32 (an f16 scale, then 32 int8), so a chunk of
// 8 never straddles two blocks.
struct KvQ8_0 {
  static constexpr KvType kType = KvType::kQ8_0;
  static __m256 load(Row row, int64_t c) {
    const Row block = row + (c / 32) * 34;
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + c % 32));
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    const __m256 scale = _mm256_set1_ps(_cvtsh_ss(scale_bits));
    return _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  }
  static __m256 load(Row row, int64_t c, int64_t /*n*/) { return load(row, c); }
};
// GGML block_q4_0 rows: value c in block c / 32 (an f16 scale, then 16 bytes), in the low nibble
// of byte c % 32 for the block's first 16 values, the high nibble of byte c % 32 - 16 after.
struct KvQ4_0 {
  static constexpr KvType kType = KvType::kQ4_0;
  static __m256 load(Row row, int64_t c) {
    const Row block = row + (c / 32) * 18;
    const int64_t in_block = c % 32;
    __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + in_block % 16));
    if (in_block >= 16) q = _mm_srli_epi16(q, 4);
    q = _mm_and_si128(q, _mm_set1_epi8(0x0f));
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    const __m256i centred = _mm256_sub_epi32(_mm256_cvtepu8_epi32(q), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(scale_bits)), _mm256_cvtepi32_ps(centred));
  }
  static __m256 load(Row row, int64_t c, int64_t /*n*/) { return load(row, c); }
};
// fp8 rows: an f32 scale, then one byte per value. E5M2 is an f16's upper byte. E4M3's seven
// magnitude bits shifted into an f16's place read as an f16 with bias 15 instead of 7: 2^-8 of
// the value, subnormals included; the scale carries the 2^8 back.
template <bool kE4M3>
struct KvFp8 {
  static constexpr KvType kType = kE4M3 ? KvType::kFp8E4M3 : KvType::kFp8E5M2;
  static __m256 convert(__m128i bytes, Row row) {
    const __m128i wide = _mm_cvtepu8_epi16(bytes);
    __m128i h;
    if constexpr (kE4M3) {
      h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(wide, _mm_set1_epi16(0x7f)), 7),
                       _mm_slli_epi16(_mm_and_si128(wide, _mm_set1_epi16(0x80)), 8));
    } else {
      h = _mm_slli_epi16(wide, 8);
    }
    float scale;
    std::memcpy(&scale, row, sizeof(float));
    return _mm256_mul_ps(_mm256_set1_ps(kE4M3 ? scale * 256.0f : scale), _mm256_cvtph_ps(h));
  }
  static __m256 load(Row row, int64_t c) {
    return convert(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 4 + c)), row);
  }
  static __m256 load(Row row, int64_t c, int64_t n) {
    uint64_t bytes = 0;
    std::memcpy(&bytes, row + 4 + c, static_cast<size_t>(n));
    return convert(_mm_cvtsi64_si128(static_cast<long long>(bytes)), row);
  }
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
void pv_chunk(Tiles& tl, int64_t i0, const Row* v_rows, int64_t nt, int64_t c, int64_t tail) {
  __m256 a[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) a[r] = _mm256_load_ps(&tl.part.acc[i0 + r][c]);
  for (int64_t t = 0; t < nt; ++t) {
    const __m256 vv = kTail ? Kv::load(v_rows[t], c, tail) : Kv::load(v_rows[t], c);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&tl.p[i0 + r][t]), vv, a[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) _mm256_store_ps(&tl.part.acc[i0 + r][c], a[r]);
}

template <int kRows, class Kv>
void pv_rows(Tiles& tl, int64_t i0, const Row* v_rows, int64_t nt, int64_t d) {
  const int64_t full = d / 8 * 8;
  for (int64_t c = 0; c < full; c += 8) pv_chunk<kRows, false, Kv>(tl, i0, v_rows, nt, c, 0);
  if (full < d) pv_chunk<kRows, true, Kv>(tl, i0, v_rows, nt, full, d - full);
}

// tl.q := the item's queries times the scale, zero past head_dim up to a multiple of 8.
void load_queries(const Inputs& in, const ItemRows& r, Tiles& tl) {
  const int64_t d = in.p.head_dim;
  const int64_t d_pad = (d + 7) / 8 * 8;
  const __m256 scale = _mm256_set1_ps(in.p.scale);
  for (int64_t i = 0; i < r.num_rows; ++i) {
    const float* src = in.q + (r.q_token0 + i / r.heads) * in.q_stride + (r.head0 + i % r.heads) * d;
    for (int64_t c = 0; c < d_pad; c += 8) {
      _mm256_store_ps(&tl.q[i][c], _mm256_mul_ps(load_f32(src + c, d - c), scale));
    }
  }
}

void reset(RowStates& s, int64_t num_rows, int64_t d_pad) {
  for (int64_t i = 0; i < num_rows; ++i) {
    for (int64_t c = 0; c < d_pad; c += 8) _mm256_store_ps(&s.acc[i][c], _mm256_setzero_ps());
    s.m[i] = -std::numeric_limits<float>::infinity();
    s.l[i] = 0.0f;
  }
}

// tl.part := the online softmax of the item's rows over the keys of one partition (tl.q loaded).
// Kk reads the K pool, Kv the V pool.
template <class Kk, class Kv>
void attend_partition(const Inputs& in, const ItemRows& r, int64_t kv_head, int64_t partition,
                      Tiles& tl) {
  const PagedAttentionParams& p = in.p;
  const int64_t d = p.head_dim;
  const int64_t d_pad = (d + 7) / 8 * 8;
  const int64_t hpi = r.heads;
  const int64_t num_rows = r.num_rows;
  const int64_t window = p.sliding_window;
  auto row_pos = [&](int64_t i) { return r.pos0 + i / hpi; };
  auto row_lo = [&](int64_t i) {
    return window > 0 ? std::max<int64_t>(0, row_pos(i) - window + 1) : int64_t{0};
  };
  reset(tl.part, num_rows, d_pad);

  // Key tiles start at multiples of kKvTile whatever the item's first row, so a row sums its
  // keys in the same tiles however the queries were grouped into items (chunked prefill, other
  // requests sharing the step): batch invariance. Keys before the item's window (kv_first) are
  // never read: their slots in the first tile repeat key kv_first and are masked like any key
  // outside a row's window (no change without a sliding window: kv_first is 0).
  const int64_t kv_first = r.key_begin;
  const int64_t kv_begin =
      std::max(kv_first, partition * attention::kPartitionKeys) / kKvTile * kKvTile;
  const int64_t kv_end = std::min(r.key_end, (partition + 1) * attention::kPartitionKeys);
  constexpr bool kConvertK = Kk::kType != KvType::kF32;
  const size_t k_row_bytes = kv_row_bytes(Kk::kType, d);
  const size_t v_row_bytes = kv_row_bytes(Kv::kType, d);
  const Row k_base = static_cast<Row>(in.k_cache);
  const Row v_base = static_cast<Row>(in.v_cache);
  auto tile_offsets = [&](int64_t t_begin, int64_t* offsets) {
    return attention::tile_row_offsets(p, r, kv_head, t_begin, kKvTile, offsets);
  };
  // The next tile may be the next partition's first: the stream does not stall at partition ends.
  // Its K rows are prefetched at the start of this tile, its V rows before this tile's P·V, as
  // in avx512/attention_avx512.cc.
  auto prefetch = [&](Row base, size_t row_bytes, const int64_t* rows, int64_t n) {
    for (int64_t t = 0; t < n; ++t) {
      const char* row = reinterpret_cast<const char*>(base + static_cast<size_t>(rows[t]) * row_bytes);
      for (size_t line = 0; line < row_bytes; line += 64) prefetch_l2(row + line);
    }
  };
  int64_t offsets[kKvTile];
  int64_t next_offsets[kKvTile];
  {
    const int64_t n = tile_offsets(kv_begin, offsets);
    prefetch(k_base, k_row_bytes, offsets, n);
    prefetch(v_base, v_row_bytes, offsets, n);
  }
  const float* k_rows[kKvTile];
  Row v_rows[kKvTile];
  const float cap = p.logit_softcap;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t t0 = kv_begin; t0 < kv_end; t0 += kKvTile) {
    const int64_t nt = std::min<int64_t>(kKvTile, kv_end - t0);
    const int64_t next_n = t0 + kKvTile < r.key_end ? tile_offsets(t0 + kKvTile, next_offsets) : 0;
    prefetch(k_base, k_row_bytes, next_offsets, next_n);
    // Rows that see at least one of these keys: position >= t0 (causal) and window start
    // < t0 + nt. Positions grow with the row index, so both bounds are row ranges.
    const int64_t row_begin = std::max<int64_t>(0, t0 - r.pos0) * hpi;
    const int64_t row_end =
        window > 0 ? std::min(num_rows, std::max<int64_t>(0, t0 + nt + window - 1 - r.pos0) * hpi)
                   : num_rows;
    for (int64_t t = 0; t < nt; ++t) {
      v_rows[t] = v_base + static_cast<size_t>(offsets[t]) * v_row_bytes;
      const Row k_row = k_base + static_cast<size_t>(offsets[t]) * k_row_bytes;
      if constexpr (!kConvertK) {
        k_rows[t] = KvF32::at(k_row, 0);
      } else {  // keys are reused by every row and 8 at a time: convert once
        int64_t c = 0;
        for (; c + 8 <= d; c += 8) _mm256_store_ps(&tl.k[t][c], Kk::load(k_row, c));
        if (c < d) _mm256_store_ps(&tl.k[t][c], Kk::load(k_row, c, d - c));
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
      const float m_new = std::max(tl.part.m[i], reduce_max(vmax));
      const float alpha = std::exp(tl.part.m[i] - m_new);  // 0 on the first tile (m = -inf)
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int v = 0; v < kKvTile / 8; ++v) {
        const __m256 pv = _mm256_and_ps(valid[v], exp_ps(_mm256_sub_ps(s[v], mv)));
        _mm256_store_ps(&tl.p[i][8 * v], pv);
        sum = _mm256_add_ps(sum, pv);
      }
      tl.part.l[i] = tl.part.l[i] * alpha + reduce_add(sum);
      tl.part.m[i] = m_new;
      if (alpha != 1.0f) {
        const __m256 av = _mm256_set1_ps(alpha);
        for (int64_t c = 0; c < d_pad; c += 8) {
          _mm256_store_ps(&tl.part.acc[i][c], _mm256_mul_ps(_mm256_load_ps(&tl.part.acc[i][c]), av));
        }
      }
    }

    prefetch(v_base, v_row_bytes, next_offsets, next_n);
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
}

// Folds row i's partial of one partition (m_p, l_p, acc_p) into its running total. The only place
// partials meet, for the walk of a whole item and for the pass that combines split partitions
// alike: so both round the same. Explicit FMAs: GCC may contract a · b + c or not, per call site.
void merge_partial(float m_p, float l_p, const float* acc_p, RowStates& total, int64_t i,
                   int64_t d_pad) {
  if (m_p == -std::numeric_limits<float>::infinity()) return;  // no key of the row there
  const float m = std::max(total.m[i], m_p);
  const float a = std::exp(total.m[i] - m);  // 0 for the row's first partition (m = -inf)
  const float b = std::exp(m_p - m);
  total.l[i] = std::fma(l_p, b, total.l[i] * a);
  total.m[i] = m;
  const __m256 av = _mm256_set1_ps(a);
  const __m256 bv = _mm256_set1_ps(b);
  for (int64_t c = 0; c < d_pad; c += 8) {
    float* dst = &total.acc[i][c];
    _mm256_store_ps(dst, _mm256_fmadd_ps(_mm256_load_ps(acc_p + c), bv,
                                         _mm256_mul_ps(_mm256_load_ps(dst), av)));
  }
}

// out rows of the item := total.acc / total.l.
void write_output(const Inputs& in, const ItemRows& r, const RowStates& total) {
  const int64_t d = in.p.head_dim;
  for (int64_t i = 0; i < r.num_rows; ++i) {
    const __m256 inv_l = _mm256_set1_ps(1.0f / total.l[i]);
    float* dst = in.out + ((r.q_token0 + i / r.heads) * in.p.num_heads + r.head0 + i % r.heads) * d;
    for (int64_t c = 0; c < d; c += 8) {
      const __m256 x = _mm256_mul_ps(_mm256_load_ps(&total.acc[i][c]), inv_l);
      if (d - c >= 8) {
        _mm256_storeu_ps(dst + c, x);
      } else {
        store_f32(dst + c, x, d - c);
      }
    }
  }
}

// A whole item on one thread: its partitions in order, each merged into the total as it ends.
template <class Kk, class Kv>
void run_item(const Inputs& in, const Plan& plan, int64_t item_idx, Tiles& tl) {
  const attention::Item item = plan.item(item_idx);
  const ItemRows r = plan.rows(item);
  const int64_t d_pad = (in.p.head_dim + 7) / 8 * 8;
  load_queries(in, r, tl);
  reset(tl.total, r.num_rows, d_pad);
  for (int64_t part = r.partition_begin; part < r.partition_end; ++part) {
    attend_partition<Kk, Kv>(in, r, item.kv_head, part, tl);
    for (int64_t i = 0; i < r.num_rows; ++i) {
      merge_partial(tl.part.m[i], tl.part.l[i], tl.part.acc[i], tl.total, i, d_pad);
    }
  }
  write_output(in, r, tl.total);
}

// One partition of an item, its partial stored in the plan's slot.
template <class Kk, class Kv>
void run_unit(const Inputs& in, const Plan& plan, int64_t unit_idx, Tiles& tl) {
  const attention::Unit unit = plan.unit(unit_idx);
  const ItemRows r = plan.rows(unit.item);
  load_queries(in, r, tl);
  attend_partition<Kk, Kv>(in, r, unit.item.kv_head, r.partition_begin + unit.offset, tl);
  const Partial dst = plan.partial(unit.item_idx, unit.offset);
  const int64_t d_pad = (in.p.head_dim + 7) / 8 * 8;
  for (int64_t i = 0; i < r.num_rows; ++i) {
    dst.m[i] = tl.part.m[i];
    dst.l[i] = tl.part.l[i];
    for (int64_t c = 0; c < d_pad; c += 8) {
      _mm256_store_ps(dst.acc + i * dst.acc_stride + c, _mm256_load_ps(&tl.part.acc[i][c]));
    }
  }
}

// The stored partials of a split item, merged in partition order as run_item does.
void combine_item(const Inputs& in, const Plan& plan, int64_t item_idx, Tiles& tl) {
  const ItemRows r = plan.rows(plan.item(item_idx));
  const int64_t d_pad = (in.p.head_dim + 7) / 8 * 8;
  reset(tl.total, r.num_rows, d_pad);
  for (int64_t offset = 0; offset < r.partition_end - r.partition_begin; ++offset) {
    const Partial src = plan.partial(item_idx, offset);
    for (int64_t i = 0; i < r.num_rows; ++i) {
      merge_partial(src.m[i], src.l[i], src.acc + i * src.acc_stride, tl.total, i, d_pad);
    }
  }
  write_output(in, r, tl.total);
}

template <class Kk, class Kv>
void run(const Inputs& in, const Plan& plan) {
  if (!plan.split()) {
    threads::parallel_for_dynamic<Tiles>(plan.num_items(), [&](int64_t idx, Tiles& tiles) {
      run_item<Kk, Kv>(in, plan, idx, tiles);
    });
    return;
  }
  threads::parallel_for_dynamic<Tiles>(plan.num_units(), [&](int64_t u, Tiles& tiles) {
    run_unit<Kk, Kv>(in, plan, u, tiles);
  });
  // Every partial is stored: merge them.
  threads::parallel_for_dynamic<Tiles>(plan.num_items(), [&](int64_t idx, Tiles& tiles) {
    combine_item(in, plan, idx, tiles);
  });
}

}  // namespace

void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& p,
                     void* workspace) {
  const Plan plan(p, block_tables, seq_lens, query_start_loc, workspace);
  const Inputs in{out, q, q_stride, k_cache, v_cache, p};
  // K and V of one type, or any K with a bf16, f16 or q8_0 V (kv_type_pair_supported): each pair
  // is a compiled copy of the kernel, so not all 49.
  auto with_v = [&]<class Kk>() {
    if (p.v_type == Kk::kType) return run<Kk, Kk>(in, plan);
    switch (p.v_type) {
      case KvType::kF16: return run<Kk, KvF16>(in, plan);
      case KvType::kBF16: return run<Kk, KvBF16>(in, plan);
      case KvType::kQ8_0: return run<Kk, KvQ8_0>(in, plan);
      default: return ref::paged_attention(in.out, in.q, in.q_stride, in.k_cache, in.v_cache,
                                           block_tables, seq_lens, query_start_loc, p, nullptr);
    }
  };
  switch (p.k_type) {
    case KvType::kF32: return with_v.template operator()<KvF32>();
    case KvType::kF16: return with_v.template operator()<KvF16>();
    case KvType::kBF16: return with_v.template operator()<KvBF16>();
    case KvType::kQ8_0: return with_v.template operator()<KvQ8_0>();
    case KvType::kQ4_0: return with_v.template operator()<KvQ4_0>();
    case KvType::kFp8E4M3: return with_v.template operator()<KvFp8<true>>();
    case KvType::kFp8E5M2: return with_v.template operator()<KvFp8<false>>();
  }
}

}  // namespace vellum::kernels::avx2
