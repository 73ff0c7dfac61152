// Vectorized loops over one logits row, shared by the sampler, the logprobs and beam search code.
// Pure functions on raw pointers; no allocation.
#pragma once

#include <bit>
#include <cstdint>

namespace vellum::sampling {

// exp(x) with a relative error below 2e-7 for x in [-87, 88]; exactly 0 for x < -87 (and for
// -inf, so masked logits get probability 0). Cephes' single-precision polynomial, written without
// branches or library calls so that `#pragma omp simd` loops vectorize it.
inline float fast_exp(float x) {
  const float keep = x < -87.0f ? 0.0f : 1.0f;
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
  return keep * (y * scale);
}

// Row kernels (row_kernels.cc): one copy per ISA (AVX-512, AVX2+FMA, baseline) chosen at load
// time by the compiler's target_clones dispatch.

// Largest value of row[0, n); -inf for an empty or all -inf row. NaNs are ignored.
float row_max(const float* row, int64_t n);

// Index of the first largest value (torch.argmax's tie rule); 0 when no value is larger than -inf.
int64_t row_argmax(const float* row, int64_t n);

// sum_i exp(row[i] - shift), accumulated in double.
double row_sum_exp(const float* row, int64_t n, float shift);

// row[i] /= divisor in place; returns the largest result.
float row_divide_and_max(float* row, int64_t n, float divisor);

// row[i] = fast_exp(row[i] - shift) in place.
void row_exp_shifted(float* row, int64_t n, float shift);

// sum of the values >= threshold, accumulated in double.
double row_sum_at_least(const float* row, int64_t n, float threshold);

// For each of kNumStatLevels thresholds: the number and the sum (double) of values >= it.
inline constexpr int kNumStatLevels = 8;
void row_level_stats(const float* row, int64_t n, const float* thresholds, double* masses,
                     int64_t* counts);

// Copies the values >= floor to out (room for n) in order; returns how many.
int64_t row_gather_at_least(const float* row, int64_t n, float floor, float* out);

// Number of values >= value.
int64_t row_count_at_least(const float* row, int64_t n, float value);

}  // namespace vellum::sampling
