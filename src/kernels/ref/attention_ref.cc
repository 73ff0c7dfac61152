#include <algorithm>
#include <cmath>
#include <limits>

#include <vector>

#include "kernels/kv_quant.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/threads.h"

namespace vellum::kernels::ref {
namespace {

// One thread's dequantized K and V rows (head_dim each): the oracle reads any cache type the
// same way, through kv_quant's scalar dequantizer.
struct RowBuffers {
  std::vector<float> k;
  std::vector<float> v;
};

}  // namespace

void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& p,
                     void* /*workspace*/) {
  const int64_t num_tokens = query_start_loc[p.num_seqs];
  const int64_t group = p.num_heads / p.num_kv_heads;  // query heads per kv head
  const size_t k_row_bytes = kv_row_bytes(p.k_type, p.head_dim);
  const size_t v_row_bytes = kv_row_bytes(p.v_type, p.head_dim);
  // Row index of (block_id, kv_h, t % block_size) in the (num_blocks, num_kv_heads, block_size)
  // rows of a pool, for key position t of a sequence's block table.
  auto row_index = [&](const int32_t* table, int64_t kv_h, int64_t t) {
    const int64_t block_id = table[t / p.block_size];
    return static_cast<size_t>((block_id * p.num_kv_heads + kv_h) * p.block_size +
                               t % p.block_size);
  };

  // Two passes over the keys (max, then exp-sum and weighted values) so that no score buffer is
  // needed: the reference trades 2x the dot products for needing no workspace.
  threads::parallel_for_dynamic<RowBuffers>(num_tokens * p.num_heads, [&](int64_t idx,
                                                                          RowBuffers& rows) {
    rows.k.resize(static_cast<size_t>(p.head_dim));
    rows.v.resize(static_cast<size_t>(p.head_dim));
    const int64_t tok = idx / p.num_heads;
    const int64_t h = idx % p.num_heads;
    int64_t s = 0;
    while (query_start_loc[s + 1] <= tok) ++s;
    const int64_t q_len = query_start_loc[s + 1] - query_start_loc[s];
    const int64_t pos = seq_lens[s] - q_len + (tok - query_start_loc[s]);
    const int32_t* table = block_tables + s * p.max_blocks_per_seq;
    const int64_t kv_h = h / group;
    const float* qh = q + tok * q_stride + h * p.head_dim;  // (head_dim)
    auto score = [&](int64_t t) {
      dequantize_kv_row(rows.k.data(),
                        static_cast<const uint8_t*>(k_cache) + row_index(table, kv_h, t) * k_row_bytes,
                        p.head_dim, p.k_type);
      float dot = 0.0f;
      for (int64_t d = 0; d < p.head_dim; ++d) dot += qh[d] * rows.k[static_cast<size_t>(d)];
      const float scaled = dot * p.scale;
      return p.logit_softcap > 0.0f ? p.logit_softcap * std::tanh(scaled / p.logit_softcap)
                                    : scaled;
    };
    const int64_t first = p.sliding_window > 0 ? std::max<int64_t>(0, pos - p.sliding_window + 1)
                                               : 0;

    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t t = first; t <= pos; ++t) max_score = std::max(max_score, score(t));

    float* oh = out + (tok * p.num_heads + h) * p.head_dim;  // (head_dim)
    for (int64_t d = 0; d < p.head_dim; ++d) oh[d] = 0.0f;
    float sum = 0.0f;
    for (int64_t t = first; t <= pos; ++t) {
      const float weight = std::exp(score(t) - max_score);
      sum += weight;
      dequantize_kv_row(rows.v.data(),
                        static_cast<const uint8_t*>(v_cache) + row_index(table, kv_h, t) * v_row_bytes,
                        p.head_dim, p.v_type);
      for (int64_t d = 0; d < p.head_dim; ++d) oh[d] += weight * rows.v[static_cast<size_t>(d)];
    }
    for (int64_t d = 0; d < p.head_dim; ++d) oh[d] /= sum;
  });
}

}  // namespace vellum::kernels::ref
