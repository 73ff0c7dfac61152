#include "sampling/random_sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "sampling/vec_math.h"

namespace vellum::sampling {
namespace {

// Weights lie in [0, 1]; for non-negative floats the bit pattern is monotonic in the value, so
// bits >> kBinShift is a monotonic bin index: 8 exponent bits and 5 mantissa bits, i.e. 32 bins
// per octave. 1.0f = 0x3F800000 is the highest bin.
constexpr int kBinShift = 18;
constexpr int64_t kNumBins = (0x3F800000 >> kBinShift) + 1;
// Up to this many candidates the top-p cut sorts them; above, it bins them first.
constexpr size_t kMaxSortedCandidates = 4096;
// Block size for the second-level search in draw_from_filtered.
constexpr int64_t kBlock = 1024;
// Smallest weight fast_exp returns other than 0: masked (-inf) logits have weight 0 exactly.
constexpr float kMinKeptWeight = std::numeric_limits<float>::min();
// Candidate floors (weights relative to the max) tried from the top: the first that provably
// contains the top-k / top-p cut bounds the candidates that are gathered and sorted.
constexpr float kLevels[kNumStatLevels - 1] = {0x1p-1f,  0x1p-3f,  0x1p-5f, 0x1p-8f,
                                               0x1p-11f, 0x1p-14f, 0x1p-18f};

inline uint32_t bin_of(float weight) { return std::bit_cast<uint32_t>(weight) >> kBinShift; }

// The smallest kept weight of top-p over `candidates` (every weight >= the current threshold
// that can be kept, in any order; modified): keep while the mass ranked above is < target.
float top_p_cut(float* candidates, size_t num_candidates, double target,
                RandomSamplingWorkspace* ws) {
  float* sorted = candidates;
  size_t num_sorted = num_candidates;
  double above = 0.0;  // mass of the candidates ranked above the current one
  if (num_candidates > kMaxSortedCandidates) {
    // Bin first; only the bin holding the cut is sorted.
    ws->bin_counts.assign(kNumBins, 0u);
    ws->bin_mass.assign(kNumBins, 0.0);
    for (size_t i = 0; i < num_candidates; ++i) {
      ++ws->bin_counts[bin_of(candidates[i])];
      ws->bin_mass[bin_of(candidates[i])] += candidates[i];
    }
    int64_t cut_bin = -1;
    for (int64_t bin = kNumBins - 1; bin >= 0; --bin) {
      if (ws->bin_counts[bin] == 0) continue;
      if (above + ws->bin_mass[bin] >= target) {
        cut_bin = bin;
        break;
      }
      above += ws->bin_mass[bin];
    }
    if (cut_bin < 0) return 0.0f;  // rounding left the target unreached: keep all candidates
    ws->bin_items.clear();
    for (size_t i = 0; i < num_candidates; ++i) {
      if (bin_of(candidates[i]) == static_cast<uint32_t>(cut_bin)) {
        ws->bin_items.push_back(candidates[i]);
      }
    }
    sorted = ws->bin_items.data();
    num_sorted = ws->bin_items.size();
  }
  std::sort(sorted, sorted + num_sorted, std::greater<float>());
  float last_kept = num_sorted == 0 ? 0.0f : sorted[0];
  for (size_t i = 0; i < num_sorted; ++i) {
    if (above >= target) break;
    last_kept = sorted[i];
    above += sorted[i];
  }
  return last_kept;
}

}  // namespace

FilteredRow filter_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                       RandomSamplingWorkspace* ws) {
  const float max_logit = row_divide_and_max(row, vocab_size, config.temperature);
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + vocab_size, 0.0f);
    ws->block_mass.clear();
    return FilteredRow{std::numeric_limits<float>::infinity(), 0.0};
  }
  row_exp_shifted(row, vocab_size, max_logit);

  // The max weight is 1, so min_p · max_prob is min_p in weight units.
  float threshold = std::max(kMinKeptWeight, config.min_p);
  bool top_k = config.top_k > 0 && config.top_k < vocab_size;
  const bool top_p = config.top_p < 1.0f;
  if (top_k || top_p) {
    float levels[kNumStatLevels];
    for (int j = 0; j < kNumStatLevels - 1; ++j) levels[j] = std::max(kLevels[j], threshold);
    levels[kNumStatLevels - 1] = threshold;
    double masses[kNumStatLevels];
    int64_t counts[kNumStatLevels];
    row_level_stats(row, vocab_size, levels, masses, counts);
    const double total_mass = masses[kNumStatLevels - 1];
    top_k = top_k && counts[kNumStatLevels - 1] > config.top_k;  // else top-k keeps everything
    if (top_k || top_p) {
      // With top-k the cut lies at or above the k-th value; top-p alone needs the mass.
      float floor = threshold;
      for (int j = 0; j < kNumStatLevels; ++j) {
        const bool contains_cut = top_k
                                      ? counts[j] >= config.top_k
                                      : masses[j] >= static_cast<double>(config.top_p) * total_mass;
        if (contains_cut) {
          floor = levels[j];
          break;
        }
      }
      if (static_cast<int64_t>(ws->candidates.size()) < vocab_size) {
        ws->candidates.resize(vocab_size);
      }
      float* candidates = ws->candidates.data();
      size_t num_candidates = row_gather_at_least(row, vocab_size, floor, candidates);
      double kept_mass = total_mass;
      if (top_k) {
        std::nth_element(candidates, candidates + (config.top_k - 1), candidates + num_candidates,
                         std::greater<float>());
        threshold = std::max(threshold, candidates[config.top_k - 1]);
        // nth_element put every value >= the k-th in front; ties with it may sit anywhere after.
        num_candidates = std::remove_if(candidates, candidates + num_candidates,
                                        [&](float w) { return w < threshold; }) -
                         candidates;
        kept_mass = 0.0;
        for (size_t i = 0; i < num_candidates; ++i) kept_mass += candidates[i];
      }
      if (top_p) {
        const double target = static_cast<double>(config.top_p) * kept_mass;
        threshold = std::max(threshold, top_p_cut(candidates, num_candidates, target, ws));
      }
    }
  }

  // Kept mass, per block of kBlock entries so that the draw can skip whole blocks.
  const int64_t num_blocks = (vocab_size + kBlock - 1) / kBlock;
  ws->block_mass.resize(num_blocks);
  double kept_mass = 0.0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t end = std::min(vocab_size, (b + 1) * kBlock);
    const double block = row_sum_at_least(row + b * kBlock, end - b * kBlock, threshold);
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

int32_t rejection_sample_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                             int32_t draft_token_id, double accept_uniform,
                             double resample_uniform, RandomSamplingWorkspace* ws) {
  FilteredRow filtered = filter_row(row, vocab_size, config, ws);
  if (!(filtered.kept_mass > 0.0)) return 0;
  float& draft_weight = row[draft_token_id];
  const double p_draft =
      draft_weight >= filtered.threshold ? draft_weight / filtered.kept_mass : 0.0;
  if (accept_uniform < p_draft) return draft_token_id;
  if (p_draft > 0.0) {
    // Rejected: the residual max(p - one_hot(draft), 0), normalized, is p without the draft.
    draft_weight = -1.0f;  // below every threshold (weights are >= 0)
    const int64_t block = draft_token_id / kBlock;
    const int64_t end = std::min(vocab_size, (block + 1) * kBlock);
    ws->block_mass[block] =
        row_sum_at_least(row + block * kBlock, end - block * kBlock, filtered.threshold);
    filtered.kept_mass = 0.0;
    for (double mass : ws->block_mass) filtered.kept_mass += mass;
    // Only the draft had mass (p_draft was 1 up to rounding): it is the only possible token.
    if (!(filtered.kept_mass > 0.0)) return draft_token_id;
  }
  return draw_from_filtered(row, vocab_size, filtered, resample_uniform, ws);
}

int32_t sample_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                   double uniform, RandomSamplingWorkspace* ws) {
  const FilteredRow filtered = filter_row(row, vocab_size, config, ws);
  return draw_from_filtered(row, vocab_size, filtered, uniform, ws);
}

}  // namespace vellum::sampling
