// Scalar conversions between float and the 16-bit float formats (IEEE f16, bfloat16), and the
// GGML Q8_0 block. These are the reference conversions; kernels have vectorized versions.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace vellum {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest even, with overflow to inf and correct subnormals.
inline uint16_t float_to_fp16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16
    // 0.5f magic: adding moves the mantissa bits into place with hardware rounding.
    const float magic = std::bit_cast<float>(uint32_t{0x3f000000u});
    const float r = std::bit_cast<float>(abs) + magic;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
  }
  uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

// GGML Q8_0: 32 weights share one f16 scale; w[i] = d * qs[i].
inline constexpr int kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8_0BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34);

}  // namespace vellum
