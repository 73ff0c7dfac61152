// quantize_row for every type, checked through the kernels' reference dequantization (itself
// tested against hand-computed blocks in tests/kernels/test_dequantize.cc): the relative RMS
// error on normal data stays under a per-type bound, re-quantizing random valid blocks comes
// back close, values on a grid the type represents exactly come back exactly, and degenerate
// inputs (zeros, constants, outliers) give finite, sensible blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "gguf/ggml_type.h"
#include "kernels/kernels.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"
#include "model/io/quantize.h"
#include "vellum/status.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;
using kernels::WeightType;

struct TypeCase {
  GgmlType type;
  WeightType weight_type;
  // Bound on the relative RMS error sqrt(sum (y - x)^2 / sum x^2) for normal data; about 1.5x
  // what was measured (see the test's output), so a real regression fails.
  double max_rel_rms;
};

const TypeCase kCases[] = {
    {GgmlType::F32, WeightType::kF32, 0.0},
    {GgmlType::F16, WeightType::kF16, 0.0005},
    {GgmlType::BF16, WeightType::kBF16, 0.003},
    {GgmlType::Q8_0, WeightType::kQ8_0, 0.008},
    {GgmlType::Q4_0, WeightType::kQ4_0, 0.12},
    {GgmlType::Q4_1, WeightType::kQ4_1, 0.11},
    {GgmlType::Q5_0, WeightType::kQ5_0, 0.06},
    {GgmlType::Q5_1, WeightType::kQ5_1, 0.055},
    {GgmlType::Q2_K, WeightType::kQ2_K, 0.4},
    {GgmlType::Q3_K, WeightType::kQ3_K, 0.2},
    {GgmlType::Q4_K, WeightType::kQ4_K, 0.1},
    {GgmlType::Q5_K, WeightType::kQ5_K, 0.05},
    {GgmlType::Q6_K, WeightType::kQ6_K, 0.025},
    {GgmlType::IQ4_NL, WeightType::kIQ4_NL, 0.1},
    {GgmlType::IQ4_XS, WeightType::kIQ4_XS, 0.1},
};

std::string case_name(const ::testing::TestParamInfo<TypeCase>& info) {
  return gguf::ggml_type_name(info.param.type);
}

size_t encoded_bytes(GgmlType type, int64_t n) {
  return static_cast<size_t>(n / gguf::ggml_block_size(type)) * gguf::ggml_type_size(type);
}

std::vector<float> dequantize(const TypeCase& c, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  kernels::ref::dequantize_row(y.data(), bytes.data(), c.weight_type, n);
  return y;
}

// quantize_row into an odd offset of a buffer (it must not assume alignment), then dequantize.
std::vector<float> round_trip(const TypeCase& c, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> buffer(encoded_bytes(c.type, n) + 1);
  quantize_row(c.type, x.data(), n, buffer.data() + 1);
  return dequantize(c, std::vector<uint8_t>(buffer.begin() + 1, buffer.end()), n);
}

double rel_rms(const std::vector<float>& y, const std::vector<float>& x) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double{y[i]} - x[i]) * (double{y[i]} - x[i]);
    ref += double{x[i]} * x[i];
  }
  return ref > 0.0 ? std::sqrt(err / ref) : std::sqrt(err);
}

std::vector<float> normal_values(int64_t n, float mean, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

class QuantizeType : public ::testing::TestWithParam<TypeCase> {};

TEST_P(QuantizeType, ErrorOnNormalDataWithinBound) {
  const TypeCase& c = GetParam();
  const int64_t n = 256 * 64;
  const std::vector<float> x = normal_values(n, 0.0f, 0.02f, 1);
  const double err = rel_rms(round_trip(c, x), x);
  std::printf("%-6s relative RMS error %.5f (bound %.4f)\n", gguf::ggml_type_name(c.type), err,
              c.max_rel_rms);
  EXPECT_LE(err, c.max_rel_rms);
  if (c.type != GgmlType::F32) {
    EXPECT_GT(err, 0.0);  // the test can fail: the data is not on a grid
  }
}

// Norm-like weights (1 +- a little) need the min / offset of the types that have one and
// stress the symmetric ones (all values far from zero).
TEST_P(QuantizeType, ErrorOnOffsetData) {
  const TypeCase& c = GetParam();
  const int64_t n = 256 * 16;
  const std::vector<float> x = normal_values(n, 1.0f, 0.02f, 2);
  const double err = rel_rms(round_trip(c, x), x);
  std::printf("%-6s relative RMS error on 1 +- 0.02: %.5f\n", gguf::ggml_type_name(c.type), err);
  EXPECT_LE(err, c.max_rel_rms);
}

// A few outliers (as real weight matrices have) cost precision in their block only.
TEST_P(QuantizeType, OutliersStayFiniteAndLocal) {
  const TypeCase& c = GetParam();
  const int64_t n = 256 * 8;
  std::vector<float> x = normal_values(n, 0.0f, 0.02f, 3);
  x[5] = 3.0f;
  x[700] = -2.5f;
  const std::vector<float> y = round_trip(c, x);
  for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
  EXPECT_NEAR(y[5], 3.0f, 3.0f * 0.1f);
  EXPECT_NEAR(y[700], -2.5f, 2.5f * 0.1f);
  // The last 1024 values share no block with an outlier.
  const std::vector<float> tail_x(x.begin() + 1024, x.end()), tail_y(y.begin() + 1024, y.end());
  EXPECT_LE(rel_rms(tail_y, tail_x), c.max_rel_rms);
}

TEST_P(QuantizeType, ZerosAndConstants) {
  const TypeCase& c = GetParam();
  const int64_t n = 512;
  const std::vector<float> zeros(n, 0.0f);
  for (float v : round_trip(c, zeros)) ASSERT_EQ(v, 0.0f);
  for (float value : {0.25f, -3.0f}) {
    const std::vector<float> constant(n, value);
    const std::vector<float> y = round_trip(c, constant);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(y[i], value, std::fabs(value) * 0.05f) << i << " of constant " << value;
    }
  }
}

// Random valid blocks (random bytes, f16 scales in a sane range) dequantized, re-quantized and
// dequantized again: the quantizer handles whatever a real file may hold (mins of either size,
// unused levels, negative sub-block scales).
class QuantizeBlockType : public ::testing::TestWithParam<TypeCase> {};

TEST_P(QuantizeBlockType, RequantizingRandomBlocksStaysClose) {
  const TypeCase& c = GetParam();
  ASSERT_TRUE(kernels::weight_type_info(c.weight_type).quantized);
  const int64_t block = gguf::ggml_block_size(c.type);
  const size_t block_bytes = gguf::ggml_type_size(c.type);
  const int64_t num_blocks = 64;
  std::mt19937 rng(4);
  std::vector<uint8_t> bytes(block_bytes * num_blocks);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  // Overwrite every f16 scale field (d, and dmin / m where the type has one) with a value in
  // [2^-10, 2^-6): where they sit in the block follows ggml-common.h.
  std::uniform_real_distribution<float> scale_dist(0x1p-10f, 0x1p-6f);
  std::vector<size_t> scale_offsets;
  switch (c.type) {
    case GgmlType::Q2_K: scale_offsets = {80, 82}; break;
    case GgmlType::Q3_K: scale_offsets = {108}; break;
    case GgmlType::Q6_K: scale_offsets = {208}; break;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: scale_offsets = {0, 2}; break;
    default: scale_offsets = {0}; break;
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (size_t offset : scale_offsets) {
      const uint16_t h = float_to_fp16(scale_dist(rng) * ((rng() & 1) ? 1.0f : -1.0f));
      std::memcpy(bytes.data() + b * block_bytes + offset, &h, 2);
    }
  }
  const int64_t n = block * num_blocks;
  const std::vector<float> y = dequantize(c, bytes, n);
  const std::vector<float> z = round_trip(c, y);
  const double err = rel_rms(z, y);
  std::printf("%-6s random blocks re-quantized: relative RMS error %.5f\n",
              gguf::ggml_type_name(c.type), err);
  EXPECT_LE(err, c.max_rel_rms);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeType, ::testing::ValuesIn(kCases), case_name);
// kCases from Q8_0 on: the block types.
INSTANTIATE_TEST_SUITE_P(BlockTypes, QuantizeBlockType,
                         ::testing::ValuesIn(std::begin(kCases) + 3, std::end(kCases)), case_name);

// Values on a grid the type represents exactly come back exactly (GGML's quantizers of the
// 32-element types map the block's extremes to the ends of the range).
TEST(Quantize, ExactGridsRoundTripExactly) {
  std::vector<float> x(32);
  // Q4_0: d = 0.25 with -8 * d present; Q8_0: d = 1/127 * 127 * 0.5 ... use q * 0.5, |q| <= 127.
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * static_cast<float>((i % 16) - 8);
  EXPECT_EQ(round_trip(kCases[4], x), x);  // Q4_0
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * static_cast<float>((i % 32) - 16);
  EXPECT_EQ(round_trip(kCases[6], x), x);  // Q5_0
  for (int i = 0; i < 32; ++i) x[i] = -1.0f + 0.125f * static_cast<float>(i % 16);
  EXPECT_EQ(round_trip(kCases[5], x), x);  // Q4_1
  for (int i = 0; i < 32; ++i) x[i] = -1.0f + 0.125f * static_cast<float>(i);
  EXPECT_EQ(round_trip(kCases[7], x), x);  // Q5_1
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(127 - 8 * i);  // d = 1
  EXPECT_EQ(round_trip(kCases[3], x), x);  // Q8_0
  const int8_t codebook[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};
  for (int i = 0; i < 32; ++i) x[i] = 0.5f * static_cast<float>(codebook[(i * 7) % 16]);
  EXPECT_EQ(round_trip(kCases[13], x), x);  // IQ4_NL
}

TEST(Quantize, RejectsUnsupportedTypeAndRaggedLength) {
  std::vector<float> x(256);
  std::vector<uint8_t> out(1024);
  EXPECT_FALSE(is_quantizable(GgmlType::IQ2_XXS));
  EXPECT_THROW(quantize_row(GgmlType::IQ2_XXS, x.data(), 256, out.data()), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q4_K, x.data(), 128, out.data()), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q4_0, x.data(), 48, out.data()), Error);
}

}  // namespace
}  // namespace vellum::model
