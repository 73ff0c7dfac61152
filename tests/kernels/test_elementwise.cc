// rms_norm, silu_mul, add_inplace, get_rows, rope: every ISA against the scalar reference,
// sizes 1..67 (every vector tail) and misaligned starts.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

using testing::IsaScope;
using testing::nmse;
using testing::OffsetBuffer;
using testing::random_floats;

constexpr double kF32Tolerance = 1e-10;

TEST(Elementwise, RmsNormMatchesReference) {
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (int64_t dim = 1; dim <= 67; ++dim) {
      const int64_t n_rows = 3;
      const size_t offset = static_cast<size_t>(dim % 16);
      const uint32_t seed = static_cast<uint32_t>(dim);
      const auto x = random_floats(n_rows * dim, seed, -3.0f, 3.0f);
      const auto w = random_floats(dim, seed + 1000);
      std::vector<float> expected(x.size());
      ref::rms_norm(expected.data(), x.data(), w.data(), n_rows, dim, 1e-5f);
      OffsetBuffer out(x.size(), offset);
      rms_norm(out.data(), x.data(), w.data(), n_rows, dim, 1e-5f);
      EXPECT_LT(nmse(out.data(), expected.data(), x.size()), kF32Tolerance)
          << "isa=" << cpu::isa_name(isa) << " dim=" << dim << " seed=" << seed;
      // In place (out aliases x).
      OffsetBuffer inplace(x.size(), offset);
      std::copy(x.begin(), x.end(), inplace.data());
      rms_norm(inplace.data(), inplace.data(), w.data(), n_rows, dim, 1e-5f);
      EXPECT_LT(nmse(inplace.data(), expected.data(), x.size()), kF32Tolerance)
          << "in place, isa=" << cpu::isa_name(isa) << " dim=" << dim;
    }
  }
}

TEST(Elementwise, SiluMulAndAddMatchReference) {
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (int64_t n = 1; n <= 67; ++n) {
      const size_t offset = static_cast<size_t>((n * 7) % 16);
      const uint32_t seed = static_cast<uint32_t>(100 + n);
      // Wide range so that the exp approximation sees both tails.
      const auto gate = random_floats(n, seed, -30.0f, 30.0f);
      const auto up = random_floats(n, seed + 1);
      std::vector<float> expected(n);
      ref::silu_mul(expected.data(), gate.data(), up.data(), n);
      OffsetBuffer out(n, offset);
      silu_mul(out.data(), gate.data(), up.data(), n);
      const size_t worst = testing::worst_index(out.data(), expected.data(), n);
      EXPECT_LT(nmse(out.data(), expected.data(), n), 1e-9)
          << "silu_mul isa=" << cpu::isa_name(isa) << " n=" << n << " seed=" << seed
          << " worst index " << worst << ": " << out.data()[worst] << " vs " << expected[worst];

      OffsetBuffer sum(n, offset);
      std::copy(gate.begin(), gate.end(), sum.data());
      add_inplace(sum.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(sum.data()[i], gate[i] + up[i]) << "add isa=" << cpu::isa_name(isa) << " i=" << i;
      }
    }
  }
}

// Builds a (num_rows, dim) table of `type` from random floats; returns the bytes.
std::vector<uint8_t> make_table(WeightType type, int64_t num_rows, int64_t dim, uint32_t seed) {
  const auto values = random_floats(num_rows * dim, seed);
  std::vector<uint8_t> bytes(weight_row_bytes(type, dim) * num_rows);
  switch (type) {
    case WeightType::kF32:
      std::memcpy(bytes.data(), values.data(), bytes.size());
      break;
    case WeightType::kF16:
    case WeightType::kBF16: {
      auto* h = reinterpret_cast<uint16_t*>(bytes.data());
      for (size_t i = 0; i < values.size(); ++i) {
        h[i] = type == WeightType::kF16 ? float_to_fp16(values[i]) : float_to_bf16(values[i]);
      }
      break;
    }
    case WeightType::kQ8_0: {
      auto* blocks = reinterpret_cast<BlockQ8_0*>(bytes.data());
      std::mt19937 rng(seed);
      for (size_t b = 0; b < values.size() / kQ8_0BlockSize; ++b) {
        blocks[b].d = float_to_fp16(0.001f + 0.01f * static_cast<float>(rng() % 100));
        for (int i = 0; i < kQ8_0BlockSize; ++i) {
          blocks[b].qs[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        }
      }
      break;
    }
    default:
      ADD_FAILURE() << "make_table: no generator for " << testing::weight_type_name(type);
  }
  return bytes;
}

TEST(Elementwise, GetRowsMatchesReferenceExactly) {
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (WeightType type : {WeightType::kF32, WeightType::kF16, WeightType::kBF16, WeightType::kQ8_0}) {
      for (int64_t dim : {1, 5, 16, 17, 32, 33, 64, 67, 96}) {
        if (type == WeightType::kQ8_0 && dim % kQ8_0BlockSize != 0) continue;
        const int64_t num_rows = 11;
        const auto table = make_table(type, num_rows, dim, static_cast<uint32_t>(dim));
        const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
        std::vector<float> expected(ids.size() * dim);
        ref::get_rows(expected.data(), table.data(), type, dim, ids.data(), ids.size());
        OffsetBuffer out(expected.size(), 3);
        get_rows(out.data(), table.data(), type, dim, ids.data(), ids.size());
        for (size_t i = 0; i < expected.size(); ++i) {
          ASSERT_EQ(out.data()[i], expected[i])
              << "isa=" << cpu::isa_name(isa) << " type=" << testing::weight_type_name(type)
              << " dim=" << dim << " index=" << i;
        }
      }
    }
  }
}

TEST(Elementwise, RopeRotatesAdjacentPairs) {
  // Closed form for one token and head: pair i rotates by pos * inv_freq[i]; dims past rot_dim
  // are untouched.
  const int64_t num_heads = 3, head_dim = 8, rot_dim = 6, token_stride = num_heads * head_dim + 5;
  const auto x0 = random_floats(2 * token_stride, 7);
  std::vector<float> x = x0;
  const std::vector<int32_t> positions = {0, 13};
  const std::vector<float> inv_freq = {1.0f, 0.1f, 0.01f};
  rope_inplace(x.data(), token_stride, 2, num_heads, head_dim, rot_dim, positions.data(),
               inv_freq.data());
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        const int64_t at = t * token_stride + h * head_dim + 2 * i;
        float e0 = x0[at], e1 = x0[at + 1];
        if (2 * i < rot_dim) {
          const double angle = positions[t] * double{inv_freq[i]};
          e0 = static_cast<float>(x0[at] * std::cos(angle) - x0[at + 1] * std::sin(angle));
          e1 = static_cast<float>(x0[at] * std::sin(angle) + x0[at + 1] * std::cos(angle));
        }
        EXPECT_NEAR(x[at], e0, 1e-5) << "t=" << t << " h=" << h << " i=" << i;
        EXPECT_NEAR(x[at + 1], e1, 1e-5) << "t=" << t << " h=" << h << " i=" << i;
      }
    }
    // The gap between tokens (token_stride > num_heads * head_dim) is not touched.
    for (int64_t g = num_heads * head_dim; g < token_stride; ++g) {
      EXPECT_EQ(x[t * token_stride + g], x0[t * token_stride + g]);
    }
  }
}

}  // namespace
}  // namespace vellum::kernels
