// paged_attention (every ISA, and the reference itself) against a naive dense attention over
// unpaged K/V: shuffled block ids, mixed batches of decode tokens and a prefill chunk with prior
// context, GQA ratios, block sizes 1/16/32, f32/f16/bf16 caches, head dims with and without
// vector tails; sliding windows (smaller and larger than a block, crossing block boundaries) with
// the block-table entries before each window pointing at a block of NaNs, and logit softcaps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/aligned_buffer.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

using testing::IsaScope;
using testing::random_floats;

struct SeqSpec {
  int64_t context_len;  // tokens already in the cache before this step
  int64_t q_len;        // new tokens this step
};

struct Case {
  int64_t num_kv_heads;
  int64_t group;  // query heads per kv head
  int64_t head_dim;
  int64_t block_size;
  KvType kv_type;
  std::vector<SeqSpec> seqs;
  uint32_t seed;
  int64_t sliding_window = 0;
  float softcap = 0.0f;

  std::string describe() const {
    std::string s = "kv_heads=" + std::to_string(num_kv_heads) + " group=" + std::to_string(group) +
                    " head_dim=" + std::to_string(head_dim) + " block_size=" +
                    std::to_string(block_size) + " kv=" + testing::kv_type_name(kv_type) +
                    " seed=" + std::to_string(seed) + " seqs=";
    for (const SeqSpec& q : seqs) s += "(" + std::to_string(q.context_len) + "+" + std::to_string(q.q_len) + ")";
    return s + " window=" + std::to_string(sliding_window) + " softcap=" + std::to_string(softcap);
  }
};

void run_case(const Case& c) {
  std::mt19937 rng(c.seed);
  const int64_t num_seqs = static_cast<int64_t>(c.seqs.size());
  const int64_t num_heads = c.num_kv_heads * c.group;
  const int64_t d = c.head_dim;
  std::vector<int32_t> seq_lens(num_seqs), query_start_loc(num_seqs + 1, 0);
  // Block 0 = null block, never referenced; block 1 = poison (all NaN), put in the table where
  // a sliding window says a block must not be read.
  int64_t max_blocks = 1, total_blocks = 2;
  const int32_t kPoisonBlock = 1;
  for (int64_t s = 0; s < num_seqs; ++s) {
    seq_lens[s] = static_cast<int32_t>(c.seqs[s].context_len + c.seqs[s].q_len);
    query_start_loc[s + 1] = static_cast<int32_t>(query_start_loc[s] + c.seqs[s].q_len);
    const int64_t blocks = (seq_lens[s] + c.block_size - 1) / c.block_size;
    max_blocks = std::max(max_blocks, blocks + 1);  // + 1: some padding with the null block
    total_blocks += blocks;
  }
  const int64_t num_tokens = query_start_loc[num_seqs];

  // Shuffled physical blocks handed out to the sequences; tables padded with the null block.
  std::vector<int32_t> free_ids(total_blocks - 2);
  std::iota(free_ids.begin(), free_ids.end(), 2);
  std::shuffle(free_ids.begin(), free_ids.end(), rng);
  std::vector<int32_t> block_tables(num_seqs * max_blocks, 0);
  size_t next = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    for (int64_t b = 0; b < (seq_lens[s] + c.block_size - 1) / c.block_size; ++b) {
      block_tables[s * max_blocks + b] = free_ids[next++];
    }
  }

  // Dense K/V per sequence: (seq_len, num_kv_heads, head_dim), rounded to the cache type, and
  // written into the pools position by position through slot mappings.
  const size_t pool_elems = total_blocks * c.num_kv_heads * c.block_size * d;
  AlignedBuffer k_pool(pool_elems * kv_type_size(c.kv_type));
  AlignedBuffer v_pool(pool_elems * kv_type_size(c.kv_type));
  std::vector<std::vector<float>> dense_k(num_seqs), dense_v(num_seqs);
  for (int64_t s = 0; s < num_seqs; ++s) {
    dense_k[s] = random_floats(seq_lens[s] * c.num_kv_heads * d, c.seed * 31 + s, -2.0f, 2.0f);
    dense_v[s] = random_floats(seq_lens[s] * c.num_kv_heads * d, c.seed * 37 + s);
    std::vector<int64_t> slots(seq_lens[s]);
    for (int64_t t = 0; t < seq_lens[s]; ++t) {
      slots[t] = int64_t{block_tables[s * max_blocks + t / c.block_size]} * c.block_size + t % c.block_size;
    }
    ref::reshape_and_cache(dense_k[s].data(), c.num_kv_heads * d, dense_v[s].data(),
                           c.num_kv_heads * d, k_pool.data(), v_pool.data(), slots.data(),
                           seq_lens[s], c.num_kv_heads, d, c.block_size, c.kv_type);
    for (float& x : dense_k[s]) x = testing::round_kv(x, c.kv_type);
    for (float& x : dense_v[s]) x = testing::round_kv(x, c.kv_type);
  }
  // NaN in f32, f16 and bf16 alike.
  const size_t block_bytes = c.num_kv_heads * c.block_size * d * kv_type_size(c.kv_type);
  std::memset(k_pool.as<uint8_t>() + kPoisonBlock * block_bytes, 0xff, block_bytes);
  std::memset(v_pool.as<uint8_t>() + kPoisonBlock * block_bytes, 0xff, block_bytes);
  if (c.sliding_window > 0) {
    // A sliding-window KV manager may free every block whose keys are all before the window of
    // the sequence's first query token of the step.
    for (int64_t s = 0; s < num_seqs; ++s) {
      const int64_t lo = std::max<int64_t>(0, c.seqs[s].context_len - c.sliding_window + 1);
      for (int64_t b = 0; (b + 1) * c.block_size <= lo; ++b) block_tables[s * max_blocks + b] = kPoisonBlock;
    }
  }

  // Queries with a token stride wider than num_heads * head_dim (as from a fused QKV output).
  const int64_t q_stride = num_heads * d + 7;
  const auto q = random_floats(num_tokens * q_stride, c.seed + 5, -2.0f, 2.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  // Naive dense attention in double.
  std::vector<float> expected(num_tokens * num_heads * d);
  for (int64_t s = 0; s < num_seqs; ++s) {
    for (int64_t j = 0; j < c.seqs[s].q_len; ++j) {
      const int64_t tok = query_start_loc[s] + j;
      const int64_t pos = c.seqs[s].context_len + j;
      const int64_t first = c.sliding_window > 0 ? std::max<int64_t>(0, pos - c.sliding_window + 1) : 0;
      for (int64_t h = 0; h < num_heads; ++h) {
        const int64_t kv_h = h / c.group;
        std::vector<double> scores(pos + 1, 0.0);
        double max_score = -1e300;
        for (int64_t t = first; t <= pos; ++t) {
          double dot = 0.0;
          for (int64_t i = 0; i < d; ++i) {
            dot += double{q[tok * q_stride + h * d + i]} * dense_k[s][(t * c.num_kv_heads + kv_h) * d + i];
          }
          scores[t] = dot * scale;
          if (c.softcap > 0.0f) scores[t] = c.softcap * std::tanh(scores[t] / c.softcap);
          max_score = std::max(max_score, scores[t]);
        }
        double sum = 0.0;
        for (int64_t t = first; t <= pos; ++t) sum += (scores[t] = std::exp(scores[t] - max_score));
        for (int64_t i = 0; i < d; ++i) {
          double o = 0.0;
          for (int64_t t = first; t <= pos; ++t) o += scores[t] * dense_v[s][(t * c.num_kv_heads + kv_h) * d + i];
          expected[(tok * num_heads + h) * d + i] = static_cast<float>(o / sum);
        }
      }
    }
  }

  PagedAttentionParams params;
  params.num_seqs = num_seqs;
  params.num_heads = num_heads;
  params.num_kv_heads = c.num_kv_heads;
  params.head_dim = d;
  params.block_size = c.block_size;
  params.max_blocks_per_seq = max_blocks;
  params.scale = scale;
  params.kv_type = c.kv_type;
  params.sliding_window = c.sliding_window;
  params.logit_softcap = c.softcap;
  const int64_t max_seq_len = *std::max_element(seq_lens.begin(), seq_lens.end());
  AlignedBuffer workspace(paged_attention_workspace_bytes(params, max_seq_len, 2));

  auto check = [&](const std::vector<float>& actual, const std::string& who) {
    const double err = testing::nmse(actual.data(), expected.data(), expected.size());
    const size_t worst = testing::worst_index(actual.data(), expected.data(), expected.size());
    EXPECT_LT(err, 1e-8) << who << " " << c.describe() << " worst at token "
                         << worst / (num_heads * d) << " head " << (worst / d) % num_heads
                         << " dim " << worst % d << ": " << actual[worst] << " vs " << expected[worst];
  };

  std::vector<float> out(expected.size(), std::nanf(""));
  ref::paged_attention(out.data(), q.data(), q_stride, k_pool.data(), v_pool.data(),
                       block_tables.data(), seq_lens.data(), query_start_loc.data(), params, nullptr);
  check(out, "reference");
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    std::fill(out.begin(), out.end(), std::nanf(""));
    paged_attention(out.data(), q.data(), q_stride, k_pool.data(), v_pool.data(),
                    block_tables.data(), seq_lens.data(), query_start_loc.data(), params,
                    workspace.data());
    check(out, std::string("isa=") + cpu::isa_name(isa));
  }
}

TEST(PagedAttention, MixedBatchesMatchDenseAttention) {
  // Several decode sequences (one of them the very first token), a prefill chunk with earlier
  // context, and a whole prompt.
  const std::vector<SeqSpec> mixed = {{37, 1}, {0, 1}, {20, 37}, {70, 1}, {0, 9}};
  const int64_t head_dims[] = {64, 32, 128, 80, 20};
  uint32_t seed = 1;
  int variant = 0;
  for (int64_t group : {1, 2, 4, 8}) {
    for (int64_t block_size : {1, 16, 32}) {
      for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
        Case c{2, group, head_dims[variant++ % 5], block_size, type, mixed, seed++};
        if (group == 8) c.num_kv_heads = 1;
        run_case(c);
      }
    }
  }
}

TEST(PagedAttention, OddShapes) {
  // Many query heads per kv head (more than one head group per work item), head dims with
  // tails and above one vector, block sizes that do not divide the lengths.
  run_case({1, 24, 48, 16, KvType::kBF16, {{5, 3}, {100, 1}}, 101});
  run_case({3, 1, 17, 7, KvType::kF32, {{0, 1}, {13, 20}}, 102});
  run_case({2, 3, 200, 5, KvType::kF16, {{3, 40}}, 103});
  run_case({1, 1, 256, 32, KvType::kF32, {{31, 2}, {32, 1}, {33, 33}}, 104});
  run_case({2, 2, 300, 16, KvType::kF32, {{10, 3}}, 105});  // above the AVX-512 tile limit
  run_case({2, 2, 64, 4, KvType::kBF16, {{0, 70}}, 106});   // long prefill, several tiles
  run_case({4, 2, 8, 16, KvType::kF32, {{0, 12}, {40, 1}}, 107});  // stories260K's heads
  run_case({1, 1, 1, 3, KvType::kF16, {{2, 5}}, 108});             // head_dim 1
}

TEST(PagedAttention, SlidingWindowAndSoftcapMatchDenseAttention) {
  // Decode tokens with long and short contexts, prefill chunks with context, a whole prompt
  // (several query tiles per sequence on the vector kernels), the very first token.
  const std::vector<SeqSpec> mixed = {{70, 1}, {37, 1}, {20, 37}, {0, 40}, {0, 1}, {5, 2}};
  const int64_t windows[] = {1, 3, 16, 20, 33, 100};  // < block, = block, crossing, > every seq
  const int64_t block_sizes[] = {16, 1, 7, 32};
  const int64_t groups[] = {1, 4, 2};
  const int64_t head_dims[] = {64, 20, 128};
  uint32_t seed = 500;
  int variant = 0;
  for (float softcap : {0.0f, 5.0f}) {
    for (int64_t window : windows) {
      for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
        Case c{2, groups[variant % 3], head_dims[variant % 3], block_sizes[variant % 4], type,
               mixed, seed++, window, softcap};
        ++variant;
        run_case(c);
      }
    }
  }
  // Softcap alone, GQA with several head groups per item, a cap small enough to flatten scores.
  run_case({2, 4, 64, 16, KvType::kBF16, mixed, 601, 0, 30.0f});
  run_case({1, 24, 48, 16, KvType::kF16, {{5, 3}, {100, 1}}, 602, 0, 1.0f});
  run_case({1, 24, 48, 16, KvType::kF32, {{5, 3}, {100, 1}, {40, 20}}, 603, 8, 2.0f});
  // A window with a long prefill: many query tiles, each starting at its own window.
  run_case({2, 2, 32, 4, KvType::kF32, {{50, 70}}, 604, 5, 0.0f});
  run_case({1, 1, 256, 16, KvType::kBF16, {{300, 1}, {200, 17}}, 605, 64, 0.0f});
}

}  // namespace
}  // namespace vellum::kernels
