// Speculative decoding (issue 36): greedy output with drafts verified in the batched step is
// token-for-token the output without them, alone, batched with requests that do not speculate,
// under a KV budget that preempts (recompute and swap), with chunked prefill and prefix caching;
// bad configurations are refused with a clear error.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine_test_util.h"

namespace vellum {
namespace {

constexpr const char* kNgram =
    R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
        "prompt_lookup_max": 5, "gate": "always"})";
constexpr const char* kSuffix =
    R"({"method": "suffix", "num_speculative_tokens": 8, "gate": "always"})";

// A prompt that repeats a phrase: the model tends to continue the pattern, which the n-gram
// proposer finds in the prompt, so drafts get accepted and rejected both.
std::vector<int32_t> repetitive_prompt(int salt, int num_repeats = 6) {
  std::vector<int32_t> phrase;
  for (int i = 0; i < 11; ++i) phrase.push_back(3 + (i * 37 + salt * 13) % 400);
  std::vector<int32_t> prompt;
  for (int r = 0; r < num_repeats; ++r) {
    prompt.insert(prompt.end(), phrase.begin(), phrase.end());
    prompt.push_back(3 + (r * 101 + salt) % 400);  // breaks the period now and then
  }
  return prompt;
}

struct TestRequest {
  std::string id;
  Prompt prompt;
  SamplingParams params;
};

struct RunResult {
  std::map<std::string, RequestOutput> outputs;
  EngineStats stats;
};

// speculative_config: empty for a run without speculation.
RunResult run(EngineConfig config, const std::vector<TestRequest>& requests,
              const char* speculative_config) {
  config.speculative_config = speculative_config;
  auto engine = LLMEngine::create(config);
  for (const TestRequest& r : requests) {
    EXPECT_FALSE(engine->add_request(r.id, r.prompt, r.params)) << r.id;
  }
  RunResult out;
  out.outputs = testing::run_all(*engine);
  out.stats = engine->stats();
  EXPECT_EQ(out.stats.kv_cache_usage, 0.0) << "blocks leaked";
  return out;
}

// Greedy requests: the same tokens, text, finish reason and logprobs with and without drafts.
void expect_same_outputs(const std::vector<TestRequest>& requests, const RunResult& plain,
                         const RunResult& spec) {
  ASSERT_EQ(spec.outputs.size(), requests.size());
  for (const TestRequest& r : requests) {
    // Sampled requests speculate too, but rejection sampling draws other random numbers: their
    // distribution is checked by the sampler's chi-square test, their tokens are not compared.
    if (!r.params.is_greedy()) {
      EXPECT_EQ(spec.outputs.at(r.id).outputs.at(0).token_ids.size(),
                plain.outputs.at(r.id).outputs.at(0).token_ids.size()) << r.id;
      continue;
    }
    const CompletionOutput& want = plain.outputs.at(r.id).outputs.at(0);
    const CompletionOutput& got = spec.outputs.at(r.id).outputs.at(0);
    EXPECT_EQ(got.token_ids, want.token_ids) << "request " << r.id;
    EXPECT_EQ(got.text, want.text) << "request " << r.id;
    EXPECT_EQ(got.finish_reason, want.finish_reason) << "request " << r.id;
    ASSERT_EQ(got.logprobs.has_value(), want.logprobs.has_value()) << r.id;
    if (want.logprobs) {
      ASSERT_EQ(got.logprobs->size(), want.logprobs->size()) << r.id;
      for (size_t t = 0; t < want.logprobs->size(); ++t) {
        EXPECT_EQ((*got.logprobs)[t].token_id, (*want.logprobs)[t].token_id) << r.id << " " << t;
        EXPECT_NEAR((*got.logprobs)[t].logprob, (*want.logprobs)[t].logprob, 1e-3)
            << r.id << " " << t;
      }
    }
  }
}

// Every greedy request's output is the same with and without speculation (n-gram and suffix),
// and the speculative runs accepted and rejected drafts (else the comparison proves little).
void expect_same_with_speculation(const EngineConfig& config,
                                  const std::vector<TestRequest>& requests,
                                  bool expect_preemption = false) {
  const RunResult plain = run(config, requests, "");
  EXPECT_EQ(plain.stats.spec_num_drafts, 0);
  if (expect_preemption) {
    EXPECT_GT(plain.stats.num_preemptions, 0) << "the KV budget should preempt";
  }
  for (const char* speculative_config : {kNgram, kSuffix}) {
    SCOPED_TRACE(speculative_config);
    const RunResult spec = run(config, requests, speculative_config);
    expect_same_outputs(requests, plain, spec);
    EXPECT_GT(spec.stats.spec_num_draft_tokens, 0) << "no drafts were verified";
    EXPECT_GT(spec.stats.spec_num_accepted_tokens, 0) << "no draft was accepted";
    EXPECT_LT(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens)
        << "every draft was accepted: rejection was not exercised";
    EXPECT_LT(spec.stats.num_model_steps, plain.stats.num_model_steps)
        << "accepted drafts should save steps";
    if (expect_preemption) {
      EXPECT_GT(spec.stats.num_preemptions, 0) << "the KV budget should preempt";
    }
    std::cout << "[ spec     ] " << speculative_config << ": drafts " << spec.stats.spec_num_drafts
              << ", draft tokens " << spec.stats.spec_num_draft_tokens << ", accepted "
              << spec.stats.spec_num_accepted_tokens << ", steps " << spec.stats.num_model_steps
              << " vs " << plain.stats.num_model_steps << " without\n";
  }
}

SamplingParams greedy_with_logprobs(int64_t max_tokens) {
  SamplingParams p = testing::greedy(max_tokens);
  p.logprobs = 3;
  return p;
}

SamplingParams seeded(int64_t seed, int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.9;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<TestRequest> mixed_requests(int num_greedy) {
  std::vector<TestRequest> requests;
  for (int i = 0; i < num_greedy; ++i) {
    requests.push_back({"g" + std::to_string(i), repetitive_prompt(i),
                        i % 2 ? greedy_with_logprobs(40) : testing::greedy(37 + i)});
  }
  // Text the model continues in its own words (drafts are then often rejected).
  requests.push_back({"t0", std::string("Once upon a time, there was a little girl named Lily."),
                      testing::greedy(70)});
  requests.push_back({"t1", std::string("The little dog saw a big ball. The little dog"),
                      greedy_with_logprobs(50)});
  // Sampled requests (rejection sampling) share every step with the greedy ones.
  requests.push_back({"s0", repetitive_prompt(7), seeded(42, 30)});
  requests.push_back({"s1", repetitive_prompt(8, 2), seeded(43, 25)});
  SamplingParams two = seeded(44, 30);
  two.n = 2;  // children forked after the prompt speculate on their own
  requests.push_back({"n2", repetitive_prompt(9), two});
  return requests;
}

TEST(EngineSpecDecode, GreedyAloneMatchesWithoutSpeculation) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  expect_same_with_speculation(
      testing::tiny_engine_config(model_path),
      {{"a", std::string("Lily and Tom went to the park. Lily and Tom"), greedy_with_logprobs(120)}});
}

TEST(EngineSpecDecode, GreedyBatchedWithNonSpeculativeRequestsMatches) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  expect_same_with_speculation(testing::tiny_engine_config(model_path), mixed_requests(5));
}

TEST(EngineSpecDecode, ChunkedPrefillMatches) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.scheduler.max_num_batched_tokens = 24;  // prompts of ~72 tokens take three chunks
  config.scheduler.max_num_seqs = 8;
  config.scheduler.long_prefill_token_threshold = 16;
  expect_same_with_speculation(config, mixed_requests(4));
}

TEST(EngineSpecDecode, RecomputePreemptionUnderATinyKvBudgetMatches) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.model.max_model_len = 224;
  config.cache.num_blocks_override = 20;  // 19 usable blocks of 16 for 8 requests of ~110 tokens
  expect_same_with_speculation(config, mixed_requests(4), /*expect_preemption=*/true);
}

TEST(EngineSpecDecode, SwapPreemptionWithoutPrefixCachingMatches) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.model.max_model_len = 224;
  config.cache.num_blocks_override = 20;
  config.cache.enable_prefix_caching = false;
  config.scheduler.preemption_mode = "swap";
  config.cache.swap_space_bytes = int64_t{64} << 20;
  expect_same_with_speculation(config, mixed_requests(4), /*expect_preemption=*/true);
}

TEST(EngineSpecDecode, SharedPrefixesThroughThePrefixCacheMatch) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  std::vector<TestRequest> requests;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt = repetitive_prompt(0, 5);
    prompt.push_back(100 + i);
    requests.push_back({"p" + std::to_string(i), prompt, testing::greedy(30 + 3 * i)});
    requests.push_back({"q" + std::to_string(i),
                        std::string("Once upon a time, there was a big tree. ") +
                            (i % 2 ? "The bird" : "The cat"),
                        testing::greedy(40)});
  }
  expect_same_with_speculation(testing::tiny_engine_config(model_path), requests);
}

TEST(EngineSpecDecode, StopStringsMaxTokensAndMinTokensMatch) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  const EngineConfig config = testing::tiny_engine_config(model_path);
  // What the model writes, so stop strings land inside accepted drafts.
  const RunResult probe = run(config, {{"probe", std::string("Once upon a time"),
                                  testing::greedy(60)}}, "");
  const std::string text = probe.outputs.at("probe").outputs.at(0).text;
  ASSERT_GT(text.size(), 60u);
  SamplingParams stop = testing::greedy(60);
  stop.stop = {text.substr(40, 5)};
  SamplingParams stop_eos;  // EOS allowed: the model may end on its own
  stop_eos.temperature = 0.0;
  stop_eos.max_tokens = 120;
  stop_eos.min_tokens = 50;
  std::vector<TestRequest> requests = {
      {"stop", std::string("Once upon a time"), stop},
      {"eos", std::string("Once upon a time"), stop_eos},
      {"max1", repetitive_prompt(1), testing::greedy(1)},
      {"max2", repetitive_prompt(1), testing::greedy(2)},
      {"max7", repetitive_prompt(2), testing::greedy(7)},
  };
  for (int i = 0; i < 3; ++i) {
    requests.push_back({"r" + std::to_string(i), repetitive_prompt(i), testing::greedy(50)});
  }
  expect_same_with_speculation(config, requests);
}

// Rejection sampling draws from per-row generators seeded from the request's own, so a seeded
// request that speculates gives the same tokens alone and in a batch.
TEST(EngineSpecDecode, SeededSampledRequestIsReproducibleAloneAndBatched) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  const EngineConfig config = testing::tiny_engine_config(model_path);
  SamplingParams p = seeded(77, 60);
  p.temperature = 0.3;  // peaked enough that drafts get accepted
  const TestRequest request = {"x", std::string("Lily and Tom went to the park. Lily and Tom"), p};
  const RunResult alone = run(config, {request}, kNgram);
  std::vector<TestRequest> batch = mixed_requests(3);
  batch.push_back(request);
  const RunResult batched = run(config, batch, kNgram);
  EXPECT_EQ(batched.outputs.at("x").outputs.at(0).token_ids,
            alone.outputs.at("x").outputs.at(0).token_ids);
  EXPECT_GT(alone.stats.spec_num_accepted_tokens, 0);
  EXPECT_LT(alone.stats.spec_num_accepted_tokens, alone.stats.spec_num_draft_tokens);
}

TEST(EngineSpecDecode, MetricsCountDraftsPerPosition) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  const RunResult spec = run(config, {{"a", repetitive_prompt(3), testing::greedy(60)}}, kNgram);
  const EngineStats& s = spec.stats;
  ASSERT_EQ(s.spec_num_accepted_tokens_per_pos.size(), 4u);
  int64_t sum = 0;
  for (size_t pos = 0; pos < 4; ++pos) {
    sum += s.spec_num_accepted_tokens_per_pos[pos];
    // A draft at position p is only accepted after the ones before it.
    if (pos > 0) {
      EXPECT_LE(s.spec_num_accepted_tokens_per_pos[pos], s.spec_num_accepted_tokens_per_pos[pos - 1]);
    }
  }
  EXPECT_EQ(sum, s.spec_num_accepted_tokens);
  EXPECT_LE(s.spec_num_draft_tokens, 4 * s.spec_num_drafts);
  EXPECT_EQ(spec.outputs.at("a").outputs.at(0).token_ids.size(), 60u);
  // Tokens = one per step that sampled plus the accepted drafts.
  EXPECT_EQ(s.generation_tokens, 60);
}

TEST(EngineSpecDecode, BadConfigurationsAreRefusedClearly) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  auto refused = [&](const std::string& json, const std::string& needle) {
    config.speculative_config = json;
    try {
      LLMEngine::create(config);
      ADD_FAILURE() << json << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(R"({"method": "eagle"})", "method \"eagle\" is not supported");
  refused(R"({"method": "ngram", "prompt_lookup_mn": 2})", "unknown key \"prompt_lookup_mn\"");
  refused(R"({"model": "draft.gguf", "num_speculative_tokens": 4})", "not implemented yet");
  refused(R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens");
  refused(R"({"method": "ngram", "prompt_lookup_min": 4, "prompt_lookup_max": 3})",
          "must not exceed");
  refused("{\"method\": ", "not valid JSON");
  refused("[1]", "must be a JSON object");

  config.speculative_config = kNgram;
  auto engine = LLMEngine::create(config);
  SamplingParams beam;
  beam.use_beam_search = true;
  beam.n = 2;
  beam.temperature = 0.0;
  beam.max_tokens = 4;
  const auto error = engine->add_request("b", std::string("Once"), beam);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("beam search cannot be combined with speculative decoding"),
            std::string::npos)
      << *error;
}

}  // namespace
}  // namespace vellum

namespace vellum {
namespace {

// The real models, asked to repeat a passage (drafts mostly accepted) and to continue freely
// (mostly rejected): the first alone, then all three together (one sampled) with a KV budget
// small enough to preempt.
// num_tight_blocks: a KV budget that holds one 96-token sequence but not all three requests
// (Gemma 3's hybrid KV cache has six groups, so it needs six times the blocks).
void expect_real_model_matches(const std::filesystem::path& model_path, int num_tight_blocks) {
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.cache.cache_dtype = "auto";
  const std::string passage =
      "The river rises in the hills, runs past the mill and the old stone bridge, and reaches "
      "the sea at the harbour town, where the boats come in at dusk.";
  const std::vector<TestRequest> requests = {
      {"repeat", "Repeat this text exactly: " + passage + "\nRepeated: ", testing::greedy(40)},
      {"free", std::string("Write a short poem about the sea."), greedy_with_logprobs(24)},
      {"sampled", std::string("Name three colours."), seeded(5, 16)},
  };
  expect_same_with_speculation(config, {requests[0]});  // alone
  config.model.max_model_len = 96;
  config.cache.num_blocks_override = num_tight_blocks;
  expect_same_with_speculation(config, requests, /*expect_preemption=*/true);
}

TEST(EngineSpecDecodeRealModels, SmolLM2GreedyMatchesWithoutSpeculation) {
  VELLUM_REQUIRE_REAL_MODEL(model_path, "SmolLM2-135M-Instruct.Q4_1.gguf");
  expect_real_model_matches(model_path, 7);
}

TEST(EngineSpecDecodeRealModels, Gemma3GreedyMatchesWithoutSpeculation) {
  VELLUM_REQUIRE_REAL_MODEL(model_path, "gemma-3-270m-q4_k_m.gguf");
  expect_real_model_matches(model_path, 37);
}

}  // namespace
}  // namespace vellum
