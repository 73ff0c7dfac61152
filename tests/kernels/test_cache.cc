// reshape_and_cache writes each token's K/V row to its slot (then read back), q8_0 rows as GGML
// block_q8_0 (read back by the weight dequantizer, an independent reading of the layout);
// copy_blocks and swap_blocks move whole blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/kv_quant.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

using testing::IsaScope;
using testing::random_floats;

float read_cache(const std::vector<uint8_t>& pool, int64_t index, KvType type) {
  switch (type) {
    case KvType::kF32: return reinterpret_cast<const float*>(pool.data())[index];
    case KvType::kF16: return fp16_to_float(reinterpret_cast<const uint16_t*>(pool.data())[index]);
    case KvType::kBF16: return bf16_to_float(reinterpret_cast<const uint16_t*>(pool.data())[index]);
    default: break;  // quantized: rows, not elements (WritesQ8_0RowsAsGgmlBlocks, ...)
  }
  return std::nanf("");
}

TEST(ReshapeAndCache, WritesSlotsAndSkipsPadding) {
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
      for (int64_t head_dim : {1, 16, 17, 64, 67, 128}) {
        const size_t row_bytes = kv_row_bytes(type, head_dim);
        const int64_t num_tokens = 9, num_kv_heads = 2, block_size = 4, num_blocks = 6;
        const int64_t stride = num_kv_heads * head_dim + 3;  // rows with a gap between tokens
        const uint32_t seed = static_cast<uint32_t>(head_dim * 10 + static_cast<int>(type));
        const auto k = random_floats(num_tokens * stride, seed, -4.0f, 4.0f);
        const auto v = random_floats(num_tokens * stride, seed + 1, -4.0f, 4.0f);
        // Distinct slots in shuffled order; token 4 is padding.
        std::vector<int64_t> slots(num_blocks * block_size);
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), std::mt19937(seed));
        slots.resize(num_tokens);
        slots[4] = -1;

        const size_t pool_bytes = num_blocks * num_kv_heads * block_size * row_bytes;
        const uint8_t kFill = 0x5a;
        std::vector<uint8_t> k_pool(pool_bytes, kFill), v_pool(pool_bytes, kFill);
        reshape_and_cache(k.data(), stride, v.data(), stride, k_pool.data(), v_pool.data(),
                          slots.data(), num_tokens, num_kv_heads, head_dim, block_size, type, type);

        std::vector<bool> written(pool_bytes / row_bytes, false);  // per row
        for (int64_t t = 0; t < num_tokens; ++t) {
          if (slots[t] < 0) continue;
          const int64_t block = slots[t] / block_size, offset = slots[t] % block_size;
          for (int64_t h = 0; h < num_kv_heads; ++h) {
            const int64_t row = (block * num_kv_heads + h) * block_size + offset;
            written[static_cast<size_t>(row)] = true;
            for (int64_t d = 0; d < head_dim; ++d) {
              const int64_t index = row * head_dim + d;
              const float ek = testing::round_kv(k[t * stride + h * head_dim + d], type);
              const float ev = testing::round_kv(v[t * stride + h * head_dim + d], type);
              ASSERT_EQ(read_cache(k_pool, index, type), ek)
                  << "isa=" << cpu::isa_name(isa) << " type=" << testing::kv_type_name(type)
                  << " head_dim=" << head_dim << " token=" << t << " head=" << h << " d=" << d;
              ASSERT_EQ(read_cache(v_pool, index, type), ev)
                  << "isa=" << cpu::isa_name(isa) << " type=" << testing::kv_type_name(type)
                  << " head_dim=" << head_dim << " token=" << t << " head=" << h << " d=" << d;
            }
          }
        }
        // Nothing else was touched (the padding token included).
        for (size_t i = 0; i < written.size(); ++i) {
          if (written[i]) continue;
          for (size_t b = 0; b < row_bytes; ++b) {
            ASSERT_EQ(k_pool[i * row_bytes + b], kFill) << "stray write in row " << i;
            ASSERT_EQ(v_pool[i * row_bytes + b], kFill) << "stray write in row " << i;
          }
        }
      }
    }
  }
}

// q8_0 rows: GGML's block_q8_0 (read back by the weight dequantizer), each value within half a
// step (d / 2, d = max |x| / 127 of its block, plus the f16 rounding of d) of the input, the
// largest magnitude of a block at +-127; K as q8_0 beside V as bf16, on every ISA the same bytes.
TEST(ReshapeAndCache, WritesQ8_0RowsAsGgmlBlocks) {
  const int64_t num_tokens = 7, num_kv_heads = 3, block_size = 4, num_blocks = 3;
  std::vector<uint8_t> first_k_pool;
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (int64_t head_dim : {32, 64, 256}) {
      const int64_t stride = num_kv_heads * head_dim + 5;
      const auto k = random_floats(num_tokens * stride, 77, -3.0f, 3.0f);
      const auto v = random_floats(num_tokens * stride, 78, -3.0f, 3.0f);
      std::vector<int64_t> slots(num_blocks * block_size);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), std::mt19937(79));
      slots.resize(num_tokens);
      const size_t k_row_bytes = kv_row_bytes(KvType::kQ8_0, head_dim);
      const size_t v_row_bytes = kv_row_bytes(KvType::kBF16, head_dim);
      ASSERT_EQ(k_row_bytes, static_cast<size_t>(head_dim / 32 * 34));
      const size_t num_rows = num_blocks * num_kv_heads * block_size;
      std::vector<uint8_t> k_pool(num_rows * k_row_bytes, 0), v_pool(num_rows * v_row_bytes, 0);
      reshape_and_cache(k.data(), stride, v.data(), stride, k_pool.data(), v_pool.data(),
                        slots.data(), num_tokens, num_kv_heads, head_dim, block_size,
                        KvType::kQ8_0, KvType::kBF16);
      std::vector<float> row_values(head_dim);
      for (int64_t t = 0; t < num_tokens; ++t) {
        for (int64_t h = 0; h < num_kv_heads; ++h) {
          const int64_t row = (slots[t] / block_size * num_kv_heads + h) * block_size +
                              slots[t] % block_size;
          const uint8_t* k_row = k_pool.data() + row * k_row_bytes;
          ref::dequantize_row(row_values.data(), k_row, WeightType::kQ8_0, head_dim);
          const float* x = k.data() + t * stride + h * head_dim;
          for (int64_t b = 0; b < head_dim / 32; ++b) {
            float amax = 0.0f;
            for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
            const float step = amax / 127.0f;
            int8_t qmax = 0;
            for (int i = 0; i < 32; ++i) {
              const int8_t q = static_cast<int8_t>(k_row[b * 34 + 2 + i]);
              if (std::abs(q) > std::abs(qmax)) qmax = q;
              ASSERT_NEAR(row_values[b * 32 + i], x[b * 32 + i], step * (0.5f + 127.0f / 2048.0f))
                  << "isa=" << cpu::isa_name(isa) << " head_dim=" << head_dim << " token=" << t
                  << " head=" << h << " d=" << b * 32 + i;
            }
            EXPECT_EQ(std::abs(qmax), 127) << "block " << b << " does not use the full range";
          }
          const auto* v_row = reinterpret_cast<const uint16_t*>(v_pool.data() + row * v_row_bytes);
          for (int64_t d = 0; d < head_dim; ++d) {
            ASSERT_EQ(bf16_to_float(v_row[d]), testing::round_kv(v[t * stride + h * head_dim + d],
                                                                 KvType::kBF16));
          }
        }
      }
      if (head_dim == 256) {
        if (first_k_pool.empty()) first_k_pool = k_pool;
        EXPECT_EQ(k_pool, first_k_pool) << "isa=" << cpu::isa_name(isa)
                                        << " wrote other q8_0 bytes than the first ISA";
      }
    }
  }
}

// q4_0 rows: GGML's block_q4_0 (read back by the weight dequantizer); each value within half a
// step d = (the value of largest magnitude) / -8, or one step at the clamped end of the range.
TEST(ReshapeAndCache, WritesQ4_0RowsAsGgmlBlocks) {
  const int64_t head_dim = 128;
  const auto x = random_floats(head_dim, 81, -3.0f, 3.0f);
  std::vector<uint8_t> row(kv_row_bytes(KvType::kQ4_0, head_dim));
  ASSERT_EQ(row.size(), static_cast<size_t>(head_dim / 32 * 18));
  const int64_t slot = 0;
  std::vector<uint8_t> v_row(kv_row_bytes(KvType::kBF16, head_dim));
  reshape_and_cache(x.data(), head_dim, x.data(), head_dim, row.data(), v_row.data(), &slot, 1, 1,
                    head_dim, 1, KvType::kQ4_0, KvType::kBF16);
  std::vector<float> values(head_dim);
  ref::dequantize_row(values.data(), row.data(), WeightType::kQ4_0, head_dim);
  for (int64_t b = 0; b < head_dim / 32; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float step = amax / 8.0f * (1.0f + 1.0f / 1024.0f);  // d, f16-rounded
    for (int i = 0; i < 32; ++i) {
      const float error = std::fabs(values[b * 32 + i] - x[b * 32 + i]);
      EXPECT_LE(error, step) << "d=" << b * 32 + i;
      if (std::fabs(x[b * 32 + i]) == amax) {
        EXPECT_LE(error, amax / 1024.0f) << "the block's max";
      }
    }
  }
}

// fp8 rows: an f32 scale s = max|x| / the format's largest finite value, then one byte per value;
// every representable value (times s) comes back exactly, and others within half a step. A row
// holding the largest finite value has s = 1, so its bytes are the formats' own encodings.
TEST(ReshapeAndCache, WritesFp8RowsWithAScalePerTokenAndHead) {
  for (const bool e4m3 : {true, false}) {
    const KvType type = e4m3 ? KvType::kFp8E4M3 : KvType::kFp8E5M2;
    const float largest = e4m3 ? 448.0f : 57344.0f;
    // Every non-negative finite encoding, as the float it stands for (E4M3 0x7f is NaN; E5M2
    // from 0x7c on are infinities and NaNs).
    std::vector<float> exact;
    for (int f = 0; f < (e4m3 ? 0x7f : 0x7c); ++f) {
      const int exponent = e4m3 ? f >> 3 : f >> 2;
      const int mantissa = e4m3 ? f & 7 : f & 3;
      const int bias = e4m3 ? 7 : 15;
      const float unit = e4m3 ? 8.0f : 4.0f;
      exact.push_back(exponent == 0 ? std::ldexp(mantissa / unit, 1 - bias)
                                    : std::ldexp(1.0f + mantissa / unit, exponent - bias));
    }
    ASSERT_EQ(exact.back(), largest);
    for (size_t i = 0; i < exact.size(); i += 2) exact[i] = -exact[i];  // both signs
    const auto n = static_cast<int64_t>(exact.size());
    std::vector<uint8_t> k_row(kv_row_bytes(type, n)), v_row(kv_row_bytes(type, n));
    ASSERT_EQ(k_row.size(), static_cast<size_t>(4 + n));
    const int64_t slot = 0;
    // V: the values times 3, each nudged off the grid by 1/40 of itself (less than half a step
    // everywhere, subnormals included), the largest kept: the scale is 3 and rounding to nearest
    // brings every value back to 3 times its grid value.
    std::vector<float> nudged(exact.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      const float nudge = i + 1 == exact.size() ? 1.0f : (i % 2 == 1 ? 1.025f : 0.975f);
      nudged[i] = 3.0f * exact[i] * nudge;
    }
    for (cpu::Isa isa : testing::isas_to_test()) {
      IsaScope scope(isa);
      reshape_and_cache(exact.data(), n, nudged.data(), n, k_row.data(), v_row.data(), &slot, 1, 1,
                        n, 1, type, type);
      std::vector<float> back(exact.size());
      dequantize_kv_row(back.data(), k_row.data(), n, type);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(back[i], exact[i]) << (e4m3 ? "e4m3" : "e5m2") << " value " << exact[i];
        ASSERT_EQ(k_row[4 + i] & 0x7f, i) << "the encoding of " << exact[i];
      }
      float scale;
      std::memcpy(&scale, v_row.data(), sizeof(float));
      EXPECT_EQ(scale, 3.0f);
      dequantize_kv_row(back.data(), v_row.data(), n, type);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(back[i], 3.0f * exact[i]) << (e4m3 ? "e4m3" : "e5m2") << " input " << nudged[i];
      }
    }
  }
}

TEST(Blocks, CopyAndSwapMoveWholeBlocks) {
  for (int64_t block_bytes : {int64_t{64}, int64_t{3}, int64_t{1} << 18}) {  // small and parallel
    const int64_t num_blocks = 12;
    std::vector<uint8_t> pool(num_blocks * block_bytes);
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<uint8_t>(i * 31 + i / block_bytes);
    const std::vector<uint8_t> original = pool;
    const std::vector<int32_t> src = {1, 5, 5, 0};
    const std::vector<int32_t> dst = {2, 7, 9, 11};
    copy_blocks(pool.data(), block_bytes, src.data(), dst.data(), src.size());
    for (int64_t b = 0; b < num_blocks; ++b) {
      int64_t from = b;
      for (size_t i = 0; i < dst.size(); ++i) {
        if (dst[i] == b) from = src[i];
      }
      ASSERT_TRUE(std::equal(pool.begin() + b * block_bytes, pool.begin() + (b + 1) * block_bytes,
                             original.begin() + from * block_bytes))
          << "copy_blocks: block " << b << " block_bytes=" << block_bytes;
    }

    std::vector<uint8_t> other(num_blocks * block_bytes, 0);
    swap_blocks(other.data(), original.data(), block_bytes, src.data(), dst.data(), src.size());
    for (int64_t b = 0; b < num_blocks; ++b) {
      int64_t from = -1;
      for (size_t i = 0; i < dst.size(); ++i) {
        if (dst[i] == b) from = src[i];
      }
      for (int64_t i = 0; i < block_bytes; ++i) {
        const uint8_t expected = from < 0 ? 0 : original[from * block_bytes + i];
        ASSERT_EQ(other[b * block_bytes + i], expected)
            << "swap_blocks: block " << b << " byte " << i << " block_bytes=" << block_bytes;
      }
    }
  }
}

}  // namespace
}  // namespace vellum::kernels
