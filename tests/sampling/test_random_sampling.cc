// Temperature, min_p, top-k, top-p and the draw, checked against a double-precision reference
// of vLLM's algorithm (sort, cumulative sum) and statistically with fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sampling/generator.h"
#include "sampling/random_sampling.h"
#include "sampling/vec_math.h"
#include "sampling_test_util.h"

namespace vellum::sampling {
namespace {

using testing::chi_square;
using testing::chi_square_critical_0001;
using testing::random_logits;
using testing::softmax;

constexpr int64_t kNumDraws = 20000;

// vLLM's filtering in double: softmax weights after temperature, min_p, then top-k, then top-p
// over what top-k kept, by sorting. `cut_gap` is how close the top-p cut came to a tie between
// keeping and dropping (relative mass), so a float implementation may disagree only below it.
struct Reference {
  std::vector<bool> kept;
  std::vector<double> probs;  // the distribution to sample from
  double cut_gap = 1.0;
};

Reference reference_filter(const std::vector<float>& logits, const RandomSamplingConfig& config) {
  const int64_t n = static_cast<int64_t>(logits.size());
  double m = -INFINITY;
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, static_cast<double>(logits[i] / config.temperature));
  std::vector<double> w(n);
  for (int64_t i = 0; i < n; ++i)
    w[i] = std::exp(static_cast<double>(logits[i] / config.temperature) - m);
  Reference ref;
  ref.kept.assign(n, false);
  // fast_exp flushes weights below exp(-87) to 0, and 0-weight tokens are never kept.
  double threshold = std::max<double>(config.min_p, std::exp(-87.0));
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return w[a] > w[b]; });
  if (config.top_k > 0 && config.top_k < n) {
    int64_t count = 0;
    for (int64_t idx : order) {
      if (w[idx] < threshold) break;
      if (++count == config.top_k) {
        threshold = std::max(threshold, w[idx]);
        break;
      }
    }
  }
  if (config.top_p < 1.0f) {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += w[i] >= threshold ? w[i] : 0.0;
    const double target = static_cast<double>(config.top_p) * total;
    double above = 0.0;
    double last = threshold;
    for (int64_t idx : order) {
      if (w[idx] < threshold) break;
      ref.cut_gap = std::min(ref.cut_gap, std::abs(above - target) / total);
      if (above >= target) break;
      last = w[idx];
      above += w[idx];
    }
    threshold = std::max(threshold, last);
  }
  ref.probs.assign(n, 0.0);
  double kept_mass = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    ref.kept[i] = w[i] >= threshold;
    if (ref.kept[i]) kept_mass += w[i];
  }
  for (int64_t i = 0; i < n; ++i) ref.probs[i] = ref.kept[i] ? w[i] / kept_mass : 0.0;
  // Near the min_p or top-k boundary a float weight may fall on the other side.
  for (int64_t i = 0; i < n; ++i) {
    if (w[i] > 0) ref.cut_gap = std::min(ref.cut_gap, std::abs(w[i] - threshold) / w[i]);
  }
  return ref;
}

std::vector<bool> kept_by_filter(std::vector<float> logits, const RandomSamplingConfig& config) {
  RandomSamplingWorkspace ws;
  const FilteredRow filtered = filter_row(logits.data(), logits.size(), config, &ws);
  std::vector<bool> kept(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) kept[i] = logits[i] >= filtered.threshold;
  return kept;
}

// Draws kNumDraws tokens from one filtered row and returns the counts per token.
std::vector<int64_t> draw_counts(std::vector<float> logits, const RandomSamplingConfig& config,
                                 uint64_t seed) {
  RandomSamplingWorkspace ws;
  const FilteredRow filtered = filter_row(logits.data(), logits.size(), config, &ws);
  Generator generator(seed);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t i = 0; i < kNumDraws; ++i) {
    ++counts[draw_from_filtered(logits.data(), logits.size(), filtered, generator.next_uniform(),
                                &ws)];
  }
  return counts;
}

int64_t num_nonzero(const std::vector<double>& probs) {
  return std::count_if(probs.begin(), probs.end(), [](double p) { return p > 0; });
}

TEST(FastExp, MatchesStdExp) {
  double max_rel = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.01337f) {
    const double expected = std::exp(static_cast<double>(x));
    max_rel = std::max(max_rel, std::abs(fast_exp(x) - expected) / expected);
  }
  EXPECT_LT(max_rel, 3e-7);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

TEST(RandomSampling, TopKOneEqualsGreedy) {
  Generator generator(1);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto logits = random_logits(3000, seed);
    const int64_t greedy = row_argmax(logits.data(), logits.size());
    RandomSamplingWorkspace ws;
    const int32_t token =
        sample_row(logits.data(), logits.size(), {.top_k = 1}, generator.next_uniform(), &ws);
    EXPECT_EQ(token, greedy) << "seed " << seed;
  }
}

TEST(RandomSampling, TopPNearZeroEqualsGreedy) {
  Generator generator(2);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto logits = random_logits(3000, seed, 1.0f);
    const int64_t greedy = row_argmax(logits.data(), logits.size());
    RandomSamplingWorkspace ws;
    const int32_t token =
        sample_row(logits.data(), logits.size(), {.top_p = 1e-7f}, generator.next_uniform(), &ws);
    EXPECT_EQ(token, greedy) << "seed " << seed;
  }
}

TEST(RandomSampling, MinPMasksBelowMinPTimesMax) {
  // probs ∝ {8, 4, 2, 1, 0.5}: min_p = 0.2 keeps prob >= 0.2 · max, i.e. weights 8, 4, 2.
  const std::vector<float> logits = {std::log(8.0f), std::log(4.0f), std::log(2.0f), 0.0f,
                                     std::log(0.5f)};
  EXPECT_EQ(kept_by_filter(logits, {.min_p = 0.2f}),
            (std::vector<bool>{true, true, true, false, false}));
  // After temperature: T = 0.5 squares the ratios (64, 16, 4, 1, .25): 0.05 keeps 64, 16, 4.
  EXPECT_EQ(kept_by_filter(logits, {.temperature = 0.5f, .min_p = 0.05f}),
            (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(kept_by_filter(logits, {.temperature = 0.5f, .min_p = 0.1f}),
            (std::vector<bool>{true, true, false, false, false}));
}

TEST(RandomSampling, TopKKeepsTiesWithTheKthValue) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f, 0.5f, 2.0f};
  EXPECT_EQ(kept_by_filter(logits, {.top_k = 2}),
            (std::vector<bool>{false, true, true, true, false, true}));
  EXPECT_EQ(kept_by_filter(logits, {.top_k = 1}),
            (std::vector<bool>{false, true, false, false, false, false}));
}

TEST(RandomSampling, TopPKeepsTokensWhoseHigherRankedMassIsBelowP) {
  // probs 0.5, 0.25, 0.125, 0.125: p = 0.5 keeps only the first (mass above the second is 0.5,
  // not < 0.5); p = 0.6 keeps two; p = 0.8 keeps three, and the tie at 0.125 keeps four.
  const std::vector<float> logits = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  EXPECT_EQ(kept_by_filter(logits, {.top_p = 0.5f}),
            (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(kept_by_filter(logits, {.top_p = 0.6f}), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(kept_by_filter(logits, {.top_p = 0.8f}), (std::vector<bool>{true, true, true, true}));
}

TEST(RandomSampling, AllMaskedRowReturnsTokenZero) {
  std::vector<float> logits(5, -std::numeric_limits<float>::infinity());
  RandomSamplingWorkspace ws;
  EXPECT_EQ(sample_row(logits.data(), 5, {}, 0.5, &ws), 0);
}

// Random rows and random settings: the kept set equals the double-precision reference except
// where the reference itself is within float rounding of a boundary.
TEST(RandomSampling, FilterMatchesReferenceOnRandomRows) {
  std::mt19937_64 rng(1234);
  int64_t num_close_calls = 0;
  constexpr int kTrials = 300;
  for (int trial = 0; trial < kTrials; ++trial) {
    const int64_t vocab = std::uniform_int_distribution<int64_t>(2, 3000)(rng);
    const float scale = std::uniform_real_distribution<float>(0.1f, 8.0f)(rng);
    const auto logits = random_logits(vocab, rng(), scale);
    RandomSamplingConfig config;
    config.temperature = std::uniform_real_distribution<float>(0.05f, 2.0f)(rng);
    if (rng() % 2) config.min_p = std::uniform_real_distribution<float>(0.0f, 0.5f)(rng);
    if (rng() % 2) config.top_k = std::uniform_int_distribution<int64_t>(1, vocab + 5)(rng);
    if (rng() % 2) config.top_p = std::uniform_real_distribution<float>(0.01f, 1.0f)(rng);
    const Reference ref = reference_filter(logits, config);
    const auto kept = kept_by_filter(logits, config);
    if (kept != ref.kept) {
      ASSERT_LT(ref.cut_gap, 1e-5)
          << "trial " << trial << " vocab " << vocab << " T " << config.temperature << " min_p "
          << config.min_p << " top_k " << config.top_k << " top_p " << config.top_p;
      ++num_close_calls;
    }
  }
  EXPECT_LT(num_close_calls, kTrials / 20);
}

// Flat rows over a large vocabulary: the top-p cut falls among thousands of candidates, which
// takes the binned path.
TEST(RandomSampling, FilterMatchesReferenceOnFlatLargeRows) {
  std::mt19937_64 rng(99);
  int64_t num_close_calls = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t vocab = std::uniform_int_distribution<int64_t>(20000, 60000)(rng);
    const auto logits = random_logits(vocab, rng(), 1.0f);
    RandomSamplingConfig config;
    config.top_p = std::uniform_real_distribution<float>(0.5f, 0.95f)(rng);
    if (trial % 3 == 0) config.top_k = 15000;
    if (trial % 4 == 0) config.min_p = 0.01f;
    const Reference ref = reference_filter(logits, config);
    const auto kept = kept_by_filter(logits, config);
    const int64_t num_kept = std::count(ref.kept.begin(), ref.kept.end(), true);
    ASSERT_GT(num_kept, 4096) << "trial " << trial << ": not the binned path";
    if (kept != ref.kept) {
      ASSERT_LT(ref.cut_gap, 1e-5)
          << "trial " << trial << " vocab " << vocab << " top_p " << config.top_p;
      ++num_close_calls;
    }
  }
  EXPECT_LE(num_close_calls, 1);
}

TEST(RandomSampling, TemperatureOneMatchesTheDistribution) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, -2.5f};
  const auto probs = softmax(logits);
  const auto counts = draw_counts(logits, {}, 42);
  EXPECT_LT(chi_square(counts, probs, kNumDraws), chi_square_critical_0001(7));
}

TEST(RandomSampling, TemperatureScalingMatchesSoftmaxOfScaledLogits) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f};
  for (const float temperature : {0.5f, 2.0f}) {
    const auto probs = softmax(logits, temperature);
    const auto counts = draw_counts(logits, {.temperature = temperature}, 7);
    EXPECT_LT(chi_square(counts, probs, kNumDraws), chi_square_critical_0001(5))
        << "temperature " << temperature;
    // And it is not the T = 1 distribution.
    EXPECT_GT(chi_square(counts, softmax(logits), kNumDraws), 100.0)
        << "temperature " << temperature;
  }
}

TEST(RandomSampling, TopPTruncationMatchesTheRenormalizedDistribution) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, -2.5f};
  const RandomSamplingConfig config{.top_p = 0.8f};
  const Reference ref = reference_filter(logits, config);
  ASSERT_EQ(num_nonzero(ref.probs), 4);  // 2.0, 1.1, 0.9, 0.3
  const auto counts = draw_counts(logits, config, 99);
  EXPECT_LT(chi_square(counts, ref.probs, kNumDraws), chi_square_critical_0001(3));
}

TEST(RandomSampling, TopKAndMinPMatchTheRenormalizedDistribution) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, -2.5f};
  for (const RandomSamplingConfig config :
       {RandomSamplingConfig{.top_k = 3}, RandomSamplingConfig{.temperature = 0.7f, .min_p = 0.1f},
        RandomSamplingConfig{.temperature = 1.5f, .top_k = 5, .top_p = 0.7f}}) {
    const Reference ref = reference_filter(logits, config);
    const auto counts = draw_counts(logits, config, 5);
    EXPECT_LT(chi_square(counts, ref.probs, kNumDraws),
              chi_square_critical_0001(num_nonzero(ref.probs) - 1))
        << "top_k " << config.top_k << " min_p " << config.min_p << " top_p " << config.top_p;
  }
}

TEST(RandomSampling, LargeVocabularyDrawFollowsTheDistribution) {
  // 50k random logits, bucketed into 10 bins of equal expected mass: exercises block skipping.
  auto logits = random_logits(50000, 3, 2.0f);
  const auto probs = softmax(logits);
  std::vector<int64_t> bin_of_token(logits.size());
  std::vector<double> bin_probs(10, 0.0);
  double acc = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    bin_of_token[i] = std::min<int64_t>(9, static_cast<int64_t>(acc * 10));
    bin_probs[bin_of_token[i]] += probs[i];
    acc += probs[i];
  }
  const auto counts = draw_counts(logits, {}, 11);
  std::vector<int64_t> bin_counts(10, 0);
  for (size_t i = 0; i < counts.size(); ++i) bin_counts[bin_of_token[i]] += counts[i];
  EXPECT_LT(chi_square(bin_counts, bin_probs, kNumDraws), chi_square_critical_0001(9));
}

}  // namespace
}  // namespace vellum::sampling
