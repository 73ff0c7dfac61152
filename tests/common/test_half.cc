#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/half.h"

namespace vellum {
namespace {

TEST(Half, Fp16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = fp16_to_float(bits);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_fp16(f), bits) << "f16 bits 0x" << std::hex << h;
  }
}

TEST(Half, Fp16RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_fp16(70000.0f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
}

TEST(Half, Bf16RoundTripsAndRounds) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16(f), h);
  }
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace vellum
