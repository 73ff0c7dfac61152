// The Sampler end to end: each parameter's effect on the real stories260K logits (or synthetic
// rows where exact expectations are easier), logprobs, and seeded determinism inside a batch.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include "sampling/sampler.h"
#include "sampling/vec_math.h"
#include "sampling_test_util.h"
#include "vellum/status.h"

namespace vellum::sampling {
namespace {

using testing::chi_square;
using testing::chi_square_critical_0001;
using testing::random_logits;
using testing::softmax;

// Samples one row `num_draws` times (fresh copy of the logits each time) and returns the tokens.
std::vector<int32_t> sample_repeatedly(const std::vector<float>& logits, const SamplingParams& p,
                                       int num_draws, uint64_t seed,
                                       std::span<const int32_t> output_token_ids = {},
                                       int32_t eos_token_id = -1) {
  Sampler sampler({.num_threads = 1});
  SamplingState state(static_cast<int64_t>(seed));
  std::vector<int32_t> tokens;
  SamplerOutput out;
  for (int i = 0; i < num_draws; ++i) {
    std::vector<float> row = logits;
    SamplingRow sr{.params = &p,
                   .state = &state,
                   .output_token_ids = output_token_ids,
                   .eos_token_id = eos_token_id};
    sampler.sample(row.data(), 1, static_cast<int64_t>(logits.size()), std::span(&sr, 1), &out);
    tokens.push_back(out.sampled_token_ids[0]);
  }
  return tokens;
}

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0;
  return p;
}

TEST(Sampler, GreedyTakesTheArgmaxOfRealLogits) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  EXPECT_EQ(sample_repeatedly(real.logits, greedy_params(), 1, 0)[0], real.argmax);
}

TEST(Sampler, TopKOneEqualsGreedyOnRealLogits) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p;
  p.top_k = 1;
  p.temperature = 1.5;
  for (int32_t token : sample_repeatedly(real.logits, p, 100, 3)) EXPECT_EQ(token, real.argmax);
}

TEST(Sampler, TopPNearZeroEqualsGreedyOnRealLogits) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p;
  p.top_p = 1e-6;
  p.temperature = 2.0;
  for (int32_t token : sample_repeatedly(real.logits, p, 100, 4)) EXPECT_EQ(token, real.argmax);
}

TEST(Sampler, MinPKeepsOnlyTokensAboveMinPTimesMaxOnRealLogits) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p;
  p.min_p = 0.02;
  const auto probs = softmax(real.logits);
  const double max_prob = *std::max_element(probs.begin(), probs.end());
  std::set<int32_t> allowed;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] >= 0.02 * max_prob) allowed.insert(static_cast<int32_t>(i));
  }
  ASSERT_GE(allowed.size(), 2u);  // 432 and 383 on this row
  std::set<int32_t> seen;
  for (int32_t token : sample_repeatedly(real.logits, p, 2000, 5)) {
    EXPECT_TRUE(allowed.count(token)) << "token " << token << " has prob " << probs[token];
    seen.insert(token);
  }
  EXPECT_EQ(seen, allowed);
}

TEST(Sampler, LogitBiasOfPlus100ForcesAToken) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p;
  p.logit_bias = {{77, 100.0f}};
  for (int32_t token : sample_repeatedly(real.logits, p, 200, 6)) EXPECT_EQ(token, 77);
  SamplingParams g = greedy_params();
  g.logit_bias = {{real.argmax, -100.0f}};
  EXPECT_NE(sample_repeatedly(real.logits, g, 1, 0)[0], real.argmax);
}

TEST(Sampler, AllowedTokenIdsRestrictOutput) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p;
  p.temperature = 3.0;  // flat enough that every allowed id shows up
  p.allowed_token_ids = std::vector<int32_t>{10, 20, 30};
  std::set<int32_t> seen;
  for (int32_t token : sample_repeatedly(real.logits, p, 1000, 7)) seen.insert(token);
  EXPECT_EQ(seen, (std::set<int32_t>{10, 20, 30}));
  SamplingParams g = greedy_params();
  g.allowed_token_ids = std::vector<int32_t>{5, real.argmax};
  EXPECT_EQ(sample_repeatedly(real.logits, g, 1, 0)[0], real.argmax);
}

// Structured outputs: the row's token bitmask comes first, before logit bias (so a +100 bias on a
// masked token cannot bring it back), and logprobs see the masked logits.
TEST(Sampler, TokenBitmaskRestrictsOutputBeforeBiasAndLogprobs) {
  std::vector<float> logits(100, 0.0f);
  SamplingParams p;
  p.temperature = 1.0;
  p.logit_bias = {{50, 100.0f}};
  p.logprobs = 2;
  std::vector<uint64_t> mask(2, 0);
  for (int id : {3, 70, 71}) mask[id / 64] |= uint64_t{1} << (id % 64);
  Sampler sampler({.num_threads = 1});
  SamplingState state(int64_t{5});
  std::set<int32_t> seen;
  SamplerOutput out;
  for (int i = 0; i < 300; ++i) {
    std::vector<float> row = logits;
    SamplingRow sr{.params = &p, .state = &state, .allowed_token_mask = mask};
    sampler.sample(row.data(), 1, 100, std::span(&sr, 1), &out);
    seen.insert(out.sampled_token_ids[0]);
    // Entry 0 is the sampled token, uniformly log(1/3) among the three allowed.
    EXPECT_NEAR(out.logprobs.row_logprobs(0)[0], std::log(1.0f / 3.0f), 1e-5);
  }
  EXPECT_EQ(seen, (std::set<int32_t>{3, 70, 71}));
}

TEST(Sampler, BadWordsNeverAppear) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  // The two most likely tokens are 432 and 383: ban 432 outright and 383 after "5 9".
  SamplingParams p;
  p.temperature = 1.0;
  p.bad_words_token_ids = {{432}, {5, 9, 383}};
  const std::vector<int32_t> history = {1, 5, 9};
  for (int32_t token : sample_repeatedly(real.logits, p, 2000, 8, history)) {
    EXPECT_NE(token, 432);
    EXPECT_NE(token, 383);
  }
  // Without the matching prefix, 383 is allowed (and then the most likely).
  SamplingParams g = greedy_params();
  g.bad_words_token_ids = p.bad_words_token_ids;
  EXPECT_EQ(sample_repeatedly(real.logits, g, 1, 0, std::vector<int32_t>{9, 5})[0], 383);
}

TEST(Sampler, MinTokensSuppressesEosAndStopIds) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p = greedy_params();
  p.min_tokens = 3;
  p.stop_token_ids = {432};
  p.logit_bias = {{2, 50.0f}};  // make EOS (2) the argmax
  const std::vector<int32_t> two = {1, 1};
  const int32_t token = sample_repeatedly(real.logits, p, 1, 0, two, /*eos_token_id=*/2)[0];
  EXPECT_NE(token, 2);
  EXPECT_NE(token, 432);
  EXPECT_EQ(token, 383);
  const std::vector<int32_t> three = {1, 1, 1};
  EXPECT_EQ(sample_repeatedly(real.logits, p, 1, 0, three, 2)[0], 2);
}

// Greedy after penalties equals the argmax of the logits processed by the spec's formulas.
TEST(Sampler, PenaltiesChangeTheChoiceAsTheFormulasSay) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  std::mt19937_64 rng(21);
  int num_changed = 0;
  for (int trial = 0; trial < 200; ++trial) {
    SamplingParams p = greedy_params();
    p.presence_penalty = std::uniform_real_distribution<double>(-2, 2)(rng);
    p.frequency_penalty = std::uniform_real_distribution<double>(-2, 2)(rng);
    p.repetition_penalty = std::uniform_real_distribution<double>(0.5, 3)(rng);
    std::vector<int32_t> output;
    for (int i = 0; i < 6; ++i)
      output.push_back(rng() % 2 ? 432 : static_cast<int32_t>(rng() % 512));
    std::vector<float> expected = real.logits;
    std::set<int32_t> seen(real.prompt_token_ids.begin(), real.prompt_token_ids.end());
    seen.insert(output.begin(), output.end());
    for (int32_t id : seen) {
      float& l = expected[id];
      l = l > 0 ? l / static_cast<float>(p.repetition_penalty)
                : l * static_cast<float>(p.repetition_penalty);
      const auto count = std::count(output.begin(), output.end(), id);
      l -= static_cast<float>(p.frequency_penalty) * static_cast<float>(count);
      l -= static_cast<float>(p.presence_penalty) * (count > 0 ? 1.0f : 0.0f);
    }
    const int64_t want = row_argmax(expected.data(), expected.size());
    Sampler sampler({.num_threads = 1});
    SamplerOutput out;
    std::vector<float> row = real.logits;
    SamplingRow sr{
        .params = &p, .prompt_token_ids = real.prompt_token_ids, .output_token_ids = output};
    sampler.sample(row.data(), 1, 512, std::span(&sr, 1), &out);
    EXPECT_EQ(out.sampled_token_ids[0], want) << "trial " << trial;
    num_changed += want != real.argmax;
  }
  EXPECT_GT(num_changed, 20);  // the penalties did move the choice
}

TEST(Sampler, TemperatureOneMatchesTheDistributionEndToEnd) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, -2.5f};
  SamplingParams p;
  const auto tokens = sample_repeatedly(logits, p, 20000, 2024);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int32_t t : tokens) ++counts[t];
  EXPECT_LT(chi_square(counts, softmax(logits), 20000), chi_square_critical_0001(7));
}

// A seeded request gives the same tokens alone and inside a batch of 32 unrelated requests.
TEST(Sampler, SeededRequestIsDeterministicWhateverTheBatch) {
  constexpr int64_t kVocab = 4096;
  constexpr int kSteps = 12;
  SamplingParams target;
  target.seed = 1234;
  target.temperature = 0.9;
  target.top_p = 0.95;
  target.top_k = 200;
  target.presence_penalty = 0.3;

  auto run = [&](int batch_size, uint64_t batch_seed) {
    std::mt19937_64 rng(batch_seed);
    std::vector<SamplingParams> params(batch_size);
    std::vector<SamplingState> states;
    std::vector<std::vector<int32_t>> outputs(batch_size);
    const int target_row = batch_size / 2;
    for (int b = 0; b < batch_size; ++b) {
      if (b == target_row) {
        params[b] = target;
      } else {
        params[b].temperature = (rng() % 4 == 0) ? 0.0 : 0.5 + (rng() % 100) / 50.0;
        params[b].top_p = (rng() % 2) ? 0.5 : 1.0;
        params[b].top_k = static_cast<int64_t>(rng() % 50);
        params[b].frequency_penalty = (rng() % 2) ? 0.5 : 0.0;
        if (rng() % 2) params[b].seed = static_cast<int64_t>(rng() % 1000);
        if (rng() % 3 == 0) params[b].logprobs = 3;
      }
      states.emplace_back(params[b].seed);
    }
    Sampler sampler;  // OpenMP default threads
    SamplerOutput out;
    std::vector<int32_t> target_tokens;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> logits;
      for (int b = 0; b < batch_size; ++b) {
        // The target's logits depend only on its step; the others' on the batch seed.
        const auto row = random_logits(kVocab, b == target_row ? 1000 + step : rng(), 2.0f);
        logits.insert(logits.end(), row.begin(), row.end());
      }
      std::vector<SamplingRow> rows(batch_size);
      for (int b = 0; b < batch_size; ++b) {
        rows[b] = {.params = &params[b], .state = &states[b], .output_token_ids = outputs[b]};
      }
      sampler.sample(logits.data(), batch_size, kVocab, rows, &out);
      for (int b = 0; b < batch_size; ++b) outputs[b].push_back(out.sampled_token_ids[b]);
      target_tokens.push_back(out.sampled_token_ids[target_row]);
    }
    return target_tokens;
  };
  const auto alone = run(1, 0);
  EXPECT_EQ(run(32, 1), alone);
  EXPECT_EQ(run(32, 2), alone);
  target.seed = 4321;
  EXPECT_NE(run(1, 0), alone);  // the seed matters
}

TEST(Sampler, LogprobsComeFromRawLogitsAndMatchLlamaCpp) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  // llama.cpp's top-5 logprobs at the last prompt position (greedy.json, step 0).
  const std::vector<std::pair<int32_t, float>> top5 = {
      {432, -0.031703f}, {383, -3.549841f}, {322, -8.12145f}, {353, -8.243811f}, {323, -8.696856f}};
  SamplingParams p = greedy_params();
  p.logprobs = 5;
  p.presence_penalty = 1.0;  // processors must not change the reported logprobs
  Sampler sampler;
  SamplerOutput out;
  std::vector<float> row = real.logits;
  const std::vector<int32_t> output = {432};
  SamplingRow sr{.params = &p, .output_token_ids = output};
  sampler.sample(row.data(), 1, 512, std::span(&sr, 1), &out);
  ASSERT_EQ(out.logprobs.row_size(0), 6);
  const auto ids = out.logprobs.row_token_ids(0);
  const auto lps = out.logprobs.row_logprobs(0);
  EXPECT_EQ(ids[0], out.sampled_token_ids[0]);
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(ids[j + 1], top5[j].first) << "rank " << j;
    EXPECT_NEAR(lps[j + 1], top5[j].second, 1e-4) << "rank " << j;
  }
  // The sampled token is still the raw argmax here (432 - 1.0 > 383's logit), rank 1.
  EXPECT_EQ(ids[0], 432);
  EXPECT_EQ(out.logprobs.ranks[0], 1);
  EXPECT_NEAR(lps[0], top5[0].second, 1e-4);
}

TEST(Sampler, LogprobsOfAForcedTokenAreItsRawLogprobAndRank) {
  VELLUM_REQUIRE_STORIES_LOGITS(real);
  SamplingParams p;
  p.logit_bias = {{77, 100.0f}};
  p.logprobs = 0;
  const auto probs = softmax(real.logits);
  int64_t expected_rank = 0;
  for (double q : probs) expected_rank += q >= probs[77];
  Sampler sampler;
  SamplerOutput out;
  SamplingState state(int64_t{5});
  std::vector<float> row = real.logits;
  SamplingRow sr{.params = &p, .state = &state};
  sampler.sample(row.data(), 1, 512, std::span(&sr, 1), &out);
  ASSERT_EQ(out.logprobs.row_size(0), 1);
  EXPECT_EQ(out.sampled_token_ids[0], 77);
  EXPECT_NEAR(out.logprobs.row_logprobs(0)[0], std::log(probs[77]), 1e-4);
  EXPECT_EQ(out.logprobs.ranks[0], expected_rank);
}

TEST(Sampler, WholeVocabularyLogprobsAndListedIds) {
  const auto logits = random_logits(300, 9);
  SamplingParams all = greedy_params();
  all.logprobs = -1;
  SamplingParams listed = greedy_params();
  listed.logprob_token_ids = std::vector<int32_t>{4, 100, 7};
  SamplingParams none = greedy_params();
  std::vector<float> batch;
  for (int i = 0; i < 3; ++i) batch.insert(batch.end(), logits.begin(), logits.end());
  std::vector<SamplingRow> rows = {{.params = &all}, {.params = &none}, {.params = &listed}};
  Sampler sampler;
  SamplerOutput out;
  sampler.sample(batch.data(), 3, 300, rows, &out);
  ASSERT_EQ(out.logprobs.row_size(0), 301);
  EXPECT_EQ(out.logprobs.row_size(1), 0);
  EXPECT_EQ(out.logprobs.ranks[1], 0);
  ASSERT_EQ(out.logprobs.row_size(2), 4);
  const auto probs = softmax(logits);
  double total = 0.0;
  const auto lps = out.logprobs.row_logprobs(0);
  for (size_t j = 1; j < lps.size(); ++j) {
    total += std::exp(static_cast<double>(lps[j]));
    if (j > 1) {
      EXPECT_LE(lps[j], lps[j - 1]);
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
  const auto ids2 = out.logprobs.row_token_ids(2);
  EXPECT_EQ(std::vector<int32_t>(ids2.begin() + 1, ids2.end()), (std::vector<int32_t>{4, 100, 7}));
  for (int j = 1; j < 4; ++j) {
    EXPECT_NEAR(out.logprobs.row_logprobs(2)[j], std::log(probs[ids2[j]]), 1e-5);
  }
}

TEST(Sampler, RejectsOutOfVocabularyIds) {
  std::vector<float> row(10, 0.0f);
  SamplingParams p = greedy_params();
  p.allowed_token_ids = std::vector<int32_t>{3, 10};
  SamplingRow sr{.params = &p};
  Sampler sampler;
  SamplerOutput out;
  EXPECT_THROW(sampler.sample(row.data(), 1, 10, std::span(&sr, 1), &out), Error);
  SamplingParams q;  // random sampling without a state
  SamplingRow sq{.params = &q};
  EXPECT_THROW(sampler.sample(row.data(), 1, 10, std::span(&sq, 1), &out), Error);
}

}  // namespace
}  // namespace vellum::sampling
