// rms_norm, add_rms_norm, silu_mul, gelu_tanh_mul, add_inplace, get_rows, rope (normal and
// NEOX): every ISA against the scalar reference, sizes 1..67 (every vector tail), misaligned
// starts, and sizes large enough to take the threaded path.
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

// The fused residual add + norm equals add_inplace then rms_norm bit for bit on each ISA, with
// the output in its own buffer or over the delta; many rows take the threaded path.
TEST(Elementwise, AddRmsNormEqualsAddThenNorm) {
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (int64_t dim : {1, 15, 16, 17, 33, 67, 2048}) {
      for (int64_t n_rows : {1, 3, 64}) {
        const size_t n = static_cast<size_t>(n_rows * dim);
        const size_t offset = static_cast<size_t>(dim % 16);
        const uint32_t seed = static_cast<uint32_t>(dim * 7 + n_rows);
        const auto x = random_floats(n_rows * dim, seed, -3.0f, 3.0f);
        const auto delta = random_floats(n_rows * dim, seed + 1, -3.0f, 3.0f);
        const auto w = random_floats(dim, seed + 2);
        std::vector<float> x_expected = x;
        std::vector<float> expected(n);
        add_inplace(x_expected.data(), delta.data(), n_rows * dim);
        rms_norm(expected.data(), x_expected.data(), w.data(), n_rows, dim, 1e-5f);

        OffsetBuffer x_fused(n, offset);
        OffsetBuffer out(n, offset);
        std::copy(x.begin(), x.end(), x_fused.data());
        add_rms_norm(x_fused.data(), delta.data(), out.data(), w.data(), n_rows, dim, 1e-5f);
        OffsetBuffer x_aliased(n, offset);
        OffsetBuffer delta_out(n, offset);  // the output written over the delta
        std::copy(x.begin(), x.end(), x_aliased.data());
        std::copy(delta.begin(), delta.end(), delta_out.data());
        add_rms_norm(x_aliased.data(), delta_out.data(), delta_out.data(), w.data(), n_rows, dim,
                     1e-5f);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(x_fused.data()[i], x_expected[i]) << cpu::isa_name(isa) << " dim=" << dim;
          ASSERT_EQ(out.data()[i], expected[i]) << cpu::isa_name(isa) << " dim=" << dim;
          ASSERT_EQ(x_aliased.data()[i], x_expected[i]) << cpu::isa_name(isa) << " dim=" << dim;
          ASSERT_EQ(delta_out.data()[i], expected[i]) << cpu::isa_name(isa) << " dim=" << dim;
        }
      }
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

TEST(Elementwise, GeluTanhMulMatchesReference) {
  // Compared element by element with GELU-tanh in double, to 1e-6 of |gate * up| (the scale a
  // following matmul sees): for negative gates the f32 reference's 1 + tanh(u) cancels and is
  // itself only that accurate, while the vector kernels use the equivalent g * sigmoid(2u).
  auto exact = [](double g) {
    return 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
  };
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    for (int64_t n = 1; n <= 67; ++n) {
      const size_t offset = static_cast<size_t>((n * 5) % 16);
      const uint32_t seed = static_cast<uint32_t>(300 + n);
      // Wide range: both saturated tails (gelu(g) -> 0 and -> g) and the curved middle.
      const auto gate = random_floats(n, seed, -12.0f, 12.0f);
      const auto up = random_floats(n, seed + 1, -2.0f, 2.0f);
      std::vector<float> reference(n);
      ref::gelu_tanh_mul(reference.data(), gate.data(), up.data(), n);
      OffsetBuffer out(n, offset);
      gelu_tanh_mul(out.data(), gate.data(), up.data(), n);
      // In place on the gate (what a fused gate|up buffer does): the same values.
      OffsetBuffer inplace(n, offset);
      std::copy(gate.begin(), gate.end(), inplace.data());
      gelu_tanh_mul(inplace.data(), inplace.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double e = exact(gate[i]) * up[i];
        const double bound = 1e-6 * std::fabs(double{gate[i]} * up[i]) + 1e-30;
        EXPECT_LE(std::fabs(out.data()[i] - e), bound)
            << "isa=" << cpu::isa_name(isa) << " n=" << n << " seed=" << seed << " i=" << i
            << " gate=" << gate[i] << ": " << out.data()[i] << " vs " << e;
        EXPECT_LE(std::fabs(reference[i] - e), bound) << "reference, gate=" << gate[i];
        EXPECT_EQ(inplace.data()[i], out.data()[i]) << "in place, isa=" << cpu::isa_name(isa);
      }
    }
  }
  // Closed-form points: gelu_tanh(0) = 0, gelu_tanh(1) = 0.841191990607..., gelu_tanh(-3) =
  // -0.0036373920817...
  const std::vector<float> gate = {0.0f, 1.0f, -3.0f};
  const std::vector<float> up = {1.0f, 1.0f, 1.0f};
  std::vector<float> out(3);
  gelu_tanh_mul(out.data(), gate.data(), up.data(), 3);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.8411919906, 1e-6);
  EXPECT_NEAR(out[2], -0.0036373921, 1e-7);
}

TEST(Elementwise, LargeSizesTakeTheParallelPathAndMatch) {
  // Above the OpenMP thresholds (16K elements, 64K for the memory-bound ops).
  const int64_t n = 70001, dim = 1000, n_rows = n / dim;
  const auto a = random_floats(n, 41, -8.0f, 8.0f);
  const auto b = random_floats(n, 42);
  const auto w = random_floats(dim, 43);
  std::vector<float> expected(n), actual(n);
  for (cpu::Isa isa : testing::isas_to_test()) {
    IsaScope scope(isa);
    ref::silu_mul(expected.data(), a.data(), b.data(), n);
    silu_mul(actual.data(), a.data(), b.data(), n);
    EXPECT_LT(nmse(actual.data(), expected.data(), n), 1e-9) << "silu isa=" << cpu::isa_name(isa);
    ref::gelu_tanh_mul(expected.data(), a.data(), b.data(), n);
    gelu_tanh_mul(actual.data(), a.data(), b.data(), n);
    EXPECT_LT(nmse(actual.data(), expected.data(), n), 1e-10) << "gelu isa=" << cpu::isa_name(isa);
    ref::rms_norm(expected.data(), a.data(), w.data(), n_rows, dim, 1e-6f);
    rms_norm(actual.data(), a.data(), w.data(), n_rows, dim, 1e-6f);
    EXPECT_LT(nmse(actual.data(), expected.data(), n_rows * dim), 1e-10)
        << "rms_norm isa=" << cpu::isa_name(isa);
    actual = a;
    add_inplace(actual.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(actual[i], a[i] + b[i]) << "add isa=" << cpu::isa_name(isa) << " i=" << i;
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
      for (int64_t dim : {1, 5, 7, 8, 9, 16, 17, 32, 33, 64, 67, 96, 4096}) {
        if (type == WeightType::kQ8_0 && dim % kQ8_0BlockSize != 0) continue;
        const int64_t num_rows = 11;
        const auto table = make_table(type, num_rows, dim, static_cast<uint32_t>(dim));
        std::vector<int32_t> ids = {3, 0, 10, 3, 7};
        if (dim == 4096) {  // 4096 x 20 ids: above the parallel threshold
          for (int i = 0; i < 15; ++i) ids.push_back((i * 7) % 11);
        }
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

TEST(Elementwise, RopeNeoxRotatesHalves) {
  // Closed form: pair i is (x[i], x[i + rot_dim / 2]); dims past rot_dim are untouched.
  const int64_t num_heads = 2, head_dim = 10, rot_dim = 8, token_stride = num_heads * head_dim + 3;
  const auto x0 = random_floats(2 * token_stride, 9);
  std::vector<float> x = x0;
  const std::vector<int32_t> positions = {5, 1000};
  const std::vector<float> inv_freq = {1.0f, 0.3f, 0.01f, 0.001f};
  rope_neox_inplace(x.data(), token_stride, 2, num_heads, head_dim, rot_dim, positions.data(),
                    inv_freq.data());
  const int64_t half = rot_dim / 2;
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      const int64_t base = t * token_stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = positions[t] * double{inv_freq[i]};
        const double a = x0[base + i], b = x0[base + i + half];
        EXPECT_NEAR(x[base + i], a * std::cos(angle) - b * std::sin(angle), 1e-4) << "t=" << t << " i=" << i;
        EXPECT_NEAR(x[base + i + half], a * std::sin(angle) + b * std::cos(angle), 1e-4) << "t=" << t << " i=" << i;
      }
      for (int64_t i = rot_dim; i < head_dim; ++i) EXPECT_EQ(x[base + i], x0[base + i]);
    }
    for (int64_t g = num_heads * head_dim; g < token_stride; ++g) {
      EXPECT_EQ(x[t * token_stride + g], x0[t * token_stride + g]);
    }
  }
}

TEST(Elementwise, RopeBothModesMatchReference) {
  // rot_dim/2 = 1..67 pairs (every vector tail of both layouts), > 64 pairs (more than one
  // cos/sin chunk), partial rotation (rot_dim < head_dim), misaligned rows, a gap between tokens,
  // and a batch big enough for the parallel path.
  struct Shape {
    int64_t num_tokens, num_heads, head_dim, rot_dim;
  };
  std::vector<Shape> shapes;
  for (int64_t pairs = 1; pairs <= 67; ++pairs) {
    shapes.push_back({3, 2, 2 * pairs + (pairs % 3), 2 * pairs});
  }
  shapes.push_back({2, 3, 256, 256});
  shapes.push_back({2, 1, 300, 260});
  shapes.push_back({64, 8, 128, 128});  // 64 K elements: OpenMP
  for (bool neox : {false, true}) {
    for (const Shape& sh : shapes) {
      const int64_t token_stride = sh.num_heads * sh.head_dim + 5;
      const uint32_t seed = static_cast<uint32_t>(sh.rot_dim * 3 + sh.head_dim + (neox ? 1 : 0));
      const auto x0 = random_floats(sh.num_tokens * token_stride, seed, -3.0f, 3.0f);
      std::vector<float> inv_freq(sh.rot_dim / 2);
      for (size_t i = 0; i < inv_freq.size(); ++i) {
        inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(sh.rot_dim));
      }
      std::vector<int32_t> positions(sh.num_tokens);
      for (int64_t t = 0; t < sh.num_tokens; ++t) positions[t] = static_cast<int32_t>(t * 37 + 3);
      std::vector<float> expected = x0;
      (neox ? ref::rope_neox_inplace : ref::rope_inplace)(expected.data(), token_stride,
                                                            sh.num_tokens, sh.num_heads, sh.head_dim,
                                                            sh.rot_dim, positions.data(), inv_freq.data());
      for (cpu::Isa isa : testing::isas_to_test()) {
        IsaScope scope(isa);
        OffsetBuffer x(x0.size(), static_cast<size_t>(sh.rot_dim % 16));
        std::copy(x0.begin(), x0.end(), x.data());
        (neox ? rope_neox_inplace : rope_inplace)(x.data(), token_stride, sh.num_tokens,
                                                  sh.num_heads, sh.head_dim, sh.rot_dim,
                                                  positions.data(), inv_freq.data());
        const size_t worst = testing::worst_index(x.data(), expected.data(), x0.size());
        EXPECT_LT(nmse(x.data(), expected.data(), x0.size()), 1e-12)
            << (neox ? "neox" : "normal") << " isa=" << cpu::isa_name(isa) << " tokens="
            << sh.num_tokens << " heads=" << sh.num_heads << " head_dim=" << sh.head_dim
            << " rot_dim=" << sh.rot_dim << " seed=" << seed << " worst index " << worst << ": "
            << x.data()[worst] << " vs " << expected[worst];
        // Untouched: dims past rot_dim and the gap between tokens, bit for bit.
        for (int64_t t = 0; t < sh.num_tokens; ++t) {
          for (int64_t h = 0; h < sh.num_heads; ++h) {
            for (int64_t i = sh.rot_dim; i < sh.head_dim; ++i) {
              const int64_t at = t * token_stride + h * sh.head_dim + i;
              ASSERT_EQ(x.data()[at], x0[at]) << "isa=" << cpu::isa_name(isa) << " at=" << at;
            }
          }
          for (int64_t g = sh.num_heads * sh.head_dim; g < token_stride; ++g) {
            ASSERT_EQ(x.data()[t * token_stride + g], x0[t * token_stride + g]);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace vellum::kernels

namespace vellum::kernels {
namespace {

// hadamard_rotate is H x with H the normalised Sylvester-Hadamard matrix (entry (i, j) =
// (-1)^popcount(i & j) / sqrt(n)), so it keeps dot products, and applied twice gives x back.
TEST(HadamardRotate, IsTheOrthonormalWalshHadamardMatrix) {
  for (int64_t n : {1, 2, 8, 64, 256}) {
    const int64_t num_rows = 3, stride = n + 5;
    const auto x = testing::random_floats(num_rows * stride, static_cast<uint32_t>(n), -2.0f, 2.0f);
    std::vector<float> rotated = x;
    hadamard_rotate(rotated.data(), stride, num_rows, n);
    for (int64_t r = 0; r < num_rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        double expected = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const int sign = __builtin_popcountll(static_cast<uint64_t>(i & j)) % 2 == 0 ? 1 : -1;
          expected += sign * double{x[r * stride + j]};
        }
        expected /= std::sqrt(static_cast<double>(n));
        ASSERT_NEAR(rotated[r * stride + i], expected, 1e-5) << "n=" << n << " row " << r;
      }
      for (int64_t i = n; i < stride; ++i) ASSERT_EQ(rotated[r * stride + i], x[r * stride + i]);
    }
    double dot = 0.0, dot_rotated = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      dot += double{x[i]} * x[stride + i];
      dot_rotated += double{rotated[i]} * rotated[stride + i];
    }
    EXPECT_NEAR(dot_rotated, dot, 1e-4 * n) << "n=" << n;
    hadamard_rotate(rotated.data(), stride, num_rows, n);
    for (int64_t i = 0; i < num_rows * stride; ++i) ASSERT_NEAR(rotated[i], x[i], 1e-5);
  }
}

}  // namespace
}  // namespace vellum::kernels
