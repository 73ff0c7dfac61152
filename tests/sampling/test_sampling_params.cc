// Every validation rule of spec §4's table, with vLLM's message and the parameter it names.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "sampling/python_repr.h"
#include "vellum/sampling_params.h"

namespace vellum {
namespace {

struct Case {
  const char* name;
  std::function<void(SamplingParams&)> mutate;
  const char* param;
  const char* message;
};

void expect_error(const std::optional<SamplingParamError>& error, const Case& c) {
  ASSERT_TRUE(error.has_value()) << c.name << ": expected \"" << c.message << "\"";
  EXPECT_EQ(error->param, c.param) << c.name;
  EXPECT_EQ(error->message, c.message) << c.name;
}

TEST(SamplingParams, DefaultsAreVllms) {
  const SamplingParams p;
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.presence_penalty, 0.0);
  EXPECT_EQ(p.frequency_penalty, 0.0);
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_FALSE(p.prompt_logprobs.has_value());
  EXPECT_TRUE(p.skip_special_tokens);
  EXPECT_TRUE(p.spaces_between_special_tokens);
  EXPECT_FALSE(p.include_stop_str_in_output);
  EXPECT_EQ(p.output_kind, RequestOutputKind::kCumulative);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_FALSE(p.allowed_token_ids.has_value());
  EXPECT_TRUE(p.bad_words.empty());
  EXPECT_FALSE(p.use_beam_search);
  EXPECT_EQ(p.length_penalty, 1.0);
  EXPECT_FALSE(p.validate().has_value());
  EXPECT_FALSE(p.validate_for_model({.vocab_size = 512}).has_value());
}

TEST(SamplingParams, ValidateRejectsEachInvalidValueWithVllmsMessage) {
  const std::vector<Case> cases = {
      {"n=0", [](auto& p) { p.n = 0; }, "n", "n must be at least 1, got 0."},
      {"n too large", [](auto& p) { p.n = 16385; }, "n",
       "n must be at most 16384, got 16385. To increase this limit, set the "
       "VLLM_MAX_N_SEQUENCES environment variable."},
      {"presence", [](auto& p) { p.presence_penalty = 2.5; }, "presence_penalty",
       "presence_penalty must be in [-2, 2], got 2.5."},
      {"presence low", [](auto& p) { p.presence_penalty = -3; }, "presence_penalty",
       "presence_penalty must be in [-2, 2], got -3.0."},
      {"frequency", [](auto& p) { p.frequency_penalty = -2.01; }, "frequency_penalty",
       "frequency_penalty must be in [-2, 2], got -2.01."},
      {"repetition zero", [](auto& p) { p.repetition_penalty = 0.0; }, "repetition_penalty",
       "repetition_penalty must be greater than zero, got 0.0."},
      {"repetition inf", [](auto& p) { p.repetition_penalty = INFINITY; }, "repetition_penalty",
       "repetition_penalty must be a finite number, got inf."},
      {"temperature negative", [](auto& p) { p.temperature = -0.5; }, "temperature",
       "temperature must be non-negative, got -0.5."},
      {"temperature nan", [](auto& p) { p.temperature = NAN; }, "temperature",
       "temperature must be a finite number, got nan."},
      {"top_p zero", [](auto& p) { p.top_p = 0.0; }, "top_p", "top_p must be in (0, 1], got 0.0."},
      {"top_p above one", [](auto& p) { p.top_p = 1.5; }, "top_p",
       "top_p must be in (0, 1], got 1.5."},
      {"top_k", [](auto& p) { p.top_k = -2; }, "top_k",
       "top_k must be 0 (disable), or at least 1, got -2."},
      {"min_p", [](auto& p) { p.min_p = 1.1; }, "min_p", "min_p must be in [0, 1], got 1.1."},
      {"min_p negative", [](auto& p) { p.min_p = -0.1; }, "min_p",
       "min_p must be in [0, 1], got -0.1."},
      {"max_tokens", [](auto& p) { p.max_tokens = 0; }, "max_tokens",
       "max_tokens must be at least 1, got 0."},
      {"min_tokens negative", [](auto& p) { p.min_tokens = -1; }, "min_tokens",
       "min_tokens must be greater than or equal to 0, got -1."},
      {"min_tokens above max", [](auto& p) { p.min_tokens = 17; }, "min_tokens",
       "min_tokens must be less than or equal to max_tokens=16, got 17."},
      {"logprobs", [](auto& p) { p.logprobs = -2; }, "logprobs",
       "logprobs must be non-negative or -1, got -2."},
      {"prompt_logprobs", [](auto& p) { p.prompt_logprobs = -5; }, "prompt_logprobs",
       "prompt_logprobs must be non-negative or -1, got -5."},
      {"truncate_prompt_tokens", [](auto& p) { p.truncate_prompt_tokens = 0; },
       "truncate_prompt_tokens", "truncate_prompt_tokens must be an integer >= 1 or -1, got 0"},
      {"stop empty",
       [](auto& p) {
         p.stop = {"a", ""};
       },
       "stop", "stop cannot contain an empty string."},
      {"stop without detokenize",
       [](auto& p) {
         p.stop = {"x"};
         p.detokenize = false;
       },
       "stop",
       "stop strings are only supported when detokenize is True. Set detokenize=True to use "
       "stop."},
      {"bad_words empty",
       [](auto& p) {
         p.bad_words = {"foo", ""};
       },
       "bad_words", "bad_words cannot contain an empty string. Got bad_words=['foo', '']"},
      {"repetition_detection sizes",
       [](auto& p) {
         p.repetition_detection = RepetitionDetectionParams{2, 3, 2};
       },
       "repetition_detection",
       "max_pattern_size, min_pattern_size must be >=0, with min_pattern_size <= "
       "max_pattern_size. Set both to 0 to disable repetitive pattern detection."},
      {"repetition_detection count",
       [](auto& p) {
         p.repetition_detection = RepetitionDetectionParams{4, 1, 1};
       },
       "repetition_detection",
       "min_count must be >= 2 to detect repetitive patterns in engine output. If you do not "
       "wish to detect repetitive patterns, set max_pattern_size to 0."},
      {"greedy n>1",
       [](auto& p) {
         p.temperature = 0.0;
         p.n = 3;
       },
       "n", "n must be 1 when using greedy sampling, got 3."},
  };
  for (const auto& c : cases) {
    SamplingParams p;
    c.mutate(p);
    expect_error(p.validate(), c);
  }
}

TEST(SamplingParams, ValidateAcceptsBoundaryValues) {
  SamplingParams p;
  p.presence_penalty = -2.0;
  p.frequency_penalty = 2.0;
  p.repetition_penalty = 1e-3;
  p.temperature = 0.0;
  p.top_p = 1.0;
  p.top_k = -1;
  p.min_p = 1.0;
  p.max_tokens = std::nullopt;
  p.min_tokens = 1000;
  p.logprobs = -1;
  p.prompt_logprobs = 0;
  p.truncate_prompt_tokens = -1;
  p.repetition_detection = RepetitionDetectionParams{0, 0, 0};
  EXPECT_FALSE(p.validate().has_value());
  p.min_tokens = 16;
  p.max_tokens = 16;
  EXPECT_FALSE(p.validate().has_value());
  // Beam search uses n as the width with any temperature.
  p.use_beam_search = true;
  p.n = 4;
  EXPECT_FALSE(p.validate().has_value());
}

TEST(SamplingParams, TinyTemperatureIsRaisedNotGreedy) {
  SamplingParams p;
  p.temperature = 5e-6;  // vLLM raises (0, 0.01) to 0.01 before the greedy test
  p.n = 2;
  EXPECT_FALSE(p.is_greedy());
  EXPECT_EQ(p.sampling_type(), SamplingType::kRandom);
  EXPECT_FALSE(p.validate().has_value());
  p.normalize();
  EXPECT_EQ(p.temperature, kMinRandomTemperature);
  p.temperature = 0.0;
  EXPECT_TRUE(p.is_greedy());
}

TEST(SamplingParams, ValidateForModelChecksVocabularyAndMaxLogprobs) {
  const SamplingModelLimits limits{.vocab_size = 512, .max_logprobs = 20};
  const std::vector<Case> cases = {
      {"logprobs 21", [](auto& p) { p.logprobs = 21; }, "logprobs",
       "Requested sample logprobs of 21, which is greater than max allowed: 20"},
      {"logprobs -1", [](auto& p) { p.logprobs = -1; }, "logprobs",
       "Requested sample logprobs of 512, which is greater than max allowed: 20"},
      {"prompt_logprobs -1", [](auto& p) { p.prompt_logprobs = -1; }, "prompt_logprobs",
       "Requested prompt logprobs of 512, which is greater than max allowed: 20"},
      {"logprob_token_ids too many",
       [](auto& p) { p.logprob_token_ids = std::vector<int32_t>(129, 1); }, "logprob_token_ids",
       "Requested logprob_token_ids of length 129, which is greater than max allowed: 128"},
      {"logprob_token_ids oov",
       [](auto& p) {
         p.logprob_token_ids = std::vector<int32_t>{5, 600};
       },
       "logprob_token_ids",
       "token_id(s) [600] in logprob_token_ids contain out-of-vocab token ids. Vocabulary "
       "size: 512"},
      {"logprob_token_ids vs logprobs",
       [](auto& p) {
         p.logprob_token_ids = std::vector<int32_t>{5, 6};
         p.logprobs = 3;
       },
       "logprob_token_ids",
       "When both logprobs and logprob_token_ids are set, logprobs must equal "
       "len(logprob_token_ids). Got logprobs=3, len(logprob_token_ids)=2."},
      {"logit_bias oov",
       [](auto& p) {
         p.logit_bias = {{-1, 1.0f}, {3, 1.0f}, {512, 2.0f}};
       },
       "logit_bias",
       "token_id(s) [-1, 512] in logit_bias contain out-of-vocab token ids. Vocabulary size: "
       "512"},
      {"stop_token_ids oov",
       [](auto& p) {
         p.stop_token_ids = {2, 1000};
       },
       "stop_token_ids",
       "token_id(s) [1000] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: "
       "512"},
      {"allowed empty", [](auto& p) { p.allowed_token_ids = std::vector<int32_t>{}; },
       "allowed_token_ids", "allowed_token_ids is not None and empty!"},
      {"allowed oov",
       [](auto& p) {
         p.allowed_token_ids = std::vector<int32_t>{1, 512};
       },
       "allowed_token_ids", "allowed_token_ids contains out-of-vocab token id!"},
      {"bad words ids oov",
       [](auto& p) {
         p.bad_words_token_ids = {{3, 700}};
       },
       "bad_words",
       "The model vocabulary size is 512, but the following tokens were specified as bad: "
       "[700]. All token id values should be integers satisfying: 0 <= token_id <= 511."},
  };
  for (const auto& c : cases) {
    SamplingParams p;
    c.mutate(p);
    expect_error(p.validate_for_model(limits), c);
  }
  SamplingParams ok;
  ok.logprobs = 20;
  ok.prompt_logprobs = 0;
  ok.allowed_token_ids = std::vector<int32_t>{0, 511};
  EXPECT_FALSE(ok.validate_for_model(limits).has_value());
  // max_logprobs = -1 means the whole vocabulary.
  ok.logprobs = -1;
  EXPECT_FALSE(ok.validate_for_model({.vocab_size = 512, .max_logprobs = -1}).has_value());
}

TEST(SamplingParams, NormalizeAppliesPostInit) {
  SamplingParams p;
  p.seed = -1;
  p.stop_token_ids = {5, 3, 5, 7, 3};
  p.bad_words = {"b", "a", "b"};
  p.logit_bias = {{1, 250.0f}, {2, -300.0f}, {3, 4.5f}};
  p.temperature = 0.0;
  p.top_p = 0.5;
  p.top_k = 7;
  p.min_p = 0.2;
  p.normalize();
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{5, 3, 7}));
  EXPECT_EQ(p.bad_words, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(p.logit_bias.at(1), 100.0f);
  EXPECT_EQ(p.logit_bias.at(2), -100.0f);
  EXPECT_EQ(p.logit_bias.at(3), 4.5f);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_EQ(p.sampling_type(), SamplingType::kGreedy);
}

TEST(SamplingParams, SamplingTypeAndChildParams) {
  SamplingParams p;
  p.n = 3;
  EXPECT_EQ(p.sampling_type(), SamplingType::kRandom);
  EXPECT_EQ(p.child_params(2).n, 1);
  EXPECT_FALSE(p.child_params(2).seed.has_value());
  p.seed = 100;
  EXPECT_EQ(p.sampling_type(), SamplingType::kRandomSeed);
  EXPECT_EQ(p.child_params(0).seed, 100);
  EXPECT_EQ(p.child_params(2).seed, 102);
}

TEST(SamplingParams, OutputTextBufferLength) {
  SamplingParams p;
  EXPECT_EQ(p.output_text_buffer_length(), 0);
  p.stop = {"ab", "abcd"};
  EXPECT_EQ(p.output_text_buffer_length(), 3);
  p.include_stop_str_in_output = true;
  EXPECT_EQ(p.output_text_buffer_length(), 0);
}

TEST(PythonRepr, FloatsPrintLikePython) {
  using sampling::py_float;
  EXPECT_EQ(py_float(-3.0), "-3.0");
  EXPECT_EQ(py_float(2.5), "2.5");
  EXPECT_EQ(py_float(0.1), "0.1");
  EXPECT_EQ(py_float(1e-06), "1e-06");
  EXPECT_EQ(py_float(1e16), "1e+16");
  EXPECT_EQ(py_float(123456.0), "123456.0");
  EXPECT_EQ(py_float(-INFINITY), "-inf");
}

}  // namespace
}  // namespace vellum
