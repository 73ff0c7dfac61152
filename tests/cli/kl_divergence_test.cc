// The KL-divergence statistics of `bench kl-divergence` (src/cli/kl_divergence.cc) on logit rows
// whose distributions are known in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cli/kl_divergence.h"

namespace vellum::cli {
namespace {

TEST(KlDivergence, IdenticalRowsHaveNoDivergence) {
  const std::vector<float> logits = {1.0f, -2.0f, 0.5f, 3.0f};
  const TokenComparison c = compare_next_token(logits, logits, 2);
  EXPECT_NEAR(c.kl, 0.0, 1e-12);
  EXPECT_TRUE(c.same_top1);
  EXPECT_DOUBLE_EQ(c.nll_base, c.nll_test);
}

TEST(KlDivergence, TwoTokenDistributions) {
  // base (1/2, 1/2), test (3/4, 1/4): KL = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3).
  const std::vector<float> base = {0.0f, 0.0f};
  const std::vector<float> test = {static_cast<float>(std::log(3.0)), 0.0f};
  const TokenComparison c = compare_next_token(base, test, 1);
  EXPECT_NEAR(c.kl, 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_NEAR(c.nll_base, std::log(2.0), 1e-7);
  EXPECT_NEAR(c.nll_test, std::log(4.0), 1e-6);
  // The base's tie resolves to the first token, as the test's argmax.
  EXPECT_TRUE(c.same_top1);
  const std::vector<float> second_favoured = {0.0f, 1.0f};
  const TokenComparison swapped = compare_next_token(test, second_favoured, 0);
  EXPECT_FALSE(swapped.same_top1);
}

TEST(KlDivergence, AccumulatesMeansPercentilesAndAgreement) {
  KlDivergenceAccumulator acc;
  for (int i = 0; i <= 100; ++i) {
    acc.add({0.001 * i, i % 4 != 0, 1.0, 2.0});  // KL 0 .. 0.1, a quarter disagreeing
  }
  EXPECT_EQ(acc.count(), 101);
  EXPECT_NEAR(acc.mean_kl(), 0.05, 1e-12);
  EXPECT_NEAR(acc.kl_percentile(99.0), 0.099, 1e-12);
  EXPECT_NEAR(acc.kl_percentile(50.0), 0.05, 1e-12);
  EXPECT_NEAR(acc.top1_agreement(), 75.0 / 101.0, 1e-12);
  EXPECT_NEAR(acc.base().perplexity(), std::exp(1.0), 1e-9);
  EXPECT_NEAR(acc.test().perplexity(), std::exp(2.0), 1e-9);
}

TEST(KlDivergence, RefusesRowsOfDifferentVocabularies) {
  const std::vector<float> a = {0.0f, 1.0f};
  const std::vector<float> b = {0.0f, 1.0f, 2.0f};
  EXPECT_THROW(compare_next_token(a, b, 0), Error);
  EXPECT_THROW(compare_next_token(a, a, 2), Error);
}

}  // namespace
}  // namespace vellum::cli
