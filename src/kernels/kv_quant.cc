#include "kernels/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels/quant_types.h"

namespace vellum::kernels {
namespace {

void quantize_q8_0(BlockQ8_0* blocks, const float* src, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const float* x = src + b * kQ8_0BlockSize;  // (32)
    float amax = 0.0f;
    for (int i = 0; i < kQ8_0BlockSize; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_fp16(d);
    for (int i = 0; i < kQ8_0BlockSize; ++i) {
      blocks[b].qs[i] = static_cast<int8_t>(std::lround(x[i] * inv_d));
    }
  }
}

void quantize_q4_0(BlockQ4_0* blocks, const float* src, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;  // (32)
    float amax = 0.0f;
    float max = 0.0f;  // the value of largest magnitude, with its sign
    for (int i = 0; i < kQK; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const auto lo = static_cast<uint8_t>(std::min(15, static_cast<int>(x[j] * inv_d + 8.5f)));
      const auto hi =
          static_cast<uint8_t>(std::min(15, static_cast<int>(x[j + kQK / 2] * inv_d + 8.5f)));
      blocks[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// OCP E4M3 (bias 7, no infinities, 448 the largest finite), rounded to nearest even, saturated.
uint8_t float_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (!(a < 448.0f)) return sign | 0x7e;  // 448 (NaN too: the cache never holds one)
  if (a < 0.015625f) {  // below the smallest normal 2^-6: steps of 2^-9 (8 steps = 2^-6, normal)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int exp2 = 0;
  const float fraction = std::frexp(a, &exp2);  // a = fraction * 2^exp2, fraction in [0.5, 1)
  int exponent = exp2 - 1 + 7;
  int mantissa = static_cast<int>(std::nearbyint((fraction * 2.0f - 1.0f) * 8.0f));
  if (mantissa == 8) {
    mantissa = 0;
    ++exponent;
  }
  if (exponent > 15 || (exponent == 15 && mantissa == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(exponent << 3 | mantissa);
}

float e4m3_to_float(uint8_t f) {
  const int exponent = (f >> 3) & 0xf;
  const int mantissa = f & 0x7;
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f,
                                                     exponent - 7);
  return (f & 0x80) != 0 ? -magnitude : magnitude;
}

// E5M2 is the upper byte of an IEEE f16; 57344 the largest finite.
uint8_t float_to_e5m2(float x) {
  const uint16_t h = float_to_fp16(std::clamp(x, -57344.0f, 57344.0f));
  const uint32_t rounded = h + 0x7fu + ((h >> 8) & 1u);
  const auto f = static_cast<uint8_t>(rounded >> 8);
  return (f & 0x7f) > 0x7b ? static_cast<uint8_t>((f & 0x80) | 0x7b) : f;  // no rounding to inf
}

float e5m2_to_float(uint8_t f) { return fp16_to_float(static_cast<uint16_t>(f << 8)); }

// Row: an f32 scale, then n fp8 bytes.
void quantize_fp8(uint8_t* row, const float* src, int64_t n, bool e4m3) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
  const float scale = amax / (e4m3 ? 448.0f : 57344.0f);
  const float inv_scale = scale > 0.0f ? 1.0f / scale : 0.0f;
  std::memcpy(row, &scale, sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    const float x = src[i] * inv_scale;
    row[sizeof(float) + i] = e4m3 ? float_to_e4m3(x) : float_to_e5m2(x);
  }
}

void dequantize_fp8(float* out, const uint8_t* row, int64_t n, bool e4m3) {
  float scale;
  std::memcpy(&scale, row, sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t f = row[sizeof(float) + i];
    out[i] = scale * (e4m3 ? e4m3_to_float(f) : e5m2_to_float(f));
  }
}

}  // namespace

void quantize_kv_row(void* dst, const float* src, int64_t n, KvType type) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = float_to_fp16(src[i]);
      return;
    case KvType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = float_to_bf16(src[i]);
      return;
    case KvType::kQ8_0:
      quantize_q8_0(static_cast<BlockQ8_0*>(dst), src, n);
      return;
    case KvType::kQ4_0:
      quantize_q4_0(static_cast<BlockQ4_0*>(dst), src, n);
      return;
    case KvType::kFp8E4M3:
    case KvType::kFp8E5M2:
      quantize_fp8(static_cast<uint8_t*>(dst), src, n, type == KvType::kFp8E4M3);
      return;
  }
}

void dequantize_kv_row(float* out, const void* row, int64_t n, KvType type) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_float(static_cast<const uint16_t*>(row)[i]);
      return;
    case KvType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(static_cast<const uint16_t*>(row)[i]);
      return;
    case KvType::kQ8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(row);
      for (int64_t i = 0; i < n; ++i) {
        const BlockQ8_0& block = blocks[i / kQ8_0BlockSize];
        out[i] = fp16_to_float(block.d) * static_cast<float>(block.qs[i % kQ8_0BlockSize]);
      }
      return;
    }
    case KvType::kQ4_0: {
      const auto* blocks = static_cast<const BlockQ4_0*>(row);
      for (int64_t i = 0; i < n; ++i) {
        const BlockQ4_0& block = blocks[i / kQK];
        const int64_t j = i % kQK;
        const int q = j < kQK / 2 ? block.qs[j] & 0xf : block.qs[j - kQK / 2] >> 4;
        out[i] = fp16_to_float(block.d) * static_cast<float>(q - 8);
      }
      return;
    }
    case KvType::kFp8E4M3:
    case KvType::kFp8E5M2:
      dequantize_fp8(out, static_cast<const uint8_t*>(row), n, type == KvType::kFp8E4M3);
      return;
  }
}

}  // namespace vellum::kernels
