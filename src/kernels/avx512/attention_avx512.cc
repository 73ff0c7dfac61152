// Paged attention on AVX-512: one kernel for decode tokens and prefill chunks.
//
// Work item = (sequence, kv head, group of up to kMaxRows/heads query tokens). The query heads
// that share a kv head are processed together ("rows" = tokens × heads of the group), so each
// K/V row is read from the cache (and converted from f16/bf16) once per group instead of once
// per head. Keys are walked in tiles of kKvTile tokens through the block table with an online
// (flash-attention) softmax: running max m and sum l per row, f32 accumulators rescaled by
// e^(m_old - m_new).
// Partitions (split-K, flash-decoding): an item's keys are cut at absolute multiples of
// attention::kPartitionKeys (512). Each partition runs the online softmax from scratch, and its
// partial (m, l, acc) is merged into the row's total in partition order by merge_partial. When
// the items are many (a decode batch, a long prefill), each thread walks whole items and merges
// as it goes. When they are few (one long decode sequence, few kv heads: attention_plan.h
// decides), the (item, partition) units are spread over the threads, which store their partials
// in the workspace; a second pass merges them in partition order with the same merge_partial and
// normalises. Both ways compute every partition and every merge alike, so the output is bitwise
// the same, and since tiles and partitions sit at absolute key positions, a row's result does not
// depend on the other rows of its item or batch either (batch invariance).
// Sliding window: row i (a query at position p_i) sees keys [lo_i, p_i], lo_i = max(0, p_i - W + 1).
// An item walks keys from lo of its first row, so no block-table entry before the window of the
// sequence's first query token is ever read; per tile, rows whose window has not started or has
// already ended are skipped, and the others mask keys outside [lo_i, p_i].
// Logit softcap: s = cap · tanh(s / cap) on the scaled scores before the max.
// bf16 cache on AVX512-BF16 (KvBF16Dot): the products run as VDPBF16PS dot products on the
// cached bf16 values as they are, with the queries and the probabilities rounded to bf16 (what
// llama.cpp does with a bf16 cache, and FlashAttention with bf16 inputs); sums, softmax and the
// accumulators stay f32. No conversion of K or V to f32: about half the instructions per key.
// P·V pairs two keys per 32-bit lane (their V rows interleaved), so during a partition the
// accumulators hold the head dims in the interleaved order (see unpermute_acc).
// Quantized caches (q8_0 / q4_0 GGML blocks of 32 with an f16 scale, fp8 rows with an f32 scale):
// read where the 16-bit types are, each 16-value chunk widened to f32 and scaled in registers (K converted once per tile into
// tl.k when many rows share it, as f16/bf16 are); the cache itself is never copied. K and V are
// template parameters apart (Kk, Kv), so they may differ in type; the bf16 dot path needs both.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/isa.h"
#include "kernels/attention_plan.h"
#include "kernels/threads.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels::avx512 {
namespace {

using attention::ItemRows;
using attention::kMaxRows;
using attention::Partial;
using attention::Plan;

// Keys per online-softmax step (four vectors of scores). 64 rather than 32 halves the per-tile
// work (max, exp of the rescale, sums, offsets): decode at head dim 64 measured ~15 % faster
// single-threaded, neutral at 128. Changing it changes the rounding, never batch invariance.
constexpr int kKvTile = 64;
constexpr int kMaxD = static_cast<int>(kMaxAttentionHeadDim);
static_assert(attention::kPartitionKeys % kKvTile == 0, "a tile never straddles two partitions");
// Items with at least this many query heads (per kv head) score a bf16 cache with four lanes per
// row (scores_lanes4_group); with one or two, the sixteen-lane dot products waste fewer lanes.
constexpr int64_t kLanes4MinHeads = 3;

// Online-softmax state of an item's rows: running max m, sum l of e^(s - m), and the
// unnormalised outputs acc.
struct RowStates {
  alignas(64) float acc[kMaxRows][kMaxD];
  float m[kMaxRows];
  float l[kMaxRows];
};

// Per-thread tiles (on the stack: ~120 KB, well inside an OpenMP worker's stack).
struct Tiles {
  alignas(64) float q[kMaxRows][kMaxD];    // scaled queries
  alignas(64) float k[kKvTile][kMaxD];     // converted keys (f16/bf16 caches)
  alignas(64) float p[kMaxRows][kKvTile];  // scores, then probabilities
  // KvBF16Dot only: the scaled queries as bf16 (zero past head_dim), and the probabilities as
  // bf16 pairs (keys 2j and 2j + 1 in lane j).
  alignas(64) uint16_t qb[kMaxRows][kMaxD];
  alignas(64) uint32_t pb[kMaxRows][kKvTile / 2];
  // KvBF16Dot with four lanes per row (scores_lanes4): rows 4g..4g+3, 8 dims (chunk c) each,
  // one row per 128-bit lane; zero for rows past the item's.
  alignas(64) uint16_t q4[kMaxRows / 4][kMaxD / 8][32];
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

// The next tile's K or V rows, prefetched into L2 a row at a time from inside the loops over this
// tile's keys, so the misses spread over the tile's work (a burst of a whole tile's rows, 8 KB at
// head dim 64, filled the miss queue and stalled the core on the prefetches themselves).
struct TilePrefetch {
  const char* base = nullptr;
  const int64_t* rows = nullptr;  // row indices into the pool, rows of row_bytes
  int64_t n = 0;                  // rows; 0: nothing to prefetch
  size_t row_bytes = 0;
  void row(int64_t t) const {
    if (t >= n) return;
    const char* r = base + static_cast<size_t>(rows[t]) * row_bytes;
    for (size_t line = 0; line < row_bytes; line += 64) prefetch_l2(r + line);
  }
  void all() const {
    for (int64_t t = 0; t < n; ++t) row(t);
  }
};

// Loads the 16 (masked) head-dim values of chunk c (values 16c ..) of a cache row as f32; T is
// what the kernel's row pointers point to (bytes, but bf16 values for the dot path).
using Row = const uint8_t*;
struct KvF32 {
  using T = uint8_t;
  static constexpr KvType kType = KvType::kF32;
  static constexpr bool kDot = false;
  static __m512 load(Row row, int64_t c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c * 16);
  }
};
struct KvF16 {
  using T = uint8_t;
  static constexpr KvType kType = KvType::kF16;
  static constexpr bool kDot = false;
  static __m512 load(Row row, int64_t c, __mmask16 m) {
    return load_f16(reinterpret_cast<const uint16_t*>(row) + c * 16, m);
  }
};
struct KvBF16 {
  using T = uint8_t;
  static constexpr KvType kType = KvType::kBF16;
  static constexpr bool kDot = false;
  static __m512 load(Row row, int64_t c, __mmask16 m) {
    return load_bf16(reinterpret_cast<const uint16_t*>(row) + c * 16, m);
  }
};
// GGML block_q8_0 rows (head dim a multiple of 32, so every mask is full): chunk c is half c % 2
// of block c / 2, 34 bytes = an f16 scale and 32 int8.
struct KvQ8_0 {
  using T = uint8_t;
  static constexpr KvType kType = KvType::kQ8_0;
  static constexpr bool kDot = false;
  static __m512 load(Row row, int64_t c, __mmask16 /*m*/) {
    const Row block = row + (c / 2) * 34;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + (c % 2) * 16));
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(scale_bits)),
                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
};
// GGML block_q4_0 rows: chunk c is half c % 2 of block c / 2 (18 bytes: an f16 scale, then
// 16 bytes holding the block's first 16 values in their low nibbles, the next 16 in the high).
struct KvQ4_0 {
  using T = uint8_t;
  static constexpr KvType kType = KvType::kQ4_0;
  static constexpr bool kDot = false;
  static __m512 load(Row row, int64_t c, __mmask16 /*m*/) {
    const Row block = row + (c / 2) * 18;
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    if (c % 2 == 1) q = _mm_srli_epi16(q, 4);
    q = _mm_and_si128(q, _mm_set1_epi8(0x0f));
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    const __m512i centred = _mm512_sub_epi32(_mm512_cvtepu8_epi32(q), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(scale_bits)), _mm512_cvtepi32_ps(centred));
  }
};
// fp8 rows: an f32 scale, then one byte per value. E5M2 is an f16's upper byte. E4M3's seven
// magnitude bits shifted into an f16's place read as an f16 with bias 15 instead of 7: 2^-8 of
// the value, subnormals included; the scale carries the 2^8 back.
template <bool kE4M3>
struct KvFp8 {
  using T = uint8_t;
  static constexpr KvType kType = kE4M3 ? KvType::kFp8E4M3 : KvType::kFp8E5M2;
  static constexpr bool kDot = false;
  static __m512 load(Row row, int64_t c, __mmask16 m) {
    const __m256i wide = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, row + 4 + c * 16));
    __m256i h;
    if constexpr (kE4M3) {
      h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(wide, _mm256_set1_epi16(0x7f)), 7),
                          _mm256_slli_epi16(_mm256_and_si256(wide, _mm256_set1_epi16(0x80)), 8));
    } else {
      h = _mm256_slli_epi16(wide, 8);
    }
    float scale;
    std::memcpy(&scale, row, sizeof(float));
    return _mm512_mul_ps(_mm512_set1_ps(kE4M3 ? scale * 256.0f : scale), _mm512_cvtph_ps(h));
  }
};
// A bf16 cache read by VDPBF16PS (AVX512-BF16): no load() to f32, see the file comment.
struct KvBF16Dot {
  using T = uint16_t;
  static constexpr KvType kType = KvType::kBF16;
  static constexpr bool kDot = true;
};

// The first two levels of the transpose-and-add trees below: y[i] lane 4q + k := the sum of
// lane quad q of v[4i + k] (k in 0..3), for 16 vectors v.
inline void sum_lane_quads(const __m512* v, __m512* y) {
  __m512 x[8];
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
}

// Sums of each of 16 vectors, as one vector (lane t = sum of v[t]): a transpose-and-add tree,
// 45 shuffles/adds for 16 sums instead of ~8 dependent steps per _mm512_reduce_add_ps.
inline __m512 reduce_add_16(const __m512* v) {
  __m512 y[4];
  sum_lane_quads(v, y);
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

// The mask of head-dim chunk c: all 16 lanes but in the last chunk.
__mmask16 chunk_mask(int64_t c, int64_t num_chunks, __mmask16 last_mask) {
  return c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
}

// Scores of kR = 16 / kChunks query rows at a time against the tile's keys, with the rows'
// queries held in registers: each key chunk is loaded (and converted, reading a bf16/f16 cache
// directly) once per kR rows instead of once per row. Per row and key the arithmetic is that of
// scores_16 (FMAs over the chunks in order from zero, then reduce_add_16), so the result is
// bitwise the same however the rows are blocked. k_rows has kKvTile valid pointers (a short
// tile repeats a row; those scores are masked later).
template <int kChunks, class KLoad>
void scores_blocked(Tiles& tl, int64_t row_begin, int64_t row_end, const Row* k_rows, int64_t nt,
                    __mmask16 last_mask) {
  constexpr int kR = 16 / kChunks;
  alignas(64) __m512 dots[kR][16];
  for (int64_t i0 = row_begin; i0 < row_end; i0 += kR) {
    const int64_t nr = std::min<int64_t>(kR, row_end - i0);
    __m512 q[kR][kChunks];
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < kChunks; ++c) {
        q[r][c] = r < nr ? _mm512_load_ps(&tl.q[i0 + r][c * 16]) : _mm512_setzero_ps();
      }
    }
    for (int64_t t0 = 0; t0 < nt; t0 += 16) {
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) {
        const Row k = k_rows[t0 + t];
        __m512 acc[kR];
#pragma GCC unroll 16
        for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int c = 0; c < kChunks; ++c) {
          const __m512 kv = KLoad::load(k, c, chunk_mask(c, kChunks, last_mask));
#pragma GCC unroll 16
          for (int r = 0; r < kR; ++r) acc[r] = _mm512_fmadd_ps(q[r][c], kv, acc[r]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < kR; ++r) dots[r][t] = acc[r];
      }
      for (int64_t r = 0; r < nr; ++r) _mm512_store_ps(&tl.p[i0 + r][t0], reduce_add_16(dots[r]));
    }
  }
}

// The row counts are template parameters so that the per-row accumulators stay in registers
// (with a run-time count GCC keeps the arrays on the stack, one store-to-load chain per FMA).
// V is read straight from the cache (converted in registers): each value vector is used by
// kRows rows right away, so a converted copy would only add a store and a load. Head-dim chunks
// go 4 at a time with the keys inside, so kRows × 4 accumulators stay in registers and each
// row's probability is broadcast once per 4 chunks; per (row, chunk) the FMAs run over the keys
// in order, as the one-chunk loop for a last partial group does (bitwise the same).
template <int kRows, class Kv>
void pv_rows(Tiles& tl, int64_t i0, const Row* v_rows, int64_t nt, int64_t num_chunks,
             __mmask16 last_mask) {
  int64_t c0 = 0;
  for (; c0 + 4 <= num_chunks; c0 += 4) {
    __mmask16 m[4];
    __m512 a[kRows][4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      m[j] = chunk_mask(c0 + j, num_chunks, last_mask);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) a[r][j] = _mm512_load_ps(&tl.part.acc[i0 + r][(c0 + j) * 16]);
    }
    for (int64_t t = 0; t < nt; ++t) {
      __m512 vv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) vv[j] = Kv::load(v_rows[t], c0 + j, m[j]);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const __m512 pr = _mm512_set1_ps(tl.p[i0 + r][t]);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) a[r][j] = _mm512_fmadd_ps(pr, vv[j], a[r][j]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) _mm512_store_ps(&tl.part.acc[i0 + r][(c0 + j) * 16], a[r][j]);
    }
  }
  for (int64_t c = c0; c < num_chunks; ++c) {
    const __mmask16 m = c + 1 == num_chunks ? last_mask : __mmask16(0xffff);
    __m512 a[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) a[r] = _mm512_load_ps(&tl.part.acc[i0 + r][c * 16]);
    for (int64_t t = 0; t < nt; ++t) {
      const __m512 vv = Kv::load(v_rows[t], c, m);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        a[r] = _mm512_fmadd_ps(_mm512_set1_ps(tl.p[i0 + r][t]), vv, a[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) _mm512_store_ps(&tl.part.acc[i0 + r][c * 16], a[r]);
  }
}

// --- bf16 dot products (KvBF16Dot) ---------------------------------------------------------

__m512bh as_bh(__m512i x) { return reinterpret_cast<__m512bh>(x); }

// Scores with four lanes per row (items of 3 or more query heads per kv head: decode of every
// GQA model with groups of 4 or 8). Rows go four to a vector, row r of a group in 128-bit lane r;
// a key's 8-dim chunk c is broadcast to the four lanes and one VDPBF16PS per chunk accumulates
// all four rows (two dims per 32-bit lane). So a key costs head_dim / 8 dot products for four
// rows, as the sixteen-lane path does, but the sums left at the end are four lanes per row and
// key instead of sixteen: reduce_rows4 folds 16 keys x 4 rows in 44 shuffles/adds, where
// reduce_add_16 needs 45 per row. A row's arithmetic (chunks in order from zero, then the lane
// tree) does not depend on the other rows of its vector or item: batch invariance holds as long
// as the choice of path depends only on the model (heads per item), which it does.

// v[t] (t < 16) holds key t's four partial sums of each row (lanes 4r..4r+3); rows[r] := the 16
// keys' scores of row r.
inline void reduce_rows4(const __m512* v, __m512* rows) {
  __m512 y[4];  // per row (lane quad): the sums of keys 4i..4i+3
  sum_lane_quads(v, y);
  // A 4 x 4 transpose of 128-bit lanes: rows[r] lane i := y[i] lane r.
  const __m512 t0 = _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512 t1 = _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512 t2 = _mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512 t3 = _mm512_shuffle_f32x4(y[2], y[3], _MM_SHUFFLE(3, 2, 3, 2));
  rows[0] = _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0));
  rows[1] = _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1));
  rows[2] = _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0));
  rows[3] = _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1));
}

// Scores of row group g (rows 4g.., nr of them valid) against the tile's keys; kNC = head-dim
// chunks of 8, the last one masked by tail8 when kTail.
template <int kNC, bool kTail>
void scores_lanes4_group(Tiles& tl, int64_t g, int64_t nr, const uint16_t* const* k_rows,
                         int64_t nt, __mmask8 tail8, const TilePrefetch& pf) {
  constexpr int kKeys = kNC <= 12 ? 16 : 8;  // accumulators beside the queries' registers
  __m512i q[kNC];
#pragma GCC unroll 32
  for (int c = 0; c < kNC; ++c) q[c] = _mm512_load_si512(tl.q4[g][c]);
  auto chunk = [&](const uint16_t* k, int c) {
    const uint16_t* src = k + 8 * c;
    if (kTail && c + 1 == kNC) return _mm512_broadcast_i32x4(_mm_maskz_loadu_epi16(tail8, src));
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  };
  for (int64_t t0 = 0; t0 < nt; t0 += 16) {
    __m512 dots[16];
#pragma GCC unroll 2
    for (int kb = 0; kb < 16; kb += kKeys) {
      __m512 acc[kKeys];
#pragma GCC unroll 16
      for (int t = 0; t < kKeys; ++t) acc[t] = _mm512_setzero_ps();
#pragma GCC unroll 32
      for (int c = 0; c < kNC; ++c) {
#pragma GCC unroll 16
        for (int t = 0; t < kKeys; ++t) {
          if (c == 0) pf.row(t0 + kb + t);
          acc[t] = _mm512_dpbf16_ps(acc[t], as_bh(q[c]), as_bh(chunk(k_rows[t0 + kb + t], c)));
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < kKeys; ++t) dots[kb + t] = acc[t];
    }
    __m512 rows[4];
    reduce_rows4(dots, rows);
    for (int64_t r = 0; r < nr; ++r) _mm512_store_ps(&tl.p[4 * g + r][t0], rows[r]);
  }
}

template <int kNC, bool kTail>
void scores_lanes4_rows(Tiles& tl, int64_t row_begin, int64_t row_end, int64_t num_rows,
                        const uint16_t* const* k_rows, int64_t nt, __mmask8 tail8,
                        const TilePrefetch& pf) {
  for (int64_t g = row_begin / 4; 4 * g < row_end; ++g) {
    scores_lanes4_group<kNC, kTail>(tl, g, std::min<int64_t>(4, num_rows - 4 * g), k_rows, nt,
                                    tail8, 4 * g <= row_begin ? pf : TilePrefetch{});
  }
}

template <int kNC>
void scores_lanes4_tail(Tiles& tl, int64_t row_begin, int64_t row_end, int64_t num_rows,
                        const uint16_t* const* k_rows, int64_t nt, __mmask8 tail8,
                        const TilePrefetch& pf) {
  if (tail8 == 0xff) {
    return scores_lanes4_rows<kNC, false>(tl, row_begin, row_end, num_rows, k_rows, nt, tail8, pf);
  }
  scores_lanes4_rows<kNC, true>(tl, row_begin, row_end, num_rows, k_rows, nt, tail8, pf);
}

// The tile's scores for rows [row_begin, row_end) of an item of num_rows rows (rows of a group
// before row_begin are computed too and left unused), head_dim d.
template <int kNC = 1>
void tile_scores_lanes4(Tiles& tl, int64_t row_begin, int64_t row_end, int64_t num_rows,
                        const uint16_t* const* k_rows, int64_t nt, int64_t d,
                        const TilePrefetch& pf) {
  if constexpr (kNC < kMaxD / 8) {
    if ((d + 7) / 8 > kNC) {
      return tile_scores_lanes4<kNC + 1>(tl, row_begin, row_end, num_rows, k_rows, nt, d, pf);
    }
  }
  const auto tail8 = static_cast<__mmask8>(d % 8 == 0 ? 0xff : (1u << (d % 8)) - 1);
  scores_lanes4_tail<kNC>(tl, row_begin, row_end, num_rows, k_rows, nt, tail8, pf);
}

// The mask of the 32 bf16 lanes of head-dim chunk c (32 dims) of num_c2: all but in the last.
__mmask32 chunk_mask32(int64_t c, int64_t num_c2, __mmask32 last_mask) {
  return c + 1 == num_c2 ? last_mask : __mmask32(0xffffffff);
}

// Scores of kR rows against the tile's keys, VDPBF16PS on the bf16 queries (tl.qb, in registers)
// and the cached keys as stored: per row and key, kC2 dot products over 32 dims from zero in
// chunk order, then reduce_add_16: the same instructions however rows are blocked.
template <int kC2, int kR>
void scores_dot_rows(Tiles& tl, int64_t i0, const uint16_t* const* k_rows, int64_t nt,
                     __mmask32 last_mask) {
  __m512i q[kR][kC2];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < kC2; ++c) q[r][c] = _mm512_load_si512(&tl.qb[i0 + r][c * 32]);
  }
  alignas(64) __m512 dots[kR][16];
  for (int64_t t0 = 0; t0 < nt; t0 += 16) {
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      const uint16_t* k = k_rows[t0 + t];
      __m512 acc[kR];
#pragma GCC unroll 8
      for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int c = 0; c < kC2; ++c) {
        const __m512i kv = _mm512_maskz_loadu_epi16(chunk_mask32(c, kC2, last_mask), k + c * 32);
#pragma GCC unroll 8
        for (int r = 0; r < kR; ++r) acc[r] = _mm512_dpbf16_ps(acc[r], as_bh(q[r][c]), as_bh(kv));
      }
#pragma GCC unroll 8
      for (int r = 0; r < kR; ++r) dots[r][t] = acc[r];
    }
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) _mm512_store_ps(&tl.p[i0 + r][t0], reduce_add_16(dots[r]));
  }
}

// scores_dot_rows for min(R, n) rows.
template <int kC2, int R>
void scores_dot_upto(int64_t n, Tiles& tl, int64_t i0, const uint16_t* const* k_rows, int64_t nt,
                     __mmask32 last_mask) {
  if constexpr (R > 1) {
    if (n < R) return scores_dot_upto<kC2, R - 1>(n, tl, i0, k_rows, nt, last_mask);
  }
  scores_dot_rows<kC2, R>(tl, i0, k_rows, nt, last_mask);
}

// Rows [row_begin, row_end) in blocks whose queries fit in 16 registers (at most 8 rows).
template <int kC2>
void scores_dot(Tiles& tl, int64_t row_begin, int64_t row_end, const uint16_t* const* k_rows,
                int64_t nt, __mmask32 last_mask) {
  constexpr int kR = std::min(8, std::max(1, 16 / kC2));
  for (int64_t i0 = row_begin; i0 < row_end; i0 += kR) {
    scores_dot_upto<kC2, kR>(row_end - i0, tl, i0, k_rows, nt, last_mask);
  }
}

void tile_scores_dot(Tiles& tl, int64_t row_begin, int64_t row_end, const uint16_t* const* k_rows,
                     int64_t nt, int64_t num_c2, __mmask32 last_mask) {
  switch (num_c2) {
    case 1: return scores_dot<1>(tl, row_begin, row_end, k_rows, nt, last_mask);
    case 2: return scores_dot<2>(tl, row_begin, row_end, k_rows, nt, last_mask);
    case 3: return scores_dot<3>(tl, row_begin, row_end, k_rows, nt, last_mask);
    case 4: return scores_dot<4>(tl, row_begin, row_end, k_rows, nt, last_mask);
    case 5: return scores_dot<5>(tl, row_begin, row_end, k_rows, nt, last_mask);
    case 6: return scores_dot<6>(tl, row_begin, row_end, k_rows, nt, last_mask);
    case 7: return scores_dot<7>(tl, row_begin, row_end, k_rows, nt, last_mask);
    default: return scores_dot<8>(tl, row_begin, row_end, k_rows, nt, last_mask);
  }
}

// acc += P · V for kRows rows, VDPBF16PS on key pairs: the V rows of keys t and t + 1
// interleaved (unpacklo/hi_epi16) times the broadcast pair (p_t, p_t+1) of tl.pb. Chunk c of 32
// dims accumulates in acc[32c, 32c + 16) the dims 32c + 8l + k and in acc[32c + 16, 32c + 32)
// the dims 32c + 8l + 4 + k (lane 4l + k, l and k in 0..3): unpermute_acc restores the order.
// Chunks go 2 at a time with the keys inside (kRows × 4 accumulators in registers); per
// (row, lane) the dot products run over the key pairs in order either way. A last odd key pairs
// with itself: its partner's probability is 0 (tl.p is zero past nt).
template <int kRows>
void pv_dot_rows(Tiles& tl, int64_t i0, const uint16_t* const* v_rows, int64_t nt, int64_t num_c2,
                 __mmask32 last_mask, const TilePrefetch& pf) {
  auto pair = [&](int64_t t) { return v_rows[std::min(t + 1, nt - 1)]; };
  int64_t c0 = 0;
  for (; c0 < num_c2; c0 += 2) {
    const int nc = c0 + 2 <= num_c2 ? 2 : 1;
    __m512 a[kRows][4];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        a[r][j] = j < 2 * nc ? _mm512_load_ps(&tl.part.acc[i0 + r][c0 * 32 + j * 16])
                             : _mm512_setzero_ps();
      }
    }
    // A last odd chunk (head dims like 80) runs with its partner chunk masked off: zeros.
    const __mmask32 m0 = chunk_mask32(c0, num_c2, last_mask);
    const __mmask32 m1 = nc == 2 ? chunk_mask32(c0 + 1, num_c2, last_mask) : __mmask32(0);
    for (int64_t t = 0; t < nt; t += 2) {
      if (c0 == 0) {
        pf.row(t);
        pf.row(t + 1);
      }
      const uint16_t* va = v_rows[t];
      const uint16_t* vb = pair(t);
      const __m512i a0 = _mm512_maskz_loadu_epi16(m0, va + c0 * 32);
      const __m512i b0 = _mm512_maskz_loadu_epi16(m0, vb + c0 * 32);
      const __m512i a1 = _mm512_maskz_loadu_epi16(m1, va + c0 * 32 + 32);
      const __m512i b1 = _mm512_maskz_loadu_epi16(m1, vb + c0 * 32 + 32);
      const __m512i x[4] = {_mm512_unpacklo_epi16(a0, b0), _mm512_unpackhi_epi16(a0, b0),
                            _mm512_unpacklo_epi16(a1, b1), _mm512_unpackhi_epi16(a1, b1)};
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const __m512i pp = _mm512_set1_epi32(static_cast<int>(tl.pb[i0 + r][t / 2]));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) a[r][j] = _mm512_dpbf16_ps(a[r][j], as_bh(x[j]), as_bh(pp));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < 2 * nc; ++j) _mm512_store_ps(&tl.part.acc[i0 + r][c0 * 32 + j * 16], a[r][j]);
    }
  }
}

// The interleaved accumulators of pv_dot_rows back in head-dim order, rows [0, num_rows).
void unpermute_acc(RowStates& s, int64_t num_rows, int64_t num_c2) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i hi_idx =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int64_t i = 0; i < num_rows; ++i) {
    for (int64_t c = 0; c < num_c2; ++c) {
      float* a = &s.acc[i][c * 32];
      const __m512 lo = _mm512_load_ps(a);
      const __m512 hi = _mm512_load_ps(a + 16);
      _mm512_store_ps(a, _mm512_permutex2var_ps(lo, lo_idx, hi));
      _mm512_store_ps(a + 16, _mm512_permutex2var_ps(lo, hi_idx, hi));
    }
  }
}

// The tile's scores tl.p[i][0, nt) for rows [row_begin, row_end). Head dims of 4, 8 or 16
// chunks (64, 128, 256) hold rows' queries in registers (scores_blocked); a single block of rows
// (decode: the query heads of one kv head) reads the keys straight from the cache, more rows
// read them converted once into tl.k. Other head dims use scores_16 per row.
template <class Kk>
void tile_scores(Tiles& tl, int64_t row_begin, int64_t row_end, const Row* cache_rows,
                 int64_t nt, int64_t num_chunks, __mmask16 last_mask) {
  constexpr bool kF32 = Kk::kType == KvType::kF32;
  const bool blocked = num_chunks == 4 || num_chunks == 8 || num_chunks == 16;
  const bool direct = kF32 || (blocked && row_end - row_begin <= 16 / num_chunks);
  if (direct && blocked) {
    switch (num_chunks) {
      case 4: return scores_blocked<4, Kk>(tl, row_begin, row_end, cache_rows, nt, last_mask);
      case 8: return scores_blocked<8, Kk>(tl, row_begin, row_end, cache_rows, nt, last_mask);
      default: return scores_blocked<16, Kk>(tl, row_begin, row_end, cache_rows, nt, last_mask);
    }
  }
  const float* k_rows[kKvTile];  // f32 rows: the cache's, or converted into tl.k
  if constexpr (kF32) {
    for (int64_t t = 0; t < kKvTile; ++t) k_rows[t] = reinterpret_cast<const float*>(cache_rows[t]);
  } else {  // keys are reused by every row: convert once
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t c = 0; c < num_chunks; ++c) {
        _mm512_store_ps(&tl.k[t][c * 16],
                        Kk::load(cache_rows[t], c, chunk_mask(c, num_chunks, last_mask)));
      }
      k_rows[t] = tl.k[t];
    }
    for (int64_t t = nt; t < kKvTile; ++t) k_rows[t] = k_rows[0];
  }
  if (blocked) {
    Row f32_rows[kKvTile];
    for (int64_t t = 0; t < kKvTile; ++t) f32_rows[t] = reinterpret_cast<Row>(k_rows[t]);
    switch (num_chunks) {
      case 4: return scores_blocked<4, KvF32>(tl, row_begin, row_end, f32_rows, nt, last_mask);
      case 8: return scores_blocked<8, KvF32>(tl, row_begin, row_end, f32_rows, nt, last_mask);
      default: return scores_blocked<16, KvF32>(tl, row_begin, row_end, f32_rows, nt, last_mask);
    }
  }
  for (int64_t i = row_begin; i < row_end; ++i) {
    for (int64_t t = 0; t < nt; t += 16) {
      scores_16(tl.q[i], k_rows + t, num_chunks, last_mask, &tl.p[i][t]);
    }
  }
}

// tl.q := the item's queries times the scale, zero past head_dim; with dot, tl.qb := tl.q as bf16.
void load_queries(const Inputs& in, const ItemRows& r, Tiles& tl, bool dot) {
  const int64_t d = in.p.head_dim;
  const int64_t num_chunks = (d + 15) / 16;
  const __mmask16 last_mask = tail_mask(d - (num_chunks - 1) * 16);
  const __m512 scale = _mm512_set1_ps(in.p.scale);
  for (int64_t i = 0; i < r.num_rows; ++i) {
    const float* src = in.q + (r.q_token0 + i / r.heads) * in.q_stride + (r.head0 + i % r.heads) * d;
    for (int64_t c = 0; c < num_chunks; ++c) {
      const __m512 x = _mm512_maskz_loadu_ps(chunk_mask(c, num_chunks, last_mask), src + c * 16);
      _mm512_store_ps(&tl.q[i][c * 16], _mm512_mul_ps(x, scale));
    }
    if (!dot) continue;
    for (int64_t c = 0; c < (d + 31) / 32; ++c) {
      const __m512 hi = 2 * c + 1 < num_chunks ? _mm512_load_ps(&tl.q[i][c * 32 + 16])
                                               : _mm512_setzero_ps();
      const __m512bh x = _mm512_cvtne2ps_pbh(hi, _mm512_load_ps(&tl.q[i][c * 32]));
      _mm512_store_si512(&tl.qb[i][c * 32], reinterpret_cast<__m512i>(x));
    }
  }
  if (!dot || r.heads < kLanes4MinHeads) return;
  for (int64_t g = 0; 4 * g < r.num_rows; ++g) {
    for (int64_t c = 0; c < (d + 7) / 8; ++c) {
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t i = 4 * g + j;
        const __m128i x = i < r.num_rows ? _mm_load_si128(reinterpret_cast<const __m128i*>(&tl.qb[i][8 * c]))
                                         : _mm_setzero_si128();
        _mm_store_si128(reinterpret_cast<__m128i*>(&tl.q4[g][c][8 * j]), x);
      }
    }
  }
}

void reset(RowStates& s, int64_t num_rows, int64_t num_chunks) {
  for (int64_t i = 0; i < num_rows; ++i) {
    for (int64_t c = 0; c < num_chunks; ++c) _mm512_store_ps(&s.acc[i][c * 16], _mm512_setzero_ps());
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
  const int64_t num_chunks = (d + 15) / 16;
  const __mmask16 last_mask = tail_mask(d - (num_chunks - 1) * 16);
  const int64_t hpi = r.heads;
  const int64_t num_rows = r.num_rows;
  const int64_t window = p.sliding_window;
  auto row_pos = [&](int64_t i) { return r.pos0 + i / hpi; };
  auto row_lo = [&](int64_t i) {
    return window > 0 ? std::max<int64_t>(0, row_pos(i) - window + 1) : int64_t{0};
  };
  // The dot path works in chunks of 32 dims, its accumulators interleaved over all of them.
  const int64_t num_c2 = (d + 31) / 32;
  const __mmask32 last_mask32 = static_cast<__mmask32>(
      d - (num_c2 - 1) * 32 == 32 ? 0xffffffffu : (1u << (d - (num_c2 - 1) * 32)) - 1);
  const int64_t acc_chunks = Kv::kDot ? 2 * num_c2 : num_chunks;
  reset(tl.part, num_rows, acc_chunks);

  // Key tiles start at multiples of kKvTile whatever the item's first row, so a row sums its
  // keys in the same tiles however the queries were grouped into items (chunked prefill, other
  // requests sharing the step): batch invariance. Keys before the item's window (kv_first) are
  // never read: their slots in the first tile repeat key kv_first and are masked like any key
  // outside a row's window (no change without a sliding window: kv_first is 0).
  const int64_t kv_first = r.key_begin;
  const int64_t kv_begin =
      std::max(kv_first, partition * attention::kPartitionKeys) / kKvTile * kKvTile;
  const int64_t kv_end = std::min(r.key_end, (partition + 1) * attention::kPartitionKeys);
  static_assert(Kk::kDot == Kv::kDot, "the bf16 dot path reads K and V as bf16");
  const size_t k_row_bytes = kv_row_bytes(Kk::kType, d);
  const size_t v_row_bytes = kv_row_bytes(Kv::kType, d);
  const char* k_base = static_cast<const char*>(in.k_cache);
  const char* v_base = static_cast<const char*>(in.v_cache);
  auto tile_offsets = [&](int64_t t_begin, int64_t* offsets) {
    return attention::tile_row_offsets(p, r, kv_head, t_begin, kKvTile, offsets);
  };
  // Blocks are scattered, so each is a new short stream the hardware prefetcher has to find;
  // prefetching the next tile's K/V rows while this one is computed keeps DRAM busy. The next
  // tile may be the next partition's first: the stream does not stall at partition ends.
  // Into L2: a tile's K and V rows are 16 KB at head dim 64 (bf16), so the next tile's do not
  // fit in a 32 KB L1 beside the current one's. The bf16 dot path used non-temporal prefetches
  // (into L1) from session 12, measured faster then; on 2026-11-28 (Zen 4 guest, same kernel)
  // T1 was 1.4-1.5x faster in every BM_PagedAttentionLongDecode shape (1 and 2 threads, 4K and
  // 32K context, 1 and 8 kv heads, 2 interleaved rounds): 2 threads 18-19 GB/s, ~72 % of what a
  // loop that only reads the same K/V rows in the same order (with these prefetches) reads.
  // The next tile's K rows are prefetched while this tile's scores run, its V rows while its
  // P·V runs (half the burst, half as far ahead): 2 threads 15-19 -> 20-22 GB/s in the same
  // shapes (2026-11-28, 2 interleaved rounds; read probe 35-38 GB/s). The bf16 dot path issues
  // them a row per key inside its loops (TilePrefetch); the others at the start of each phase.
  int64_t offsets[kKvTile];
  int64_t next_offsets[kKvTile];
  {
    const int64_t n = tile_offsets(kv_begin, offsets);
    TilePrefetch{k_base, offsets, n, k_row_bytes}.all();
    TilePrefetch{v_base, offsets, n, v_row_bytes}.all();
  }
  const typename Kk::T* k_cache_rows[kKvTile];
  const typename Kv::T* v_rows[kKvTile];
  const float cap = p.logit_softcap;
  for (int64_t t0 = kv_begin; t0 < kv_end; t0 += kKvTile) {
    const int64_t nt = std::min<int64_t>(kKvTile, kv_end - t0);
    const int64_t next_n = t0 + kKvTile < r.key_end ? tile_offsets(t0 + kKvTile, next_offsets) : 0;
    const TilePrefetch k_next{k_base, next_offsets, next_n, k_row_bytes};
    const TilePrefetch v_next{v_base, next_offsets, next_n, v_row_bytes};
    if constexpr (!Kk::kDot) k_next.all();
    // Rows that see at least one of these keys: position >= t0 (causal) and window start
    // < t0 + nt. Positions grow with the row index, so both bounds are row ranges.
    const int64_t row_begin = std::max<int64_t>(0, t0 - r.pos0) * hpi;
    const int64_t row_end =
        window > 0 ? std::min(num_rows, std::max<int64_t>(0, t0 + nt + window - 1 - r.pos0) * hpi)
                   : num_rows;
    for (int64_t t = 0; t < nt; ++t) {
      v_rows[t] = reinterpret_cast<const typename Kv::T*>(
          v_base + static_cast<size_t>(offsets[t]) * v_row_bytes);
      k_cache_rows[t] = reinterpret_cast<const typename Kk::T*>(
          k_base + static_cast<size_t>(offsets[t]) * k_row_bytes);
    }
    for (int64_t t = nt; t < kKvTile; ++t) k_cache_rows[t] = k_cache_rows[0];
    if constexpr (Kk::kDot) {
      if (hpi >= kLanes4MinHeads) {
        tile_scores_lanes4(tl, row_begin, row_end, num_rows, k_cache_rows, nt, d, k_next);
      } else {
        k_next.all();
        tile_scores_dot(tl, row_begin, row_end, k_cache_rows, nt, num_c2, last_mask32);
      }
    } else {
      tile_scores<Kk>(tl, row_begin, row_end, k_cache_rows, nt, num_chunks, last_mask);
    }

    // Online softmax update per row, keys outside [lo_i, pos_i] masked to -inf.
    constexpr int kVecs = kKvTile / 16;
    for (int64_t i = row_begin; i < row_end; ++i) {
      const int64_t valid_end = std::min<int64_t>(nt, row_pos(i) - t0 + 1);
      const int64_t valid_begin = std::max<int64_t>(0, row_lo(i) - t0);  // < valid_end here
      const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      __mmask16 valid[kVecs];
      __m512 sv[kVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        valid[v] = static_cast<__mmask16>(tail_mask(std::max<int64_t>(0, valid_end - 16 * v)) &
                                          ~tail_mask(std::max<int64_t>(0, valid_begin - 16 * v)));
        sv[v] = _mm512_mask_load_ps(neg_inf, valid[v], &tl.p[i][16 * v]);
      }
      if (cap > 0.0f) {
        const __m512 cap_v = _mm512_set1_ps(cap);
        const __m512 inv_cap = _mm512_set1_ps(1.0f / cap);
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) {
          sv[v] = _mm512_mask_mul_ps(neg_inf, valid[v], cap_v, tanh_ps(_mm512_mul_ps(sv[v], inv_cap)));
        }
      }
      __m512 vmax = sv[0];
#pragma GCC unroll 4
      for (int v = 1; v < kVecs; ++v) vmax = _mm512_max_ps(vmax, sv[v]);
      const float m_new = std::max(tl.part.m[i], _mm512_reduce_max_ps(vmax));
      const float alpha = std::exp(tl.part.m[i] - m_new);  // 0 on the first tile (m = -inf)
      const __m512 mv = _mm512_set1_ps(m_new);
      __m512 psum = _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        const __m512 pv = _mm512_maskz_mov_ps(valid[v], exp_ps(_mm512_sub_ps(sv[v], mv)));
        _mm512_store_ps(&tl.p[i][16 * v], pv);
        psum = _mm512_add_ps(psum, pv);
      }
      if constexpr (Kv::kDot) {
#pragma GCC unroll 2
        for (int v = 0; v < kVecs / 2; ++v) {
          const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_load_ps(&tl.p[i][32 * v + 16]),
                                                    _mm512_load_ps(&tl.p[i][32 * v]));
          _mm512_store_si512(&tl.pb[i][16 * v], reinterpret_cast<__m512i>(pair));
        }
      }
      tl.part.l[i] = tl.part.l[i] * alpha + _mm512_reduce_add_ps(psum);
      tl.part.m[i] = m_new;
      if (alpha != 1.0f) {
        const __m512 av = _mm512_set1_ps(alpha);
        for (int64_t c = 0; c < acc_chunks; ++c) {
          _mm512_store_ps(&tl.part.acc[i][c * 16], _mm512_mul_ps(_mm512_load_ps(&tl.part.acc[i][c * 16]), av));
        }
      }
    }

    if constexpr (!Kv::kDot) v_next.all();
    // acc += P · V, 4 rows per pass so every value vector load feeds 4 FMAs.
    for (int64_t i0 = row_begin; i0 < row_end; i0 += 4) {
      const int64_t n = std::min<int64_t>(4, row_end - i0);
      if constexpr (Kv::kDot) {
        const TilePrefetch& pf = i0 == row_begin ? v_next : TilePrefetch{};
        switch (n) {
          case 1: pv_dot_rows<1>(tl, i0, v_rows, nt, num_c2, last_mask32, pf); break;
          case 2: pv_dot_rows<2>(tl, i0, v_rows, nt, num_c2, last_mask32, pf); break;
          case 3: pv_dot_rows<3>(tl, i0, v_rows, nt, num_c2, last_mask32, pf); break;
          default: pv_dot_rows<4>(tl, i0, v_rows, nt, num_c2, last_mask32, pf); break;
        }
      } else {
        switch (n) {
          case 1: pv_rows<1, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
          case 2: pv_rows<2, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
          case 3: pv_rows<3, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
          default: pv_rows<4, Kv>(tl, i0, v_rows, nt, num_chunks, last_mask); break;
        }
      }
    }
    std::copy(next_offsets, next_offsets + kKvTile, offsets);
  }
  if constexpr (Kv::kDot) unpermute_acc(tl.part, num_rows, num_c2);
}

// Folds row i's partial of one partition (m_p, l_p, acc_p) into its running total. The only place
// partials meet, for the walk of a whole item and for the pass that combines split partitions
// alike: so both round the same. Explicit FMAs: GCC may contract a · b + c or not, per call site.
void merge_partial(float m_p, float l_p, const float* acc_p, RowStates& total, int64_t i,
                   int64_t num_chunks) {
  if (m_p == -std::numeric_limits<float>::infinity()) return;  // no key of the row there
  const float m = std::max(total.m[i], m_p);
  const float a = std::exp(total.m[i] - m);  // 0 for the row's first partition (m = -inf)
  const float b = std::exp(m_p - m);
  total.l[i] = std::fma(l_p, b, total.l[i] * a);
  total.m[i] = m;
  const __m512 av = _mm512_set1_ps(a);
  const __m512 bv = _mm512_set1_ps(b);
  for (int64_t c = 0; c < num_chunks; ++c) {
    float* dst = &total.acc[i][c * 16];
    _mm512_store_ps(dst, _mm512_fmadd_ps(_mm512_load_ps(acc_p + c * 16), bv,
                                         _mm512_mul_ps(_mm512_load_ps(dst), av)));
  }
}

// out rows of the item := total.acc / total.l.
void write_output(const Inputs& in, const ItemRows& r, const RowStates& total) {
  const int64_t d = in.p.head_dim;
  const int64_t num_chunks = (d + 15) / 16;
  const __mmask16 last_mask = tail_mask(d - (num_chunks - 1) * 16);
  for (int64_t i = 0; i < r.num_rows; ++i) {
    const __m512 inv_l = _mm512_set1_ps(1.0f / total.l[i]);
    float* dst = in.out + ((r.q_token0 + i / r.heads) * in.p.num_heads + r.head0 + i % r.heads) * d;
    for (int64_t c = 0; c < num_chunks; ++c) {
      _mm512_mask_storeu_ps(dst + c * 16, chunk_mask(c, num_chunks, last_mask),
                            _mm512_mul_ps(_mm512_load_ps(&total.acc[i][c * 16]), inv_l));
    }
  }
}

// A whole item on one thread: its partitions in order, each merged into the total as it ends.
template <class Kk, class Kv>
void run_item(const Inputs& in, const Plan& plan, int64_t item_idx, Tiles& tl) {
  const attention::Item item = plan.item(item_idx);
  const ItemRows r = plan.rows(item);
  const int64_t num_chunks = (in.p.head_dim + 15) / 16;
  load_queries(in, r, tl, Kv::kDot);
  reset(tl.total, r.num_rows, num_chunks);
  for (int64_t part = r.partition_begin; part < r.partition_end; ++part) {
    attend_partition<Kk, Kv>(in, r, item.kv_head, part, tl);
    for (int64_t i = 0; i < r.num_rows; ++i) {
      merge_partial(tl.part.m[i], tl.part.l[i], tl.part.acc[i], tl.total, i, num_chunks);
    }
  }
  write_output(in, r, tl.total);
}

// One partition of an item, its partial stored in the plan's slot.
template <class Kk, class Kv>
void run_unit(const Inputs& in, const Plan& plan, int64_t unit_idx, Tiles& tl) {
  const attention::Unit unit = plan.unit(unit_idx);
  const ItemRows r = plan.rows(unit.item);
  load_queries(in, r, tl, Kv::kDot);
  attend_partition<Kk, Kv>(in, r, unit.item.kv_head, r.partition_begin + unit.offset, tl);
  const Partial dst = plan.partial(unit.item_idx, unit.offset);
  const int64_t num_chunks = (in.p.head_dim + 15) / 16;
  for (int64_t i = 0; i < r.num_rows; ++i) {
    dst.m[i] = tl.part.m[i];
    dst.l[i] = tl.part.l[i];
    for (int64_t c = 0; c < num_chunks; ++c) {
      _mm512_store_ps(dst.acc + i * dst.acc_stride + c * 16, _mm512_load_ps(&tl.part.acc[i][c * 16]));
    }
  }
}

// The stored partials of a split item, merged in partition order as run_item does.
void combine_item(const Inputs& in, const Plan& plan, int64_t item_idx, Tiles& tl) {
  const ItemRows r = plan.rows(plan.item(item_idx));
  const int64_t num_chunks = (in.p.head_dim + 15) / 16;
  reset(tl.total, r.num_rows, num_chunks);
  for (int64_t offset = 0; offset < r.partition_end - r.partition_begin; ++offset) {
    const Partial src = plan.partial(item_idx, offset);
    for (int64_t i = 0; i < r.num_rows; ++i) {
      merge_partial(src.m[i], src.l[i], src.acc + i * src.acc_stride, tl.total, i, num_chunks);
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
  if (p.k_type == KvType::kBF16 && p.v_type == KvType::kBF16 &&
      cpu::selected_isa() >= cpu::Isa::kAvx512Bf16) {
    return run<KvBF16Dot, KvBF16Dot>(in, plan);
  }
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

}  // namespace vellum::kernels::avx512
