// vLLM's beam search bookkeeping: score formula, candidate selection, EOS handling, final pick.
#include <gtest/gtest.h>

#include <cmath>

#include "sampling/beam_search.h"

namespace vellum::sampling {
namespace {

// Logprobs lists with the given (token, logprob) entries per row.
LogprobsLists make_lists(const std::vector<std::vector<std::pair<int32_t, float>>>& rows) {
  LogprobsLists lists;
  std::vector<int64_t> sizes;
  for (const auto& r : rows) sizes.push_back(static_cast<int64_t>(r.size()));
  lists.resize(sizes);
  for (size_t b = 0; b < rows.size(); ++b) {
    for (size_t j = 0; j < rows[b].size(); ++j) {
      lists.token_ids[lists.offsets[b] + j] = rows[b][j].first;
      lists.logprobs[lists.offsets[b] + j] = rows[b][j].second;
    }
  }
  return lists;
}

TEST(BeamSearch, ScoreIsLengthPenalizedAndIgnoresTrailingEos) {
  EXPECT_DOUBLE_EQ(beam_search_score(10, -5.0, false, 1.0), -0.5);
  EXPECT_DOUBLE_EQ(beam_search_score(10, -5.0, true, 1.0), -5.0 / 9.0);
  EXPECT_DOUBLE_EQ(beam_search_score(4, -8.0, false, 2.0), -0.5);
  EXPECT_DOUBLE_EQ(beam_search_score(4, -8.0, false, 0.0), -8.0);
}

TEST(BeamSearch, StepKeepsBestWidthByScoreAndCompletesEos) {
  const std::vector<BeamState> beams = {{-1.0, 5}, {-2.0, 5}};
  // Beam 0 proposes 7 (sampled, listed again in its top-k), 8 and EOS (2); beam 1 proposes 9, 7.
  const auto lists =
      make_lists({{{7, -0.1f}, {7, -0.1f}, {8, -0.5f}, {2, -0.2f}}, {{9, -0.05f}, {7, -3.0f}}});
  const BeamSearchConfig config{.beam_width = 2, .length_penalty = 1.0, .eos_token_id = 2};
  const BeamSearchStep step = beam_search_step(beams, lists, config);
  ASSERT_EQ(step.completed.size(), 1u);
  EXPECT_EQ(step.completed[0].parent_beam, 0);
  EXPECT_EQ(step.completed[0].token_id, 2);
  EXPECT_NEAR(step.completed[0].score, -1.2 / 5.0, 1e-6);  // EOS not counted in the length
  ASSERT_EQ(step.next_beams.size(), 2u);
  // Scores: (0,7) -1.1/6, (0,8) -1.5/6, (1,9) -2.05/6, (1,7) -5/6.
  EXPECT_EQ(step.next_beams[0].parent_beam, 0);
  EXPECT_EQ(step.next_beams[0].token_id, 7);
  EXPECT_NEAR(step.next_beams[0].cum_logprob, -1.1, 1e-6);
  EXPECT_EQ(step.next_beams[0].seq_len, 6);
  EXPECT_EQ(step.next_beams[1].parent_beam, 0);
  EXPECT_EQ(step.next_beams[1].token_id, 8);
}

TEST(BeamSearch, IgnoreEosKeepsEosBeamsAlive) {
  const std::vector<BeamState> beams = {{0.0, 3}};
  const auto lists = make_lists({{{2, -0.1f}, {5, -0.2f}}});
  const BeamSearchConfig config{.beam_width = 2, .eos_token_id = 2, .ignore_eos = true};
  const BeamSearchStep step = beam_search_step(beams, lists, config);
  EXPECT_TRUE(step.completed.empty());
  ASSERT_EQ(step.next_beams.size(), 2u);
  // The EOS beam's score still divides by the length without the EOS (vLLM does the same).
  EXPECT_EQ(step.next_beams[0].token_id, 2);
  EXPECT_NEAR(step.next_beams[0].score, -0.1 / 3.0, 1e-6);
}

TEST(BeamSearch, TiesKeepInsertionOrder) {
  const std::vector<BeamState> beams = {{0.0, 1}, {0.0, 1}};
  const auto lists = make_lists({{{4, -1.0f}}, {{3, -1.0f}}});
  const BeamSearchStep step = beam_search_step(beams, lists, {.beam_width = 1});
  ASSERT_EQ(step.next_beams.size(), 1u);
  EXPECT_EQ(step.next_beams[0].parent_beam, 0);
}

TEST(BeamSearch, StepFromLogitsUsesTopTwoWidthPerBeam) {
  // Beam width 1: each beam proposes its top 2 tokens by logprob.
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f};
  const std::vector<BeamState> beams = {{-0.5, 2}};
  const BeamSearchStep step =
      beam_search_step_from_logits(beams, logits.data(), 4, {.beam_width = 1, .eos_token_id = 3});
  double lse = 0.0;
  for (float l : logits) lse += std::exp(l);
  lse = std::log(lse);
  ASSERT_EQ(step.next_beams.size(), 1u);
  EXPECT_EQ(step.next_beams[0].token_id, 1);
  EXPECT_NEAR(step.next_beams[0].cum_logprob, -0.5 + 3.0 - lse, 1e-5);
  ASSERT_EQ(step.completed.size(), 1u);  // token 3 (second best) is EOS
  EXPECT_EQ(step.completed[0].token_id, 3);
}

TEST(BeamSearch, FinalizeSortsCompletedAndLiveByScore) {
  std::vector<BeamCandidate> completed = {{.token_id = 2, .score = -0.3},
                                          {.token_id = 2, .score = -0.9}};
  const std::vector<BeamCandidate> live = {{.token_id = 5, .score = -0.1},
                                           {.token_id = 6, .score = -0.3}};
  const auto best = finalize_beams(completed, live, 3);
  ASSERT_EQ(best.size(), 3u);
  EXPECT_EQ(best[0].token_id, 5);
  EXPECT_EQ(best[1].token_id, 2);  // tie at -0.3: the completed one came first
  EXPECT_EQ(best[2].token_id, 6);
}

}  // namespace
}  // namespace vellum::sampling
