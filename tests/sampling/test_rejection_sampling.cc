// Speculative decoding's rejection sampling (issue 36): the token a random row emits while
// verifying a one-hot draft follows the target distribution exactly, with the request's
// temperature, top-k, logit_bias and penalties applied as the normal sampler applies them. A
// chi-square test over many seeded draws at a fixed significance (p = 0.001), so a wrong
// acceptance or resampling rule fails it. Checked during development against a critical value of
// 22.5: resampling from the full distribution instead of the residual gave chi-square 8344 and
// 1506 on the first two drafts, accepting with probability 1.3 p gave 1490 and 180.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/random_sampling.h"
#include "sampling/sampler.h"
#include "sampling_test_util.h"

namespace vellum::sampling {
namespace {

using testing::chi_square;
using testing::chi_square_critical_0001;

constexpr int64_t kVocab = 10;
constexpr int64_t kDraws = 40000;

struct Target {
  std::vector<float> logits;  // raw
  SamplingParams params;
  std::vector<int32_t> outputs;  // the history the penalties see
};

Target make_target() {
  Target t;
  t.logits = testing::random_logits(kVocab, 17, 1.5f);
  t.params.temperature = 0.8;
  t.params.top_k = 7;
  t.params.logit_bias = {{3, 1.25f}, {6, -0.5f}};
  t.params.presence_penalty = 0.7;
  t.params.seed = 1;
  t.outputs = {2, 5, 5};
  return t;
}

// The target distribution computed here, independently of the sampler: bias, presence penalty,
// temperature softmax, then top-k renormalized.
std::vector<double> expected_probs(const Target& t) {
  std::vector<float> logits = t.logits;
  for (const auto& [id, bias] : t.params.logit_bias) logits[static_cast<size_t>(id)] += bias;
  std::vector<bool> seen(kVocab, false);
  for (int32_t id : t.outputs) seen[static_cast<size_t>(id)] = true;
  for (int64_t i = 0; i < kVocab; ++i) {
    if (seen[static_cast<size_t>(i)]) {
      logits[static_cast<size_t>(i)] -= static_cast<float>(t.params.presence_penalty);
    }
  }
  std::vector<double> probs = testing::softmax(logits, t.params.temperature);
  std::vector<double> sorted = probs;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  const double kth = sorted[static_cast<size_t>(t.params.top_k - 1)];
  double kept = 0.0;
  for (double& p : probs) {
    if (p < kth) p = 0.0;
    kept += p;
  }
  for (double& p : probs) p /= kept;
  return probs;
}

// Emitted tokens of kDraws verification rows, each with its own seed, drafting `draft`.
std::vector<int64_t> emitted_counts(const Target& t, int32_t draft, int64_t* num_accepted) {
  Sampler sampler(SamplerConfig{1});
  SamplerOutput out;
  std::vector<int64_t> counts(kVocab, 0);
  *num_accepted = 0;
  std::vector<float> row(kVocab);
  for (int64_t i = 0; i < kDraws; ++i) {
    SamplingState state(std::optional<int64_t>(1000 + i));
    SamplingRow r;
    r.params = &t.params;
    r.state = &state;
    r.output_token_ids = t.outputs;
    r.draft_token_id = draft;
    row = t.logits;
    std::vector<SamplingRow> rows = {r};
    sampler.sample(row.data(), 1, kVocab, rows, &out);
    ++counts[static_cast<size_t>(out.sampled_token_ids[0])];
    *num_accepted += out.sampled_token_ids[0] == draft;
  }
  return counts;
}

TEST(RejectionSampling, EmittedTokenFollowsTheTargetDistributionForEveryDraft) {
  Target t = make_target();
  t.params.normalize();
  const std::vector<double> probs = expected_probs(t);
  int64_t num_kept = 0;
  for (double p : probs) num_kept += p > 0.0;
  ASSERT_EQ(num_kept, 7);
  // A likely draft, an unlikely one, and one outside top-k (always rejected).
  std::vector<int32_t> drafts;
  std::vector<int32_t> order(kVocab);
  for (int32_t i = 0; i < kVocab; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  drafts = {order[0], order[5], order[9]};
  for (int32_t draft : drafts) {
    int64_t num_accepted = 0;
    const std::vector<int64_t> counts = emitted_counts(t, draft, &num_accepted);
    const double chi2 = chi_square(counts, probs, kDraws);
    EXPECT_LT(chi2, chi_square_critical_0001(num_kept - 1)) << "draft " << draft;
    // The draft is accepted with probability p(draft): its count is its acceptances.
    const double p = probs[static_cast<size_t>(draft)];
    const double sigma = std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(static_cast<double>(num_accepted) / kDraws, p, 4 * sigma + 1e-9)
        << "draft " << draft;
    EXPECT_EQ(num_accepted, counts[static_cast<size_t>(draft)]);
  }
}

TEST(RejectionSampling, ADraftWithAllTheMassIsAlwaysAccepted) {
  std::vector<float> row(kVocab, -INFINITY);
  row[4] = 0.0f;
  RandomSamplingWorkspace ws;
  for (double u : {0.0, 0.5, 0.999999}) {
    std::vector<float> copy = row;
    EXPECT_EQ(rejection_sample_row(copy.data(), kVocab, RandomSamplingConfig{}, 4, u, 0.3, &ws),
              4);
  }
  // A draft the target never picks is always replaced by one it does.
  std::vector<float> copy = row;
  EXPECT_EQ(rejection_sample_row(copy.data(), kVocab, RandomSamplingConfig{}, 2, 0.0, 0.7, &ws),
            4);
}

}  // namespace
}  // namespace vellum::sampling
