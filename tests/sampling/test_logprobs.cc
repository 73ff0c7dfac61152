// Logprob helpers and prompt logprobs, against double-precision log-softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/logprobs.h"
#include "sampling_test_util.h"
#include "vellum/status.h"

namespace vellum::sampling {
namespace {

using testing::random_logits;
using testing::softmax;

TEST(Logprobs, LogSumExpIsMaxShifted) {
  const std::vector<float> row = {1000.0f, 1000.0f, -std::numeric_limits<float>::infinity()};
  EXPECT_NEAR(log_sum_exp(row.data(), 3), 1000.0 + std::log(2.0), 1e-4);
  const std::vector<float> masked(4, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(log_sum_exp(masked.data(), 4), -std::numeric_limits<double>::infinity());
}

TEST(Logprobs, TopKIdsBreakTiesByLowerId) {
  const std::vector<float> row = {1.0f, 5.0f, 3.0f, 5.0f, 3.0f, 0.0f};
  LogprobsWorkspace ws;
  std::vector<int32_t> ids(4);
  top_k_ids(row.data(), 6, 4, ids.data(), &ws);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 2, 4}));
}

TEST(Logprobs, TopKIdsAgreeForSmallAndLargeK) {
  // k <= 64 uses insertion, larger k partial_sort: the first 64 ids must agree.
  const auto row = random_logits(5000, 17);
  LogprobsWorkspace ws;
  std::vector<int32_t> small(64), large(500);
  top_k_ids(row.data(), 5000, 64, small.data(), &ws);
  top_k_ids(row.data(), 5000, 500, large.data(), &ws);
  EXPECT_EQ(small, std::vector<int32_t>(large.begin(), large.begin() + 64));
  for (size_t j = 1; j < large.size(); ++j) EXPECT_GE(row[large[j - 1]], row[large[j]]);
}

TEST(Logprobs, PromptLogprobsGiveTargetLogprobRankAndTopK) {
  constexpr int64_t kVocab = 1000;
  constexpr int64_t kPositions = 3;
  std::vector<float> logits;
  std::vector<std::vector<float>> rows;
  for (int64_t p = 0; p < kPositions; ++p) {
    rows.push_back(random_logits(kVocab, 100 + p));
    logits.insert(logits.end(), rows.back().begin(), rows.back().end());
  }
  const std::vector<int32_t> targets = {5, 999, 0};
  LogprobsLists out;
  compute_prompt_logprobs(logits.data(), kPositions, kVocab, targets, 2, &out);
  ASSERT_EQ(out.num_rows(), kPositions);
  for (int64_t p = 0; p < kPositions; ++p) {
    const auto probs = softmax(rows[p]);
    ASSERT_EQ(out.row_size(p), 3);
    const auto ids = out.row_token_ids(p);
    const auto lps = out.row_logprobs(p);
    EXPECT_EQ(ids[0], targets[p]);
    int64_t rank = 0;
    for (double q : probs) rank += q >= probs[targets[p]];
    EXPECT_EQ(out.ranks[p], rank);
    const int64_t best = std::max_element(probs.begin(), probs.end()) - probs.begin();
    EXPECT_EQ(ids[1], best);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(lps[j], std::log(probs[ids[j]]), 2e-5);
  }
  EXPECT_THROW(compute_prompt_logprobs(logits.data(), kPositions, kVocab,
                                       std::vector<int32_t>{1, 2, 1000}, 0, &out),
               Error);
}

}  // namespace
}  // namespace vellum::sampling
