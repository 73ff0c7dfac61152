// The processors that run before selection, checked against the spec's formulas on synthetic rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/logits_processors.h"
#include "sampling_test_util.h"

namespace vellum::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(AllowedTokenMask, KeepsOnlyTheListedIds) {
  std::vector<float> row = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  std::vector<float> saved;
  const std::vector<int32_t> allowed = {4, 1, 1};
  apply_allowed_token_mask(row.data(), 6, allowed, &saved);
  EXPECT_EQ(row, (std::vector<float>{kNegInf, 2.0f, kNegInf, kNegInf, 5.0f, kNegInf}));
}

TEST(TokenBitmask, KeepsTheSetBitsAcrossWordsAndMasksIdsPastTheMask) {
  // 130 logits, a mask of two words (ids 0..127): bits 0, 63, 64 and 127 set.
  std::vector<float> row(130, 1.0f);
  const std::vector<uint64_t> mask = {(uint64_t{1} << 63) | 1u, (uint64_t{1} << 63) | 1u};
  apply_token_bitmask(row.data(), 130, mask);
  for (int i = 0; i < 130; ++i) {
    const bool kept = i == 0 || i == 63 || i == 64 || i == 127;
    EXPECT_EQ(row[i], kept ? 1.0f : kNegInf) << i;
  }
}

TEST(BadWords, BansLastTokenOnlyWhenThePrefixMatchesTheOutput) {
  const std::vector<std::vector<int32_t>> words = {{7}, {3, 4, 5}, {1, 2}};
  std::vector<float> row(10, 0.0f);
  // One-token word: always banned. {3,4,5}: output ends with 3,4 -> ban 5. {1,2}: no match.
  const std::vector<int32_t> output = {9, 3, 4};
  apply_bad_words(row.data(), words, output);
  for (int i = 0; i < 10; ++i) {
    const bool banned = i == 7 || i == 5;
    EXPECT_EQ(row[i], banned ? kNegInf : 0.0f) << "token " << i;
  }
  // Prefix longer than the output: not applicable yet.
  std::vector<float> row2(10, 0.0f);
  apply_bad_words(row2.data(), words, std::vector<int32_t>{4});
  EXPECT_EQ(row2[5], 0.0f);
  EXPECT_EQ(row2[7], kNegInf);
  // Matches only the end of the output, not earlier positions.
  std::vector<float> row3(10, 0.0f);
  apply_bad_words(row3.data(), words, std::vector<int32_t>{1, 8});
  EXPECT_EQ(row3[2], 0.0f);
  apply_bad_words(row3.data(), words, std::vector<int32_t>{8, 1});
  EXPECT_EQ(row3[2], kNegInf);
}

TEST(MinTokens, MasksStopIdsExtraStopIdsAndEosUntilReached) {
  const std::vector<int32_t> stop_ids = {3};
  const std::vector<int32_t> extra_ids = {1};
  std::vector<float> row(6, 1.0f);
  apply_min_tokens(row.data(), /*num_output_tokens=*/2, /*min_tokens=*/3, stop_ids, extra_ids,
                   /*eos_token_id=*/5);
  EXPECT_EQ(row, (std::vector<float>{1, kNegInf, 1, kNegInf, 1, kNegInf}));
  std::vector<float> row2(6, 1.0f);
  apply_min_tokens(row2.data(), 3, 3, stop_ids, extra_ids, 5);
  EXPECT_EQ(row2, std::vector<float>(6, 1.0f));
}

TEST(LogitBias, AddsTheBias) {
  std::vector<float> row = {1.0f, 2.0f, 3.0f};
  apply_logit_bias(row.data(), {{0, 100.0f}, {2, -0.5f}});
  EXPECT_EQ(row, (std::vector<float>{101.0f, 2.0f, 2.5f}));
}

TEST(Penalties, FollowVllmsFormulas) {
  const std::vector<float> original = {2.0f, -1.0f, 3.0f, -2.0f, 0.5f, 4.0f, 0.0f};
  const std::vector<int32_t> prompt = {0, 1, 1};
  const std::vector<int32_t> output = {2, 2, 3, 2};
  const PenaltyConfig config{
      .presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 2.0f};
  std::vector<float> row = original;
  PenaltyWorkspace ws;
  apply_penalties(row.data(), 7, config, prompt, output, &ws);
  // Reference: repetition on prompt ∪ output, then frequency × count, then presence.
  std::vector<float> expected = original;
  for (int id : {0, 1, 2, 3}) {
    expected[id] = expected[id] > 0 ? expected[id] / 2.0f : expected[id] * 2.0f;
  }
  expected[2] -= 0.25f * 3 + 0.5f;
  expected[3] -= 0.25f * 1 + 0.5f;
  EXPECT_EQ(row, expected);
  // The workspace is left clean: a second call with no history changes nothing.
  std::vector<float> row2 = original;
  apply_penalties(row2.data(), 7, config, {}, {}, &ws);
  EXPECT_EQ(row2, original);
}

TEST(Penalties, RepetitionPenaltyOneLeavesPromptTokensAlone) {
  const std::vector<float> original = {2.0f, -1.0f, 3.0f};
  std::vector<float> row = original;
  PenaltyWorkspace ws;
  apply_penalties(row.data(), 3, {.presence_penalty = -1.0f}, std::vector<int32_t>{0},
                  std::vector<int32_t>{1}, &ws);
  EXPECT_EQ(row, (std::vector<float>{2.0f, 0.0f, 3.0f}));
}

}  // namespace
}  // namespace vellum::sampling
