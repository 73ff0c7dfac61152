// Helpers for the kernel tests: seeded random data, the normalised error used by llama.cpp's
// test-backend-ops (NMSE), and a scope that forces each available ISA in turn.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "cpu/isa.h"
#include "kernels/kernels.h"
#include "kernels/quant_types.h"

namespace vellum::kernels::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// sum((actual - expected)^2) / sum(expected^2); 0 when both are all zero.
inline double nmse(const float* actual, const float* expected, size_t n) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double{actual[i]} - expected[i];
    err += d * d;
    ref += double{expected[i]} * expected[i];
  }
  if (ref == 0.0) return err;
  return err / ref;
}

// Index of the element with the largest absolute difference (for failure messages).
inline size_t worst_index(const float* actual, const float* expected, size_t n) {
  size_t worst = 0;
  double worst_diff = -1.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double{actual[i]} - expected[i]);
    if (!(d <= worst_diff)) {  // NaN counts as worst
      worst_diff = d;
      worst = i;
    }
  }
  return worst;
}

// Every ISA level the machine has, highest first (oneDNN's ISA is fixed by its first use, so
// the highest level must come first).
inline std::vector<cpu::Isa> isas_to_test() {
  std::vector<cpu::Isa> isas = cpu::available_isas();
  return {isas.rbegin(), isas.rend()};
}

// Forces an ISA for the lifetime of the scope, then restores the previous selection.
class IsaScope {
 public:
  explicit IsaScope(cpu::Isa isa) : previous_(cpu::selected_isa()) { cpu::set_isa_override(isa); }
  ~IsaScope() { cpu::set_isa_override(previous_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  cpu::Isa previous_;
};

// Rounds values through a KV cache type (what the cache will hold).
inline float round_kv(float x, KvType type) {
  switch (type) {
    case KvType::kF32: return x;
    case KvType::kF16: return fp16_to_float(float_to_fp16(x));
    case KvType::kBF16: return bf16_to_float(float_to_bf16(x));
    default: break;  // quantized: rows, not values (quantize_kv_row / dequantize_kv_row)
  }
  return x;
}

inline const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kBF16: return "bf16";
    case KvType::kQ8_0: return "q8_0";
    case KvType::kQ4_0: return "q4_0";
    case KvType::kFp8E4M3: return "fp8_e4m3";
    case KvType::kFp8E5M2: return "fp8_e5m2";
  }
  return "?";
}

inline const char* weight_type_name(WeightType type) { return weight_type_info(type).name; }

// Floats aligned to 64 bytes plus `offset` floats, so a test can start misaligned on purpose.
class OffsetBuffer {
 public:
  OffsetBuffer(size_t n, size_t offset) : storage_(n + offset + 16), offset_(offset) {
    const auto address = reinterpret_cast<uintptr_t>(storage_.data());
    const size_t pad = ((64 - address % 64) % 64) / sizeof(float);
    data_ = storage_.data() + pad + offset_;
    storage_.resize(storage_.size());  // no reallocation from here on
  }
  float* data() { return data_; }

 private:
  std::vector<float> storage_;
  size_t offset_;
  float* data_;
};

}  // namespace vellum::kernels::testing
