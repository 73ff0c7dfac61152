#include "benchserve/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "vellum/status.h"

namespace vellum::benchserve {
namespace {

TEST(RandomDatasetTest, BoundsFollowRangeRatio) {
  RandomDatasetConfig c;
  c.input_len = 100;
  c.output_len = 10;
  c.range_ratio = 0.25;
  const RandomLengthBounds b = random_length_bounds(c);
  EXPECT_EQ(b.input_low, 75);
  EXPECT_EQ(b.input_high, 125);
  EXPECT_EQ(b.output_low, 7);   // floor(7.5)
  EXPECT_EQ(b.output_high, 13);  // ceil(12.5)

  c.num_special_tokens = 1;  // vLLM: L_in_eff = input_len - num_special
  const RandomLengthBounds s = random_length_bounds(c);
  EXPECT_EQ(s.input_low, 74);   // floor(99 * 0.75)
  EXPECT_EQ(s.input_high, 124);  // ceil(99 * 1.25)

  c.output_len = 1;
  c.range_ratio = 0.5;
  EXPECT_EQ(random_length_bounds(c).output_low, 1);  // never 0 output tokens
}

TEST(RandomDatasetTest, RejectsBadConfigs) {
  RandomDatasetConfig c;
  c.range_ratio = 1.0;
  EXPECT_THROW(random_length_bounds(c), Error);
  c.range_ratio = -0.1;
  EXPECT_THROW(random_length_bounds(c), Error);
  c = RandomDatasetConfig{};
  c.input_len = 1;
  c.num_special_tokens = 1;  // every prompt would be empty
  EXPECT_THROW(random_length_bounds(c), Error);
  c.prefix_len = 2;  // ... unless there is a prefix
  EXPECT_NO_THROW(random_length_bounds(c));
  c = RandomDatasetConfig{};
  c.min_token_id = c.vocab_size;
  EXPECT_THROW(random_length_bounds(c), Error);
}

TEST(RandomDatasetTest, SampledLengthsStayInBoundsAndCoverThem) {
  RandomDatasetConfig c;
  c.num_prompts = 2000;
  c.input_len = 40;
  c.output_len = 20;
  c.range_ratio = 0.5;
  c.prefix_len = 7;
  c.vocab_size = 500;
  c.min_token_id = 3;
  const std::vector<SampleRequest> reqs = sample_random_requests(c);
  ASSERT_EQ(reqs.size(), 2000u);
  std::set<int64_t> inputs, outputs;
  for (const SampleRequest& r : reqs) {
    ASSERT_EQ(r.prompt_len, static_cast<int64_t>(r.prompt_token_ids.size()));
    const int64_t sampled = r.prompt_len - c.prefix_len;
    EXPECT_GE(sampled, 20);
    EXPECT_LE(sampled, 60);
    EXPECT_GE(r.expected_output_len, 10);
    EXPECT_LE(r.expected_output_len, 30);
    inputs.insert(sampled);
    outputs.insert(r.expected_output_len);
    for (const int32_t id : r.prompt_token_ids) {
      ASSERT_GE(id, 3);
      ASSERT_LT(id, 500);
    }
    // The shared prefix, then consecutive allowed ids (wrapping inside [3, 500)).
    EXPECT_TRUE(std::equal(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 7,
                           reqs[0].prompt_token_ids.begin()));
    for (int64_t t = c.prefix_len + 1; t < r.prompt_len; ++t) {
      const int32_t prev = r.prompt_token_ids[static_cast<size_t>(t - 1)];
      EXPECT_EQ(r.prompt_token_ids[static_cast<size_t>(t)], prev == 499 ? 3 : prev + 1);
    }
  }
  // Uniform integer ranges: with 2000 draws every value of [20, 60] and [10, 30] shows up.
  EXPECT_EQ(inputs.size(), 41u);
  EXPECT_EQ(outputs.size(), 21u);
}

TEST(RandomDatasetTest, ZeroRatioGivesExactLengthsAndSeedsReproduce) {
  RandomDatasetConfig c;
  c.num_prompts = 50;
  c.input_len = 32;
  c.output_len = 16;
  const auto a = sample_random_requests(c);
  for (const SampleRequest& r : a) {
    EXPECT_EQ(r.prompt_len, 32);
    EXPECT_EQ(r.expected_output_len, 16);
  }
  const auto b = sample_random_requests(c);
  c.seed = 1;
  const auto other = sample_random_requests(c);
  size_t num_different = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_token_ids, b[i].prompt_token_ids);
    num_different += a[i].prompt_token_ids != other[i].prompt_token_ids;
  }
  EXPECT_GT(num_different, 40u);
}

TEST(RandomDatasetTest, WordsPromptHasOneWordPerToken) {
  const std::string text = prompt_ids_to_words({0, 1, 2, 64});
  EXPECT_EQ(text, "the of and the");
}

}  // namespace
}  // namespace vellum::benchserve
