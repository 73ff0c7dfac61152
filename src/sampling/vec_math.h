// Loops over one logits row that the compiler vectorizes (OpenMP SIMD), shared by the sampler and
// the logprobs code. Pure functions on raw pointers; no allocation.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace vellum::sampling {

// exp(x) with a relative error below 2e-7 for x in [-87, 88]; exactly 0 for x < -87 (and for
// -inf, so masked logits get probability 0). Cephes' single-precision polynomial, written without
// branches or library calls so that `#pragma omp simd` loops vectorize it.
inline float fast_exp(float x) {
  const bool underflow = x < -87.0f;
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round x·log2(e) to the nearest integer with the 1.5·2^23 trick (no SSE4.1 round needed).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : y * scale;
}

// Largest value of row[0, n); -inf for an empty or all -inf row. NaNs are ignored.
inline float row_max(const float* row, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = row[i] > m ? row[i] : m;
  return m;
}

// Index of the first largest value (torch.argmax's tie rule); 0 when no value is larger than -inf.
inline int64_t row_argmax(const float* row, int64_t n) {
  const float m = row_max(row, n);
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] == m) return i;
  }
  return 0;
}

// sum_i exp(row[i] - shift), accumulated in double.
inline double row_sum_exp(const float* row, int64_t n, float shift) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fast_exp(row[i] - shift));
  return sum;
}

}  // namespace vellum::sampling
