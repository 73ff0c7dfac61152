#include "sampling/random_sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "sampling/vec_math.h"

namespace vellum::sampling {
namespace {

// Weights lie in [0, 1]; for non-negative floats the bit pattern is monotonic in the value, so
// bits >> kBinShift is a monotonic bin index: 8 exponent bits and 5 mantissa bits, i.e. 32 bins
// per octave. 1.0f = 0x3F800000 is the highest bin.
constexpr int kBinShift = 18;
constexpr int64_t kNumBins = (0x3F800000 >> kBinShift) + 1;
// Block size for the second-level search in draw_from_filtered.
constexpr int64_t kBlock = 1024;
// Smallest weight fast_exp returns other than 0: masked (-inf) logits have weight 0 exactly.
constexpr float kMinKeptWeight = std::numeric_limits<float>::min();

inline uint32_t bin_of(float weight) { return std::bit_cast<uint32_t>(weight) >> kBinShift; }

void ensure_sizes(RandomSamplingWorkspace* ws) {
  if (static_cast<int64_t>(ws->bin_counts.size()) != kNumBins) {
    ws->bin_counts.assign(kNumBins, 0);
    ws->bin_mass.assign(kNumBins, 0.0);
  }
}

// Elements of `bin` with weight >= threshold, sorted by weight descending, into ws->bin_items.
void gather_bin_sorted(const float* weights, int64_t vocab_size, uint32_t bin, float threshold,
                       RandomSamplingWorkspace* ws) {
  ws->bin_items.clear();
  for (int64_t i = 0; i < vocab_size; ++i) {
    const float w = weights[i];
    if (w >= threshold && bin_of(w) == bin) ws->bin_items.emplace_back(w, static_cast<int32_t>(i));
  }
  std::sort(ws->bin_items.begin(), ws->bin_items.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
}

// The k-th largest weight among those >= threshold, or threshold when fewer than k are.
float top_k_threshold(const float* weights, int64_t vocab_size, int64_t k, float threshold,
                      RandomSamplingWorkspace* ws) {
  std::fill(ws->bin_counts.begin(), ws->bin_counts.end(), 0u);
  for (int64_t i = 0; i < vocab_size; ++i) {
    const float w = weights[i];
    if (w >= threshold) ++ws->bin_counts[bin_of(w)];
  }
  int64_t above = 0;
  for (int64_t bin = kNumBins - 1; bin >= 0; --bin) {
    const int64_t count = ws->bin_counts[bin];
    if (above + count >= k) {
      gather_bin_sorted(weights, vocab_size, static_cast<uint32_t>(bin), threshold, ws);
      return ws->bin_items[k - above - 1].first;
    }
    above += count;
  }
  return threshold;
}

// The smallest kept weight after top-p over the weights >= threshold.
float top_p_threshold(const float* weights, int64_t vocab_size, float top_p, float threshold,
                      RandomSamplingWorkspace* ws) {
  std::fill(ws->bin_counts.begin(), ws->bin_counts.end(), 0u);
  std::fill(ws->bin_mass.begin(), ws->bin_mass.end(), 0.0);
  double total = 0.0;
  for (int64_t i = 0; i < vocab_size; ++i) {
    const float w = weights[i];
    if (w >= threshold) {
      const uint32_t bin = bin_of(w);
      ++ws->bin_counts[bin];
      ws->bin_mass[bin] += w;
      total += w;
    }
  }
  const double target = static_cast<double>(top_p) * total;
  double above = 0.0;  // mass of the tokens ranked above the current one
  for (int64_t bin = kNumBins - 1; bin >= 0; --bin) {
    if (ws->bin_counts[bin] == 0) continue;
    if (above + ws->bin_mass[bin] < target) {
      above += ws->bin_mass[bin];
      continue;
    }
    gather_bin_sorted(weights, vocab_size, static_cast<uint32_t>(bin), threshold, ws);
    float last_kept = ws->bin_items.front().first;
    for (const auto& [w, id] : ws->bin_items) {
      if (above >= target) break;
      last_kept = w;
      above += w;
    }
    return std::max(threshold, last_kept);
  }
  return threshold;  // rounding left the target unreached: everything >= threshold stays
}

}  // namespace

FilteredRow filter_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                       RandomSamplingWorkspace* ws) {
  ensure_sizes(ws);
  const float temperature = config.temperature;
#pragma omp simd
  for (int64_t i = 0; i < vocab_size; ++i) row[i] = row[i] / temperature;
  const float max_logit = row_max(row, vocab_size);
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + vocab_size, 0.0f);
    return FilteredRow{std::numeric_limits<float>::infinity(), 0.0};
  }
#pragma omp simd
  for (int64_t i = 0; i < vocab_size; ++i) row[i] = fast_exp(row[i] - max_logit);

  // The max weight is 1, so min_p · max_prob is min_p in weight units.
  float threshold = std::max(kMinKeptWeight, config.min_p);
  if (config.top_k > 0 && config.top_k < vocab_size) {
    threshold = std::max(threshold, top_k_threshold(row, vocab_size, config.top_k, threshold, ws));
  }
  if (config.top_p < 1.0f) {
    threshold = top_p_threshold(row, vocab_size, config.top_p, threshold, ws);
  }

  // Kept mass, per block of kBlock entries so that the draw can skip whole blocks.
  const int64_t num_blocks = (vocab_size + kBlock - 1) / kBlock;
  ws->block_mass.resize(num_blocks);
  double kept_mass = 0.0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t end = std::min(vocab_size, (b + 1) * kBlock);
    double block = 0.0;
#pragma omp simd reduction(+ : block)
    for (int64_t i = b * kBlock; i < end; ++i) block += row[i] >= threshold ? row[i] : 0.0f;
    ws->block_mass[b] = block;
    kept_mass += block;
  }
  return FilteredRow{threshold, kept_mass};
}

int32_t draw_from_filtered(const float* weights, int64_t vocab_size, const FilteredRow& filtered,
                           double uniform, RandomSamplingWorkspace* ws) {
  if (!(filtered.kept_mass > 0.0)) return 0;
  const double target = uniform * filtered.kept_mass;
  const int64_t num_blocks = static_cast<int64_t>(ws->block_mass.size());
  int64_t last_block = num_blocks - 1;
  while (last_block > 0 && ws->block_mass[last_block] == 0.0) --last_block;
  double acc = 0.0;
  int32_t last_kept = -1;
  for (int64_t b = 0; b <= last_block; ++b) {
    // Skip whole blocks that end below the target; the last block with mass is always walked so
    // that rounding at the very end still returns a kept token.
    if (ws->block_mass[b] == 0.0) continue;
    if (b < last_block && acc + ws->block_mass[b] <= target) {
      acc += ws->block_mass[b];
      continue;
    }
    const int64_t end = std::min(vocab_size, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; ++i) {
      const float w = weights[i];
      if (w < filtered.threshold) continue;
      acc += w;
      last_kept = static_cast<int32_t>(i);
      if (acc > target) return last_kept;
    }
  }
  return last_kept >= 0 ? last_kept : 0;
}

int32_t sample_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                   double uniform, RandomSamplingWorkspace* ws) {
  const FilteredRow filtered = filter_row(row, vocab_size, config, ws);
  return draw_from_filtered(row, vocab_size, filtered, uniform, ws);
}

}  // namespace vellum::sampling
