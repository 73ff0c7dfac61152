// PackedLinear for every weight type × precision × ISA against ref::matmul (double
// accumulation on the original weights), shapes that hit every tail: n_in 1..67 and beyond one
// vector, Q8_0 rows with one or several 64-byte steps plus a half step, m = 1..9 (decode tiles
// and their row tails) and 33/40 (the large-m path: oneDNN or m-blocked kernels), misaligned
// activations and outputs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/aligned_buffer.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/onednn_matmul.h"
#include "kernels/ref/ref_kernels.h"
#include "vellum/status.h"

namespace vellum::kernels {
namespace {

using testing::IsaScope;
using testing::OffsetBuffer;
using testing::random_floats;

// Random bytes for every code, sub-block scale and min of `num_elements / block` blocks of a
// GGML quantized type, with the f16 super-scales (d, dmin: NaN or huge as random bits) replaced by
// values in [0.001, 0.01): every bit pattern the unpacking must handle, finite results.
std::vector<uint8_t> random_blocks(WeightType type, int64_t num_elements, uint32_t seed) {
  const WeightTypeInfo& info = weight_type_info(type);
  const int64_t num_blocks = num_elements / info.block_elems;
  std::vector<uint8_t> bytes(static_cast<size_t>(num_blocks) * info.block_bytes);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<size_t> scale_offsets;  // byte offsets of the f16 scales inside a block
  switch (type) {
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kQ8_0:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS: scale_offsets = {0}; break;
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K: scale_offsets = {0, 2}; break;
    case WeightType::kQ2_K: scale_offsets = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}; break;
    case WeightType::kQ3_K: scale_offsets = {offsetof(BlockQ3_K, d)}; break;
    case WeightType::kQ6_K: scale_offsets = {offsetof(BlockQ6_K, d)}; break;
    default: ADD_FAILURE() << "random_blocks: not a quantized type"; break;
  }
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (size_t offset : scale_offsets) {
      const uint16_t h = float_to_fp16(scale(rng));
      std::memcpy(bytes.data() + static_cast<size_t>(b) * info.block_bytes + offset, &h, 2);
    }
  }
  return bytes;
}

std::vector<uint8_t> make_weights(WeightType type, int64_t n_out, int64_t n_in, uint32_t seed) {
  const auto values = random_floats(n_out * n_in, seed);
  std::vector<uint8_t> bytes(weight_row_bytes(type, n_in) * n_out);
  auto* h = reinterpret_cast<uint16_t*>(bytes.data());
  switch (type) {
    case WeightType::kF32:
      std::memcpy(bytes.data(), values.data(), bytes.size());
      break;
    case WeightType::kF16:
      for (size_t i = 0; i < values.size(); ++i) h[i] = float_to_fp16(values[i]);
      break;
    case WeightType::kBF16:
      for (size_t i = 0; i < values.size(); ++i) h[i] = float_to_bf16(values[i]);
      break;
    case WeightType::kQ8_0: {
      // GGML's quantization: d = amax / 127 per 32 values.
      auto* blocks = reinterpret_cast<BlockQ8_0*>(bytes.data());
      for (size_t b = 0; b < values.size() / kQ8_0BlockSize; ++b) {
        float amax = 0.0f;
        for (int i = 0; i < kQ8_0BlockSize; ++i) amax = std::max(amax, std::fabs(values[b * 32 + i]));
        const float dq = amax / 127.0f;
        blocks[b].d = float_to_fp16(dq);
        for (int i = 0; i < kQ8_0BlockSize; ++i) {
          blocks[b].qs[i] = static_cast<int8_t>(dq == 0.0f ? 0 : std::lround(values[b * 32 + i] / dq));
        }
      }
      break;
    }
    default:
      bytes = random_blocks(type, n_out * n_in, seed);
      break;
  }
  return bytes;
}

// Normalised error allowed for each (weight type, precision): f32 math on exact weights is only
// limited by summation order; bf16 rounds activations and/or weights to 8 mantissa bits; the
// Q8_0 kernels quantize activations to 8 bits per 32-block (llama.cpp's backend-ops bound).
// Weights converted to f16 at packing (--dtype float16) carry f16's rounding of 11 mantissa bits.
double tolerance(WeightType packed, WeightType stored) {
  if (packed == WeightType::kF16 && stored != WeightType::kF16) return 1e-6;
  switch (packed) {
    case WeightType::kF32:
    case WeightType::kF16: return 1e-9;
    case WeightType::kBF16: return 1e-4;
    case WeightType::kQ8_0: return 5e-4;
    default: return 5e-4;
  }
  return 0.0;
}

const char* precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::kAuto: return "auto";
    case MatmulPrecision::kBF16: return "bf16";
    case MatmulPrecision::kF16: return "f16";
    case MatmulPrecision::kF32: return "f32";
  }
  return "?";
}

struct Shape {
  int64_t m, n_out, n_in;
};

void check_shapes(WeightType type, const std::vector<Shape>& shapes) {
  uint32_t seed = 1000 * static_cast<uint32_t>(type);
  for (const Shape& s : shapes) {
    ++seed;
    const auto w = make_weights(type, s.n_out, s.n_in, seed);
    const auto x = random_floats(s.m * s.n_in, seed + 7, -2.0f, 2.0f);
    std::vector<float> expected(s.m * s.n_out);
    ref::matmul(expected.data(), x.data(), s.m, w.data(), type, s.n_out, s.n_in);
    for (MatmulPrecision precision : {MatmulPrecision::kAuto, MatmulPrecision::kBF16,
                                      MatmulPrecision::kF16, MatmulPrecision::kF32}) {
      for (cpu::Isa isa : testing::isas_to_test()) {
        IsaScope scope(isa);
        const PackedLinear linear = PackedLinear::pack(w.data(), type, s.n_out, s.n_in, precision);
        ASSERT_EQ(linear.n_out(), s.n_out);
        ASSERT_EQ(linear.n_in(), s.n_in);
        const size_t offset = static_cast<size_t>(seed % 16);
        OffsetBuffer x_in(x.size(), offset);
        std::copy(x.begin(), x.end(), x_in.data());
        OffsetBuffer y(expected.size(), (offset + 5) % 16);
        AlignedBuffer scratch(linear.scratch_bytes(s.m));
        linear.forward(y.data(), x_in.data(), s.m, scratch.data());
        const double err = testing::nmse(y.data(), expected.data(), expected.size());
        const size_t worst = testing::worst_index(y.data(), expected.data(), expected.size());
        EXPECT_LT(err, tolerance(linear.packed_type(), type))
            << "type=" << testing::weight_type_name(type) << " precision=" << precision_name(precision)
            << " packed=" << testing::weight_type_name(linear.packed_type()) << " isa="
            << cpu::isa_name(isa) << " m=" << s.m << " n_out=" << s.n_out << " n_in=" << s.n_in
            << " seed=" << seed << " worst (row " << worst / s.n_out << ", col " << worst % s.n_out
            << "): " << y.data()[worst] << " vs " << expected[worst];
      }
    }
  }
}

std::vector<Shape> float_shapes() {
  std::vector<Shape> shapes;
  for (int64_t n_in = 1; n_in <= 67; n_in += 3) shapes.push_back({1 + n_in % 9, 5 + n_in % 4, n_in});
  for (int64_t m = 1; m <= 9; ++m) shapes.push_back({m, 7, 96});
  // Single-row products (the AVX2 GEMV's 4-column tiles) with every kind of input tail: none,
  // under 8, exactly 8, 8 + under 8, and partial column tiles.
  for (int64_t n_in : {1, 7, 16, 23, 24, 45, 64}) shapes.push_back({1, 5 + n_in % 7, n_in});
  shapes.push_back({33, 13, 100});
  shapes.push_back({40, 64, 256});
  shapes.push_back({4, 130, 512});
  return shapes;
}

std::vector<Shape> q8_shapes() {
  std::vector<Shape> shapes;
  for (int64_t n_in : {32, 64, 96, 160, 512}) {
    for (int64_t n_out : {1, 3, 4, 5, 9}) shapes.push_back({1 + (n_in + n_out) % 9, n_out, n_in});
  }
  for (int64_t m = 1; m <= 9; ++m) shapes.push_back({m, 6, 128});
  shapes.push_back({33, 11, 96});
  shapes.push_back({40, 70, 256});
  // Q8_0 tiles of two 16-row panels: a partial second panel, and more rows than one row block.
  shapes.push_back({5, 20, 64});
  shapes.push_back({70, 50, 128});
  // Decode (m <= 2) tiles of up to four panels: full, three and a partial fourth.
  shapes.push_back({1, 64, 64});
  shapes.push_back({2, 40, 96});
  shapes.push_back({1, 50, 32});
  return shapes;
}

std::vector<Shape> k_shapes() {
  std::vector<Shape> shapes;
  for (int64_t n_in : {256, 512, 768}) {
    for (int64_t n_out : {1, 3, 4, 5, 9}) shapes.push_back({1 + (n_in / 256 + n_out) % 9, n_out, n_in});
  }
  for (int64_t m = 1; m <= 9; ++m) shapes.push_back({m, 6, 256});
  shapes.push_back({17, 5, 512});
  shapes.push_back({33, 11, 256});
  shapes.push_back({40, 70, 512});
  // Q4_K's two-panel tiles: a partial second panel, and more rows than one row block.
  shapes.push_back({7, 20, 256});
  shapes.push_back({130, 40, 256});
  return shapes;
}

TEST(PackedLinear, Q4_0MatchesReference) { check_shapes(WeightType::kQ4_0, q8_shapes()); }
TEST(PackedLinear, Q4_1MatchesReference) { check_shapes(WeightType::kQ4_1, q8_shapes()); }
TEST(PackedLinear, Q5_0MatchesReference) { check_shapes(WeightType::kQ5_0, q8_shapes()); }
TEST(PackedLinear, Q5_1MatchesReference) { check_shapes(WeightType::kQ5_1, q8_shapes()); }
TEST(PackedLinear, IQ4_NLMatchesReference) { check_shapes(WeightType::kIQ4_NL, q8_shapes()); }
TEST(PackedLinear, Q2_KMatchesReference) { check_shapes(WeightType::kQ2_K, k_shapes()); }
TEST(PackedLinear, Q3_KMatchesReference) { check_shapes(WeightType::kQ3_K, k_shapes()); }
TEST(PackedLinear, Q4_KMatchesReference) { check_shapes(WeightType::kQ4_K, k_shapes()); }
TEST(PackedLinear, Q5_KMatchesReference) { check_shapes(WeightType::kQ5_K, k_shapes()); }
TEST(PackedLinear, Q6_KMatchesReference) { check_shapes(WeightType::kQ6_K, k_shapes()); }
TEST(PackedLinear, IQ4_XSMatchesReference) { check_shapes(WeightType::kIQ4_XS, k_shapes()); }

TEST(PackedLinear, F32MatchesReference) { check_shapes(WeightType::kF32, float_shapes()); }
TEST(PackedLinear, F16MatchesReference) { check_shapes(WeightType::kF16, float_shapes()); }
TEST(PackedLinear, BF16MatchesReference) { check_shapes(WeightType::kBF16, float_shapes()); }
TEST(PackedLinear, Q8_0MatchesReference) { check_shapes(WeightType::kQ8_0, q8_shapes()); }

// A fused projection whose parts have different types (Q4_K q and k, Q6_K v, as in Q4_K_M
// files; then F16) equals the separate products side by side, on every ISA and precision.
TEST(PackedLinear, MixedTypePartsMatchSeparateProducts) {
  const int64_t n_in = 512;
  const struct {
    WeightType type;
    int64_t rows;
  } spec[] = {{WeightType::kQ4_K, 8}, {WeightType::kQ4_K, 4}, {WeightType::kQ6_K, 4},
              {WeightType::kF16, 3}};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<PackedLinear::Part> parts;
  int64_t n_out = 0;
  for (size_t i = 0; i < std::size(spec); ++i) {
    bytes.push_back(make_weights(spec[i].type, spec[i].rows, n_in, 50 + static_cast<uint32_t>(i)));
    n_out += spec[i].rows;
  }
  for (size_t i = 0; i < std::size(spec); ++i) parts.push_back({bytes[i].data(), spec[i].type, spec[i].rows});
  for (int64_t m : {1, 3, 20}) {
    const auto x = random_floats(m * n_in, 77 + static_cast<uint32_t>(m), -2.0f, 2.0f);
    std::vector<float> expected(static_cast<size_t>(m * n_out));
    int64_t column = 0;
    for (size_t i = 0; i < std::size(spec); ++i) {
      std::vector<float> part(static_cast<size_t>(m * spec[i].rows));
      ref::matmul(part.data(), x.data(), m, bytes[i].data(), spec[i].type, spec[i].rows, n_in);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t j = 0; j < spec[i].rows; ++j) {
          expected[static_cast<size_t>(r * n_out + column + j)] = part[static_cast<size_t>(r * spec[i].rows + j)];
        }
      }
      column += spec[i].rows;
    }
    for (MatmulPrecision precision : {MatmulPrecision::kAuto, MatmulPrecision::kF32}) {
      for (cpu::Isa isa : testing::isas_to_test()) {
        IsaScope scope(isa);
        const PackedLinear linear = PackedLinear::pack_parts(parts, n_in, precision);
        ASSERT_EQ(linear.n_out(), n_out);
        if (precision == MatmulPrecision::kAuto) {
          EXPECT_EQ(linear.packed_types(),
                    (std::vector<WeightType>{WeightType::kQ4_K, WeightType::kQ6_K, WeightType::kF16}));
        }
        std::vector<float> y(expected.size(), -1.0f);
        AlignedBuffer scratch(linear.scratch_bytes(m));
        linear.forward(y.data(), x.data(), m, scratch.data());
        EXPECT_LT(testing::nmse(y.data(), expected.data(), expected.size()), 5e-4)
            << "m=" << m << " isa=" << cpu::isa_name(isa) << " precision=" << precision_name(precision);
      }
    }
  }
}

// Batch-invariant mode: each row of a product is bitwise the row computed alone, whatever m is
// (the large-m oneDNN paths reduce in another order, so without the mode rows past the small-m
// limit differ in the last bits).
TEST(PackedLinear, BatchInvariantRowsEqualTheRowAlone) {
  struct BatchInvariantScope {
    BatchInvariantScope() { set_batch_invariant(true); }
    ~BatchInvariantScope() { set_batch_invariant(false); }
  } invariant;
  const int64_t n_out = 37;
  const int64_t n_in = 512;
  const WeightType types[] = {WeightType::kF32, WeightType::kF16, WeightType::kBF16,
                              WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ5_1,
                              WeightType::kIQ4_NL, WeightType::kQ2_K, WeightType::kQ3_K,
                              WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};
  for (WeightType type : types) {
    const auto w = make_weights(type, n_out, n_in, 77 + static_cast<uint32_t>(type));
    for (MatmulPrecision precision : {MatmulPrecision::kAuto, MatmulPrecision::kBF16}) {
      for (cpu::Isa isa : testing::isas_to_test()) {
        IsaScope scope(isa);
        const PackedLinear linear = PackedLinear::pack(w.data(), type, n_out, n_in, precision);
        for (int64_t m : {2, 5, 17, 40}) {
          const auto x = random_floats(m * n_in, 5 + static_cast<uint32_t>(m), -2.0f, 2.0f);
          std::vector<float> y(static_cast<size_t>(m * n_out));
          AlignedBuffer scratch(linear.scratch_bytes(m));
          linear.forward(y.data(), x.data(), m, scratch.data());
          int64_t differing = 0;
          for (int64_t r = 0; r < m; ++r) {
            std::vector<float> alone(static_cast<size_t>(n_out));
            AlignedBuffer one_scratch(linear.scratch_bytes(1));
            linear.forward(alone.data(), x.data() + r * n_in, 1, one_scratch.data());
            differing += std::memcmp(alone.data(), y.data() + r * n_out, alone.size() * 4) != 0;
          }
          EXPECT_EQ(differing, 0) << "type=" << testing::weight_type_name(type)
                                  << " precision=" << precision_name(precision)
                                  << " isa=" << cpu::isa_name(isa) << " m=" << m;
        }
      }
    }
  }
}

// Rows handed over by a producer (a norm or an activation fused with the product's input
// quantization) give bitwise the product of the matrix of those rows, on every type, ISA, precision
// and backend (m = 70 reaches oneDNN for bf16), mixed-type parts included; each row is produced
// exactly once (producers update the residual stream).
TEST(PackedLinear, ProducedRowsEqualTheMatrixOfThoseRows) {
  const int64_t n_in = 512;
  const int64_t n_out = 37;
  std::vector<WeightType> types;
  for (int t = 0; t < kNumWeightTypes; ++t) types.push_back(static_cast<WeightType>(t));
  for (WeightType type : types) {
    const auto w = make_weights(type, n_out, n_in, 300 + static_cast<uint32_t>(type));
    const auto w6 = make_weights(WeightType::kQ6_K, 5, n_in, 400);
    for (bool mixed : {false, true}) {
      if (mixed && type == WeightType::kQ6_K) continue;
      for (MatmulPrecision precision : {MatmulPrecision::kAuto, MatmulPrecision::kBF16}) {
        for (cpu::Isa isa : testing::isas_to_test()) {
          IsaScope scope(isa);
          const std::vector<PackedLinear::Part> parts = {{w.data(), type, n_out},
                                                         {w6.data(), WeightType::kQ6_K, 5}};
          const PackedLinear linear = mixed
                                          ? PackedLinear::pack_parts(parts, n_in, precision)
                                          : PackedLinear::pack(w.data(), type, n_out, n_in, precision);
          const int64_t cols = linear.n_out();
          for (int64_t m : {1, 3, 20, 70}) {
            const auto source = random_floats(m * n_in, 9 + static_cast<uint32_t>(m), -2.0f, 2.0f);
            // The rows the producer makes: an op of the source row, as a norm would be.
            std::vector<float> x(source.size());
            for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * source[i] - 0.25f;
            std::vector<float> expected(static_cast<size_t>(m * cols));
            AlignedBuffer scratch(linear.scratch_bytes(m));
            linear.forward(expected.data(), x.data(), m, scratch.data());

            std::vector<std::atomic<int>> calls(static_cast<size_t>(m));
            const InputRows::Producer produce = [&](int64_t r, float* dst) {
              calls[static_cast<size_t>(r)].fetch_add(1);
              for (int64_t i = 0; i < n_in; ++i) dst[i] = 0.5f * source[r * n_in + i] - 0.25f;
            };
            std::vector<float> staging(static_cast<size_t>(m * n_in), -7.0f);
            std::vector<float> y(expected.size(), -1.0f);
            linear.forward(y.data(), InputRows(produce, staging.data(), n_in), m, scratch.data());
            const std::string what = std::string(testing::weight_type_name(type)) +
                                     (mixed ? "+Q6_K" : "") + " precision=" +
                                     precision_name(precision) + " isa=" + cpu::isa_name(isa) +
                                     " m=" + std::to_string(m);
            EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), y.size() * sizeof(float))) << what;
            for (int64_t r = 0; r < m; ++r) {
              ASSERT_EQ(calls[static_cast<size_t>(r)].load(), 1) << what << " row " << r;
            }
          }
        }
      }
    }
  }
}

// oneDNN primitives are made for bucketed row counts only: a serving loop whose batch size
// changes every step stops creating them once it has seen each bucket. The padded rows must not
// leak into the result.
TEST(OnednnMatmul, RowBucketsBoundPrimitivesAndPadCorrectly) {
  for (int64_t m = 1; m <= 5000; ++m) {
    const int64_t rows = detail::onednn_rows(m);
    ASSERT_GE(rows, m);
    ASSERT_LE(rows - m, std::max<int64_t>(3, m / 8)) << "m=" << m;
    ASSERT_EQ(detail::onednn_rows(rows), rows) << "a bucket is its own bucket, m=" << m;
    ASSERT_LE(detail::onednn_rows(m - 1 > 0 ? m - 1 : 1), rows) << "monotonic, m=" << m;
  }
  if (cpu::selected_isa() < cpu::Isa::kAvx512Bf16) GTEST_SKIP() << "oneDNN bf16 needs AVX512-BF16";
  const int64_t n_out = 24, n_in = 64;
  const auto w = make_weights(WeightType::kBF16, n_out, n_in, 11);
  detail::OnednnMatmul onednn(w.data(), detail::OnednnMatmul::DataType::kBF16, n_out, n_in);
  std::set<int64_t> buckets;
  for (int64_t m = 6; m <= 300; ++m) {
    buckets.insert(detail::onednn_rows(m));
    const auto x = random_floats(m * n_in, static_cast<uint32_t>(m), -2.0f, 2.0f);
    std::vector<uint16_t> x_bf16(x.size());
    std::vector<float> x_rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x_bf16[i] = float_to_bf16(x[i]);
      x_rounded[i] = bf16_to_float(x_bf16[i]);
    }
    std::vector<float> expected(m * n_out), y(m * n_out + 1, 123.0f);
    ref::matmul(expected.data(), x_rounded.data(), m, w.data(), WeightType::kBF16, n_out, n_in);
    // Scratch sized for the largest m serves every smaller one (MoE experts run so).
    ASSERT_LE(onednn.scratch_bytes(m - 1), onednn.scratch_bytes(m)) << "m=" << m;
    AlignedBuffer scratch(std::max<size_t>(64, onednn.scratch_bytes(m)));
    onednn.run(y.data(), x_bf16.data(), m, scratch.data());
    EXPECT_LT(testing::nmse(y.data(), expected.data(), expected.size()), 1e-9) << "m=" << m;
    EXPECT_EQ(y[m * n_out], 123.0f) << "wrote past the m rows, m=" << m;
  }
  EXPECT_EQ(onednn.num_primitives(), buckets.size());
  EXPECT_LT(buckets.size(), size_t{40});  // 295 row counts, a few dozen primitives
}

TEST(PackedLinear, PrecisionChoosesPackedType) {
  const auto w = make_weights(WeightType::kF16, 4, 64, 1);
  EXPECT_EQ(PackedLinear::pack(w.data(), WeightType::kF16, 4, 64, MatmulPrecision::kAuto).packed_type(),
            WeightType::kF16);
  EXPECT_EQ(PackedLinear::pack(w.data(), WeightType::kF16, 4, 64, MatmulPrecision::kBF16).packed_type(),
            WeightType::kBF16);
  const auto linear = PackedLinear::pack(w.data(), WeightType::kF16, 4, 64, MatmulPrecision::kF32);
  EXPECT_EQ(linear.packed_type(), WeightType::kF32);
  EXPECT_EQ(linear.weight_bytes(), size_t{4 * 64 * 4});
  const auto q = make_weights(WeightType::kQ8_0, 4, 64, 2);
  EXPECT_EQ(PackedLinear::pack(q.data(), WeightType::kQ8_0, 4, 64, MatmulPrecision::kBF16).packed_type(),
            WeightType::kQ8_0);
  // --dtype float16: f32 and bf16 weights are held in f16, quantized ones are kept.
  const auto f32 = make_weights(WeightType::kF32, 4, 64, 3);
  EXPECT_EQ(PackedLinear::pack(f32.data(), WeightType::kF32, 4, 64, MatmulPrecision::kF16).packed_type(),
            WeightType::kF16);
  EXPECT_EQ(PackedLinear::pack(q.data(), WeightType::kQ8_0, 4, 64, MatmulPrecision::kF16).packed_type(),
            WeightType::kQ8_0);
}

TEST(PackedLinear, RejectsBadShapes) {
  const auto q = make_weights(WeightType::kQ8_0, 2, 64, 3);
  EXPECT_THROW(PackedLinear::pack(q.data(), WeightType::kQ8_0, 2, 48, MatmulPrecision::kAuto), Error);
  EXPECT_THROW(PackedLinear::pack(q.data(), WeightType::kF32, 0, 48, MatmulPrecision::kAuto), Error);
}

}  // namespace
}  // namespace vellum::kernels
