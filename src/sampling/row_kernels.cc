// The hot loops of the sampler, vectorized with OpenMP SIMD. Compiled with -fno-trapping-math
// (see CMakeLists.txt) so GCC may if-convert the comparisons, and cloned per ISA with
// target_clones: the loader picks the widest copy the CPU and OS support (no -march globally).
#include <limits>

#include "sampling/vec_math.h"

#define VELLUM_SAMPLING_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace vellum::sampling {

VELLUM_SAMPLING_CLONES
float row_max(const float* row, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = row[i] > m ? row[i] : m;
  return m;
}

int64_t row_argmax(const float* row, int64_t n) {
  const float m = row_max(row, n);
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] == m) return i;
  }
  return 0;
}

VELLUM_SAMPLING_CLONES
double row_sum_exp(const float* row, int64_t n, float shift) {
  // Float partial sums per lane over short chunks, folded into a double: full SIMD width for the
  // exp and a double-accurate total.
  constexpr int64_t kChunk = 256;
  double total = 0.0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = begin + kChunk < n ? begin + kChunk : n;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = begin; i < end; ++i) sum += fast_exp(row[i] - shift);
    total += sum;
  }
  return total;
}

VELLUM_SAMPLING_CLONES
float row_divide_and_max(float* row, int64_t n, float divisor) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) {
    row[i] = row[i] / divisor;
    m = row[i] > m ? row[i] : m;
  }
  return m;
}

VELLUM_SAMPLING_CLONES
void row_exp_shifted(float* row, int64_t n, float shift) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) row[i] = fast_exp(row[i] - shift);
}

VELLUM_SAMPLING_CLONES
double row_sum_at_least(const float* row, int64_t n, float threshold) {
  constexpr int64_t kChunk = 256;
  double total = 0.0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = begin + kChunk < n ? begin + kChunk : n;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = begin; i < end; ++i) sum += row[i] >= threshold ? row[i] : 0.0f;
    total += sum;
  }
  return total;
}

VELLUM_SAMPLING_CLONES
int64_t row_count_at_least(const float* row, int64_t n, float value) {
  int64_t count = 0;
#pragma omp simd reduction(+ : count)
  for (int64_t i = 0; i < n; ++i) count += row[i] >= value ? 1 : 0;
  return count;
}

VELLUM_SAMPLING_CLONES
int64_t row_gather_at_least(const float* row, int64_t n, float floor, float* out) {
  constexpr int64_t kBlock = 64;
  int64_t num_out = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = begin + kBlock < n ? begin + kBlock : n;
    int any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t i = begin; i < end; ++i) any |= row[i] >= floor ? 1 : 0;
    if (any == 0) continue;
    // Branchless: in a flat distribution about half the values pass, and a branch would
    // mispredict constantly.
    for (int64_t i = begin; i < end; ++i) {
      out[num_out] = row[i];
      num_out += row[i] >= floor ? 1 : 0;
    }
  }
  return num_out;
}

VELLUM_SAMPLING_CLONES
void row_level_stats(const float* row, int64_t n, const float* thresholds, double* masses,
                     int64_t* counts) {
  static_assert(kNumStatLevels == 8, "the loop below is unrolled for 8 levels");
  const float t0 = thresholds[0], t1 = thresholds[1], t2 = thresholds[2], t3 = thresholds[3];
  const float t4 = thresholds[4], t5 = thresholds[5], t6 = thresholds[6], t7 = thresholds[7];
  for (int j = 0; j < kNumStatLevels; ++j) {
    masses[j] = 0.0;
    counts[j] = 0;
  }
  // Chunks short enough for exact float counts and accurate float partial sums.
  constexpr int64_t kChunk = 1024;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = begin + kChunk < n ? begin + kChunk : n;
    float m0 = 0, m1 = 0, m2 = 0, m3 = 0, m4 = 0, m5 = 0, m6 = 0, m7 = 0;
    float c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
#pragma omp simd reduction(+ : m0, m1, m2, m3, m4, m5, m6, m7, c0, c1, c2, c3, c4, c5, c6, c7)
    for (int64_t i = begin; i < end; ++i) {
      const float w = row[i];
      m0 += w >= t0 ? w : 0.0f;
      c0 += w >= t0 ? 1.0f : 0.0f;
      m1 += w >= t1 ? w : 0.0f;
      c1 += w >= t1 ? 1.0f : 0.0f;
      m2 += w >= t2 ? w : 0.0f;
      c2 += w >= t2 ? 1.0f : 0.0f;
      m3 += w >= t3 ? w : 0.0f;
      c3 += w >= t3 ? 1.0f : 0.0f;
      m4 += w >= t4 ? w : 0.0f;
      c4 += w >= t4 ? 1.0f : 0.0f;
      m5 += w >= t5 ? w : 0.0f;
      c5 += w >= t5 ? 1.0f : 0.0f;
      m6 += w >= t6 ? w : 0.0f;
      c6 += w >= t6 ? 1.0f : 0.0f;
      m7 += w >= t7 ? w : 0.0f;
      c7 += w >= t7 ? 1.0f : 0.0f;
    }
    const float ms[] = {m0, m1, m2, m3, m4, m5, m6, m7};
    const float cs[] = {c0, c1, c2, c3, c4, c5, c6, c7};
    for (int j = 0; j < kNumStatLevels; ++j) {
      masses[j] += ms[j];
      counts[j] += static_cast<int64_t>(cs[j]);
    }
  }
}

}  // namespace vellum::sampling
