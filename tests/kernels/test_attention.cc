// paged_attention (every ISA, and the reference itself) against a naive dense attention over
// unpaged K/V: shuffled block ids, mixed batches of decode tokens and a prefill chunk with prior
// context, GQA ratios, block sizes 1/16/32, f32/f16/bf16/q8_0 caches (K and V of one type or of
// two), head dims with and without
// vector tails; sliding windows (smaller and larger than a block, crossing block boundaries) with
// the block-table entries before each window pointing at a block of NaNs, and logit softcaps;
// contexts of thousands of keys (several 512-key partitions). Split-K: forcing or forbidding the
// split of partitions over threads, running a sequence alone or in a batch, and the thread count
// must not change a single bit; the workspace bound is checked with guard bytes.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/aligned_buffer.h"
#include "kernel_test_util.h"
#include "kernels/attention_plan.h"
#include "kernels/kernels.h"
#include "kernels/kv_quant.h"
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
  KvType kv_type;  // of the K pool, and of the V pool unless v_type says otherwise
  std::vector<SeqSpec> seqs;
  uint32_t seed;
  int64_t sliding_window = 0;
  float softcap = 0.0f;
  std::optional<KvType> v_type;

  KvType k() const { return kv_type; }
  KvType v() const { return v_type.value_or(kv_type); }

  std::string describe() const {
    std::string s = "kv_heads=" + std::to_string(num_kv_heads) + " group=" + std::to_string(group) +
                    " head_dim=" + std::to_string(head_dim) + " block_size=" +
                    std::to_string(block_size) + " k=" + testing::kv_type_name(k()) +
                    " v=" + testing::kv_type_name(v()) +
                    " seed=" + std::to_string(seed) + " seqs=";
    for (const SeqSpec& q : seqs) s += "(" + std::to_string(q.context_len) + "+" + std::to_string(q.q_len) + ")";
    return s + " window=" + std::to_string(sliding_window) + " softcap=" + std::to_string(softcap);
  }
};

// A batch laid out as paged_attention reads it, and its dense reference.
struct Batch {
  Case c;
  int64_t num_seqs = 0;
  int64_t num_heads = 0;
  int64_t num_tokens = 0;
  int64_t max_blocks = 0;
  std::vector<int32_t> seq_lens, query_start_loc, block_tables;
  std::vector<std::vector<float>> dense_k, dense_v;  // per sequence (seq_len, num_kv_heads, d)
  AlignedBuffer k_pool, v_pool;
  int64_t q_stride = 0;
  std::vector<float> q;  // (num_tokens, q_stride)
  PagedAttentionParams params;

  size_t out_size() const { return static_cast<size_t>(num_tokens * num_heads * c.head_dim); }

  // paged_attention (the selected ISA) on the whole batch.
  std::vector<float> run(AttentionSplit split) const {
    std::vector<float> out(out_size(), std::nanf(""));
    run_seqs(0, num_seqs, split, out.data());
    return out;
  }

  // paged_attention on sequences [first, first + count) alone, as a batch of their own; their
  // rows land where they do in run()'s output.
  void run_seqs(int64_t first, int64_t count, AttentionSplit split, float* out) const {
    PagedAttentionParams p = params;
    p.num_seqs = count;
    p.split = split;
    std::vector<int32_t> qsl(count + 1);
    for (int64_t s = 0; s <= count; ++s) qsl[s] = query_start_loc[first + s] - query_start_loc[first];
    const int64_t tok0 = query_start_loc[first];
    const int32_t max_seq_len = *std::max_element(seq_lens.begin() + first, seq_lens.begin() + first + count);
    // The workspace as documented, followed by guard bytes that must stay untouched.
    constexpr size_t kGuardBytes = 256;
    const size_t bytes = paged_attention_workspace_bytes(p, max_seq_len, omp_get_max_threads());
    AlignedBuffer workspace(bytes + kGuardBytes);
    std::memset(workspace.as<uint8_t>() + bytes, 0xa5, kGuardBytes);
    paged_attention(out + tok0 * num_heads * c.head_dim, q.data() + tok0 * q_stride, q_stride,
                    k_pool.data(), v_pool.data(), block_tables.data() + first * max_blocks,
                    seq_lens.data() + first, qsl.data(), p, workspace.data());
    const uint8_t* guard = workspace.as<uint8_t>() + bytes;
    EXPECT_TRUE(std::all_of(guard, guard + kGuardBytes, [](uint8_t x) { return x == 0xa5; }))
        << "paged_attention wrote past paged_attention_workspace_bytes: " << c.describe();
  }
};

Batch make_batch(const Case& c) {
  Batch b;
  b.c = c;
  std::mt19937 rng(c.seed);
  const int64_t num_seqs = b.num_seqs = static_cast<int64_t>(c.seqs.size());
  const int64_t num_heads = b.num_heads = c.num_kv_heads * c.group;
  const int64_t d = c.head_dim;
  b.seq_lens.assign(num_seqs, 0);
  b.query_start_loc.assign(num_seqs + 1, 0);
  // Block 0 = null block, never referenced; block 1 = poison (all NaN), put in the table where
  // a sliding window says a block must not be read.
  int64_t max_blocks = 1, total_blocks = 2;
  const int32_t kPoisonBlock = 1;
  for (int64_t s = 0; s < num_seqs; ++s) {
    b.seq_lens[s] = static_cast<int32_t>(c.seqs[s].context_len + c.seqs[s].q_len);
    b.query_start_loc[s + 1] = static_cast<int32_t>(b.query_start_loc[s] + c.seqs[s].q_len);
    const int64_t blocks = (b.seq_lens[s] + c.block_size - 1) / c.block_size;
    max_blocks = std::max(max_blocks, blocks + 1);  // + 1: some padding with the null block
    total_blocks += blocks;
  }
  b.max_blocks = max_blocks;
  b.num_tokens = b.query_start_loc[num_seqs];

  // Shuffled physical blocks handed out to the sequences; tables padded with the null block.
  std::vector<int32_t> free_ids(total_blocks - 2);
  std::iota(free_ids.begin(), free_ids.end(), 2);
  std::shuffle(free_ids.begin(), free_ids.end(), rng);
  b.block_tables.assign(num_seqs * max_blocks, 0);
  size_t next = 0;
  for (int64_t s = 0; s < num_seqs; ++s) {
    for (int64_t k = 0; k < (b.seq_lens[s] + c.block_size - 1) / c.block_size; ++k) {
      b.block_tables[s * max_blocks + k] = free_ids[next++];
    }
  }

  // Dense K/V per sequence: (seq_len, num_kv_heads, head_dim), written into the pools position
  // by position through slot mappings, then replaced by what the cache holds (rounded, or
  // quantized and dequantized row by row).
  const size_t pool_rows = total_blocks * c.num_kv_heads * c.block_size;
  const size_t k_row_bytes = kv_row_bytes(c.k(), d);
  const size_t v_row_bytes = kv_row_bytes(c.v(), d);
  b.k_pool = AlignedBuffer(pool_rows * k_row_bytes);
  b.v_pool = AlignedBuffer(pool_rows * v_row_bytes);
  b.dense_k.resize(num_seqs);
  b.dense_v.resize(num_seqs);
  for (int64_t s = 0; s < num_seqs; ++s) {
    b.dense_k[s] = random_floats(b.seq_lens[s] * c.num_kv_heads * d, c.seed * 31 + s, -2.0f, 2.0f);
    b.dense_v[s] = random_floats(b.seq_lens[s] * c.num_kv_heads * d, c.seed * 37 + s);
    std::vector<int64_t> slots(b.seq_lens[s]);
    for (int64_t t = 0; t < b.seq_lens[s]; ++t) {
      slots[t] = int64_t{b.block_tables[s * max_blocks + t / c.block_size]} * c.block_size + t % c.block_size;
    }
    ref::reshape_and_cache(b.dense_k[s].data(), c.num_kv_heads * d, b.dense_v[s].data(),
                           c.num_kv_heads * d, b.k_pool.data(), b.v_pool.data(), slots.data(),
                           b.seq_lens[s], c.num_kv_heads, d, c.block_size, c.k(), c.v());
    for (int64_t t = 0; t < b.seq_lens[s]; ++t) {
      for (int64_t h = 0; h < c.num_kv_heads; ++h) {
        const auto row = static_cast<size_t>(slots[t] / c.block_size * c.num_kv_heads * c.block_size +
                                             h * c.block_size + slots[t] % c.block_size);
        float* dense_row = (t * c.num_kv_heads + h) * d + b.dense_k[s].data();
        dequantize_kv_row(dense_row, b.k_pool.as<uint8_t>() + row * k_row_bytes, d, c.k());
        dense_row = (t * c.num_kv_heads + h) * d + b.dense_v[s].data();
        dequantize_kv_row(dense_row, b.v_pool.as<uint8_t>() + row * v_row_bytes, d, c.v());
      }
    }
  }
  // NaN in f32, f16 and bf16 alike, and in a q8_0 block's f16 scale.
  const size_t rows_per_block = c.num_kv_heads * c.block_size;
  std::memset(b.k_pool.as<uint8_t>() + kPoisonBlock * rows_per_block * k_row_bytes, 0xff,
              rows_per_block * k_row_bytes);
  std::memset(b.v_pool.as<uint8_t>() + kPoisonBlock * rows_per_block * v_row_bytes, 0xff,
              rows_per_block * v_row_bytes);
  if (c.sliding_window > 0) {
    // A sliding-window KV manager may free every block whose keys are all before the window of
    // the sequence's first query token of the step.
    for (int64_t s = 0; s < num_seqs; ++s) {
      const int64_t lo = std::max<int64_t>(0, c.seqs[s].context_len - c.sliding_window + 1);
      for (int64_t k = 0; (k + 1) * c.block_size <= lo; ++k) b.block_tables[s * max_blocks + k] = kPoisonBlock;
    }
  }

  // Queries with a token stride wider than num_heads * head_dim (as from a fused QKV output).
  b.q_stride = num_heads * d + 7;
  b.q = random_floats(b.num_tokens * b.q_stride, c.seed + 5, -2.0f, 2.0f);

  PagedAttentionParams& params = b.params;
  params.num_seqs = num_seqs;
  params.num_heads = num_heads;
  params.num_kv_heads = c.num_kv_heads;
  params.head_dim = d;
  params.block_size = c.block_size;
  params.max_blocks_per_seq = max_blocks;
  params.scale = 1.0f / std::sqrt(static_cast<float>(d));
  params.k_type = c.k();
  params.v_type = c.v();
  params.sliding_window = c.sliding_window;
  params.logit_softcap = c.softcap;
  return b;
}

// Naive dense attention in double over the unpaged K/V. With bf16_queries, the scaled queries are
// rounded to bf16 first, as the AVX512-BF16 kernel does on a bf16 cache.
std::vector<float> dense_attention(const Batch& b, bool bf16_queries = false) {
  const Case& c = b.c;
  const int64_t d = c.head_dim;
  std::vector<float> expected(b.out_size());
  for (int64_t s = 0; s < b.num_seqs; ++s) {
    for (int64_t j = 0; j < c.seqs[s].q_len; ++j) {
      const int64_t tok = b.query_start_loc[s] + j;
      const int64_t pos = c.seqs[s].context_len + j;
      const int64_t first = c.sliding_window > 0 ? std::max<int64_t>(0, pos - c.sliding_window + 1) : 0;
      for (int64_t h = 0; h < b.num_heads; ++h) {
        const int64_t kv_h = h / c.group;
        std::vector<double> scores(pos + 1, 0.0);
        double max_score = -1e300;
        for (int64_t t = first; t <= pos; ++t) {
          double dot = 0.0;
          for (int64_t i = 0; i < d; ++i) {
            const float q = b.q[tok * b.q_stride + h * d + i];
            const double q_scaled = bf16_queries ? testing::round_kv(q * b.params.scale, KvType::kBF16)
                                                 : double{q} * b.params.scale;
            dot += q_scaled * b.dense_k[s][(t * c.num_kv_heads + kv_h) * d + i];
          }
          scores[t] = dot;
          if (c.softcap > 0.0f) scores[t] = c.softcap * std::tanh(scores[t] / c.softcap);
          max_score = std::max(max_score, scores[t]);
        }
        double sum = 0.0;
        for (int64_t t = first; t <= pos; ++t) sum += (scores[t] = std::exp(scores[t] - max_score));
        for (int64_t i = 0; i < d; ++i) {
          double o = 0.0;
          for (int64_t t = first; t <= pos; ++t) o += scores[t] * b.dense_v[s][(t * c.num_kv_heads + kv_h) * d + i];
          expected[(tok * b.num_heads + h) * d + i] = static_cast<float>(o / sum);
        }
      }
    }
  }
  return expected;
}

// Index of the first element whose bits differ (n if none).
size_t first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  }
  return a.size();
}

// Every ISA (and the reference) against the dense attention; on each ISA, forbidding and forcing
// the split of partitions over threads must give the automatic choice's bits.
void run_case(const Case& c) {
  const Batch b = make_batch(c);
  const std::vector<float> f32_expected = dense_attention(b);
  // On a bf16 cache with AVX512-BF16 the kernel rounds the scaled queries to bf16 (modelled in
  // bf16_expected) and the probabilities to bf16 before P·V (not modelled: each weight is off by
  // up to 2^-9 relative, independently: nmse ~ (2^-9)^2 / 3 with few keys, less with many;
  // measured 6e-7 to 1.6e-6 over these cases, bound 5e-6). Any error in the kernel's indexing or
  // lane order shows as an nmse near 1.
  const bool bf16_dot_path =
      c.k() == KvType::kBF16 && c.v() == KvType::kBF16 && c.head_dim <= 256;
  const std::vector<float> bf16_expected =
      bf16_dot_path ? dense_attention(b, true) : std::vector<float>();
  const int64_t num_heads = b.num_heads, d = c.head_dim;
  auto check = [&](const std::vector<float>& actual, const std::string& who, bool bf16_dot = false) {
    const std::vector<float>& expected = bf16_dot ? bf16_expected : f32_expected;
    const double err = testing::nmse(actual.data(), expected.data(), expected.size());
    const size_t worst = testing::worst_index(actual.data(), expected.data(), expected.size());
    EXPECT_LT(err, bf16_dot ? 5e-6 : 1e-8) << who << " " << c.describe() << " worst at token "
                         << worst / (num_heads * d) << " head " << (worst / d) % num_heads
                         << " dim " << worst % d << ": " << actual[worst] << " vs " << expected[worst];
  };

  std::vector<float> out(f32_expected.size(), std::nanf(""));
  ref::paged_attention(out.data(), b.q.data(), b.q_stride, b.k_pool.data(), b.v_pool.data(),
                       b.block_tables.data(), b.seq_lens.data(), b.query_start_loc.data(),
                       b.params, nullptr);
  check(out, "reference");
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    const std::string who = std::string("isa=") + cpu::isa_name(isa);
    const std::vector<float> automatic = b.run(AttentionSplit::kAuto);
    check(automatic, who, bf16_dot_path && isa >= cpu::Isa::kAvx512Bf16);
    for (AttentionSplit split : {AttentionSplit::kNever, AttentionSplit::kAlways}) {
      const size_t at = first_bit_difference(b.run(split), automatic);
      EXPECT_EQ(at, automatic.size())
          << who << (split == AttentionSplit::kNever ? " unsplit" : " split")
          << " differs from auto at token "
          << at / (num_heads * d) << " head " << (at / d) % num_heads << " dim " << at % d << ": "
          << c.describe();
    }
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
  // bf16 caches with 3+ query heads per kv head (AVX512-BF16 scores them with four lanes per
  // row): head dims of 8-dim chunks from 13 (a tail of 4) to 32, 3 heads (a padded lane).
  run_case({1, 4, 256, 16, KvType::kBF16, {{70, 1}, {10, 30}}, 109});
  run_case({2, 3, 200, 16, KvType::kBF16, {{33, 1}, {0, 21}}, 110});
  run_case({1, 4, 100, 5, KvType::kBF16, {{90, 2}, {3, 1}}, 111});
  run_case({1, 6, 36, 16, KvType::kBF16, {{130, 1}, {64, 64}}, 112});
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

TEST(PagedAttention, LongContextsMatchDenseAttention) {
  // One sequence with thousands of keys (several 512-key partitions, split over the threads),
  // one or two kv heads; windows that start inside a partition and end past the next boundary,
  // windows shorter than a partition across a boundary, prefill chunks at long context.
  run_case({1, 4, 64, 16, KvType::kBF16, {{4500, 1}}, 701});
  run_case({2, 2, 128, 32, KvType::kF16, {{3000, 1}}, 702});
  run_case({1, 8, 80, 7, KvType::kF32, {{5000, 1}}, 703, 1000});
  run_case({2, 4, 64, 16, KvType::kBF16, {{3500, 20}}, 704, 1500});
  run_case({1, 2, 64, 16, KvType::kF16, {{4000, 9}}, 705, 0, 30.0f});
  run_case({1, 4, 64, 16, KvType::kF32, {{4090, 12}}, 706, 100});
  run_case({2, 1, 32, 16, KvType::kBF16, {{4095, 1}, {4096, 1}, {511, 2}}, 707, 600});
  run_case({1, 1, 256, 16, KvType::kF16, {{3333, 1}}, 708, 0, 5.0f});
}

// The sequences of a batch with long and short contexts, decode tokens and prefill chunks.
Case mixed_long_case(uint32_t seed, int64_t window) {
  std::vector<SeqSpec> seqs = {{4200, 1}, {30, 1}, {700, 1}, {0, 5}, {3000, 1}, {1025, 17},
                               {511, 1},  {512, 1}, {90, 3}, {2047, 1}, {5, 1}, {1600, 1}};
  return {2, 4, 64, 16, KvType::kBF16, seqs, seed, window};
}

TEST(PagedAttention, SplitRowsAreBitwiseTheBatchedRows) {
  // Each sequence alone with its partitions spread over the threads (a batch of one has few
  // items) gives the bits of the same sequence in a batch of twelve walked whole item by item.
  for (int64_t window : {int64_t{0}, int64_t{700}}) {
    const Batch b = make_batch(mixed_long_case(801, window));
    for (cpu::Isa isa : testing::isas_to_test()) {
      IsaScope scope(isa);
      const std::vector<float> batched = b.run(AttentionSplit::kNever);
      std::vector<float> alone(batched.size(), std::nanf(""));
      for (int64_t s = 0; s < b.num_seqs; ++s) b.run_seqs(s, 1, AttentionSplit::kAlways, alone.data());
      const size_t at = first_bit_difference(alone, batched);
      EXPECT_EQ(at, batched.size()) << "isa=" << cpu::isa_name(isa) << " window=" << window
                                    << " differs at token " << at / (b.num_heads * b.c.head_dim);
    }
  }
}

TEST(PagedAttention, ThreadCountDoesNotChangeBits) {
  // One thread walks whole items; two and three split the long decode rows and schedule the
  // partitions differently.
  const Batch b = make_batch({1, 4, 64, 16, KvType::kBF16, {{4500, 1}, {2500, 1}}, 802});
  const int saved = omp_get_max_threads();
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    omp_set_num_threads(1);
    const std::vector<float> one = b.run(AttentionSplit::kAuto);
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      const std::vector<float> many = b.run(AttentionSplit::kAuto);
      EXPECT_EQ(first_bit_difference(many, one), one.size())
          << "isa=" << cpu::isa_name(isa) << " threads=" << threads;
    }
  }
  omp_set_num_threads(saved);
}

// Quantized caches: the kernels read the q8_0 / q4_0 / fp8 rows that reshape_and_cache wrote (no
// dequantized copy), so against the dense attention over the dequantized rows they are as exact
// as on f32. Head dims are multiples of the 32-value block (fp8 below also takes tails); K and V
// of one type and of two.
TEST(PagedAttention, QuantizedCachesMatchDenseAttention) {
  const std::vector<SeqSpec> mixed = {{37, 1}, {0, 1}, {20, 37}, {70, 1}, {0, 9}};
  const int64_t head_dims[] = {64, 32, 128, 96, 256};
  const std::pair<KvType, KvType> kv_pairs[] = {{KvType::kQ8_0, KvType::kQ8_0},
                                                {KvType::kQ8_0, KvType::kBF16},
                                                {KvType::kBF16, KvType::kQ8_0},
                                                {KvType::kQ8_0, KvType::kF16},
                                                {KvType::kF32, KvType::kQ8_0},
                                                {KvType::kQ4_0, KvType::kQ4_0},
                                                {KvType::kQ4_0, KvType::kQ8_0},
                                                {KvType::kFp8E4M3, KvType::kFp8E4M3},
                                                {KvType::kFp8E5M2, KvType::kFp8E5M2},
                                                {KvType::kFp8E4M3, KvType::kBF16}};
  // Each pair on four of the (GQA group, block size) shapes, the shapes taken in turn so that
  // every shape meets several types (all 144 would cost the suite minutes).
  const int64_t groups[] = {1, 3, 4, 8};
  const int64_t block_sizes[] = {1, 16, 32};
  uint32_t seed = 900;
  int variant = 0;
  for (const auto& [k_type, v_type] : kv_pairs) {
    for (int shape = 0; shape < 4; ++shape, ++variant) {
      const int64_t group = groups[variant % 4];
      Case c{2, group, head_dims[variant % 5], block_sizes[variant / 4 % 3], k_type, mixed, seed++};
      c.v_type = v_type;
      if (group == 8) c.num_kv_heads = 1;
      run_case(c);
    }
  }
}

// fp8 rows take any head dim: vector tails and head dims below one vector.
TEST(PagedAttention, Fp8CachesWithHeadDimTails) {
  const std::vector<SeqSpec> mixed = {{37, 1}, {0, 1}, {20, 37}, {70, 1}};
  uint32_t seed = 940;
  for (KvType type : {KvType::kFp8E4M3, KvType::kFp8E5M2}) {
    for (int64_t head_dim : {20, 80, 17, 8, 200}) {
      run_case({2, 3, head_dim, 16, type, mixed, seed++});
    }
  }
}

TEST(PagedAttention, QuantizedSlidingWindowsSoftcapsAndLongContexts) {
  const std::vector<SeqSpec> mixed = {{70, 1}, {37, 1}, {20, 37}, {0, 40}, {0, 1}, {5, 2}};
  uint32_t seed = 950;
  const KvType types[] = {KvType::kQ8_0, KvType::kQ4_0, KvType::kFp8E4M3};
  int variant = 0;
  for (int64_t window : {1, 16, 33, 100}) {
    for (int64_t block_size : {16, 7}) {
      run_case({2, 4, 64, block_size, types[variant++ % 3], mixed, seed++, window,
                window == 33 ? 5.0f : 0.0f});
    }
  }
  // Several 512-key partitions split over the threads, a window across a partition boundary, a
  // prefill chunk at long context, Gemma 3's head dim 256.
  run_case({1, 3, 64, 16, KvType::kQ8_0, {{4500, 1}}, 960});
  run_case({2, 4, 64, 16, KvType::kQ8_0, {{3500, 20}}, 961, 1500});
  run_case({1, 4, 256, 32, KvType::kQ8_0, {{3000, 1}, {600, 3}}, 962, 512});
  run_case({1, 4, 64, 128, KvType::kQ4_0, {{4200, 1}, {100, 30}}, 964});
  run_case({2, 2, 128, 16, KvType::kFp8E4M3, {{3100, 1}}, 965, 700});
  Case mixed_types{1, 4, 128, 16, KvType::kQ8_0, {{4100, 1}, {30, 9}}, 963};
  mixed_types.v_type = KvType::kBF16;
  run_case(mixed_types);
}

// Quantized rows of a batch are bitwise the same alone or batched, split or not, on any thread
// count (the batch-invariance guarantees hold for q8_0 too).
TEST(PagedAttention, QuantizedSplitRowsAreBitwiseTheBatchedRows) {
  Case c = mixed_long_case(970, 0);
  c.kv_type = KvType::kQ8_0;
  const Batch b = make_batch(c);
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    const std::vector<float> batched = b.run(AttentionSplit::kNever);
    std::vector<float> alone(batched.size(), std::nanf(""));
    for (int64_t s = 0; s < b.num_seqs; ++s) b.run_seqs(s, 1, AttentionSplit::kAlways, alone.data());
    const size_t at = first_bit_difference(alone, batched);
    EXPECT_EQ(at, batched.size()) << "isa=" << cpu::isa_name(isa) << " differs at token "
                                  << at / (b.num_heads * b.c.head_dim);
  }
}

TEST(PagedAttentionPlan, SplitsOnlyFewItemsWithLongContexts) {
  const Batch decode = make_batch({2, 4, 64, 16, KvType::kBF16, {{4200, 1}}, 803});
  auto plan_split = [&](const Batch& b, AttentionSplit split, int threads) {
    PagedAttentionParams p = b.params;
    p.split = split;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    AlignedBuffer workspace(paged_attention_workspace_bytes(p, 5000, threads));
    const attention::Plan plan(p, b.block_tables.data(), b.seq_lens.data(),
                               b.query_start_loc.data(), workspace.data());
    omp_set_num_threads(saved);
    return plan.split();
  };
  // One long decode sequence, two kv heads: 2 items, 9 partitions each.
  EXPECT_TRUE(plan_split(decode, AttentionSplit::kAuto, 2));
  EXPECT_TRUE(plan_split(decode, AttentionSplit::kAuto, 16));
  EXPECT_FALSE(plan_split(decode, AttentionSplit::kAuto, 1));  // nothing to share
  EXPECT_TRUE(plan_split(decode, AttentionSplit::kAlways, 1));
  EXPECT_FALSE(plan_split(decode, AttentionSplit::kNever, 16));
  // A short context has one partition per item: nothing to split.
  const Batch short_decode = make_batch({2, 4, 64, 16, KvType::kBF16, {{300, 1}}, 804});
  EXPECT_FALSE(plan_split(short_decode, AttentionSplit::kAuto, 16));
  // A prefill of 64 tokens has 32 items: enough for 2 threads, split for 16.
  const Batch prefill = make_batch({2, 4, 64, 16, KvType::kBF16, {{1000, 64}}, 805});
  EXPECT_FALSE(plan_split(prefill, AttentionSplit::kAuto, 2));
  EXPECT_FALSE(plan_split(prefill, AttentionSplit::kAlways, 2));
  EXPECT_TRUE(plan_split(prefill, AttentionSplit::kAuto, 16));
}

}  // namespace
}  // namespace vellum::kernels
