#include "kernels/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"

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
  }
}

}  // namespace vellum::kernels
