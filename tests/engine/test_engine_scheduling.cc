// End-to-end scheduling on stories260K: many requests with mixed lengths produce exactly the
// tokens they produce alone, under preemption (recompute and swap), with and without chunked
// prefill, with random aborts; prefix caching skips computing shared prefixes; bad prompts get
// the spec's errors without disturbing running requests.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "engine_test_util.h"

namespace vellum {
namespace {

struct Job {
  std::vector<int32_t> prompt;
  int64_t max_tokens;
};

// 64 requests: prompts of 1..200 tokens cut from real text (so greedy continuations have
// comfortable logit gaps), outputs of 1..40 tokens.
std::vector<Job> make_jobs(LLMEngine& engine, uint32_t seed) {
  const std::string text =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high. "
      "Lily asked her mom for help. Her mom said, \"Let's try to get it together.\" They jumped "
      "and jumped until they got the ball. Lily was so happy. She said thank you to her mom and "
      "they played with the ball all day. The little dog ran to the tree and barked at the cat. "
      "Tom and Sue went to the park to see the big slide. They had a lot of fun together.";
  std::vector<int32_t> ids = engine.encode(text, true, false);
  while (ids.size() < 220) {
    const auto more = engine.encode(text, false, false);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  std::mt19937 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < 64; ++i) {
    const int len = 1 + static_cast<int>(rng() % 200);
    const int start = static_cast<int>(rng() % 20);
    std::vector<int32_t> prompt(ids.begin() + start, ids.begin() + start + len);
    jobs.push_back({prompt, 1 + static_cast<int64_t>(rng() % 40)});
  }
  return jobs;
}

std::vector<std::vector<int32_t>> run_alone(const EngineConfig& config,
                                            const std::vector<Job>& jobs) {
  auto engine = LLMEngine::create(config);
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string id = "alone" + std::to_string(i);
    EXPECT_FALSE(engine->add_request(id, jobs[i].prompt, testing::greedy(jobs[i].max_tokens)));
    auto done = testing::run_all(*engine);
    tokens.push_back(done.at(id).outputs[0].token_ids);
  }
  return tokens;
}

struct Variant {
  const char* name;
  int64_t num_blocks;       // 0: the default budget
  std::string preemption;   // recompute | swap
  bool chunked_prefill;
  bool prefix_caching;
  double abort_fraction;
};

class EngineScheduling : public ::testing::TestWithParam<Variant> {};

TEST_P(EngineScheduling, BatchedRequestsMatchTheirAloneTokens) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  const Variant& v = GetParam();
  EngineConfig base = testing::tiny_engine_config(model_path);
  base.model.max_model_len = 256;
  auto probe = LLMEngine::create(base);
  const std::vector<Job> jobs = make_jobs(*probe, 7);
  probe.reset();
  static std::vector<std::vector<int32_t>> alone;  // shared by all variants
  if (alone.empty()) alone = run_alone(base, jobs);

  EngineConfig config = base;
  config.cache.enable_prefix_caching = v.prefix_caching;
  config.scheduler.enable_chunked_prefill = v.chunked_prefill;
  config.scheduler.preemption_mode = v.preemption;
  if (!v.chunked_prefill) config.scheduler.max_num_batched_tokens = 256;
  if (v.num_blocks > 0) config.cache.num_blocks_override = v.num_blocks;
  if (v.preemption == "swap") config.cache.swap_space_bytes = int64_t{64} << 20;
  auto engine = LLMEngine::create(config);

  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_FALSE(engine->add_request(std::to_string(i), jobs[i].prompt,
                                     testing::greedy(jobs[i].max_tokens)));
  }
  std::mt19937 rng(11);
  std::set<std::string> aborted;
  std::map<std::string, RequestOutput> finished;
  for (int step = 0; engine->has_unfinished_requests() && step < 20000; ++step) {
    if (v.abort_fraction > 0 && rng() % 1000 < 1000 * v.abort_fraction) {
      const std::string id = std::to_string(rng() % jobs.size());
      if (!finished.count(id) && engine->abort_request(id)) aborted.insert(id);
    }
    for (RequestOutput& out : engine->step()) {
      if (out.finished) finished[out.request_id] = std::move(out);
    }
  }
  ASSERT_FALSE(engine->has_unfinished_requests());
  ASSERT_EQ(finished.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const RequestOutput& out = finished.at(std::to_string(i));
    if (aborted.count(std::to_string(i))) {
      EXPECT_EQ(out.outputs[0].finish_reason, "abort") << "request " << i;
      // What it produced before the abort is a prefix of its alone run.
      const auto& got = out.outputs[0].token_ids;
      ASSERT_LE(got.size(), alone[i].size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), alone[i].begin())) << "request " << i;
      continue;
    }
    EXPECT_EQ(out.outputs[0].finish_reason, "length") << "request " << i;
    EXPECT_EQ(out.outputs[0].token_ids, alone[i]) << v.name << ": request " << i
                                                  << " (prompt " << jobs[i].prompt.size()
                                                  << " tokens)";
  }
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.num_waiting, 0);
  // No block leaked: only cached, evictable blocks may remain, and usage counts none in use.
  EXPECT_EQ(stats.kv_cache_usage, 0.0) << "blocks leaked";
  if (v.num_blocks > 0) {
    EXPECT_GT(stats.num_preemptions, 0) << v.name << ": the small KV budget should preempt";
  }
  if (v.abort_fraction > 0) {
    EXPECT_FALSE(aborted.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, EngineScheduling,
    ::testing::Values(Variant{"roomy", 0, "recompute", true, true, 0.0},
                      Variant{"preempt_recompute_chunked", 40, "recompute", true, false, 0.0},
                      Variant{"preempt_recompute_whole", 40, "recompute", false, true, 0.0},
                      Variant{"preempt_swap_chunked", 40, "swap", true, false, 0.0},
                      Variant{"preempt_swap_whole", 40, "swap", false, false, 0.0},
                      Variant{"aborts", 40, "recompute", true, true, 0.05}),
    [](const ::testing::TestParamInfo<Variant>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(EnginePrefixCaching, SharedPrefixIsNotRecomputedAndOutputIsUnchanged) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  auto engine = LLMEngine::create(config);
  const std::string shared =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball.";
  ASSERT_FALSE(engine->add_request("first", shared + " She wanted", testing::greedy(16)));
  auto first = testing::run_all(*engine);
  const int64_t computed_before = engine->stats().prompt_tokens;
  const std::string second_prompt = shared + " Tom came to";
  ASSERT_FALSE(engine->add_request("second", second_prompt, testing::greedy(24)));
  auto second = testing::run_all(*engine).at("second");
  const int64_t prompt_len = static_cast<int64_t>(second.prompt_token_ids.size());
  // Whole 16-token blocks of the shared prefix come from the cache.
  EXPECT_GE(second.num_cached_tokens, 16);
  EXPECT_EQ(second.num_cached_tokens % 16, 0);
  EXPECT_EQ(engine->stats().prompt_tokens - computed_before, prompt_len - second.num_cached_tokens);
  EXPECT_GT(engine->stats().prefix_cache_hits, 0);

  config.cache.enable_prefix_caching = false;
  auto uncached = LLMEngine::create(config);
  ASSERT_FALSE(uncached->add_request("second", second_prompt, testing::greedy(24)));
  auto reference = testing::run_all(*uncached).at("second");
  EXPECT_EQ(reference.num_cached_tokens, 0);
  EXPECT_EQ(second.outputs[0].token_ids, reference.outputs[0].token_ids);
}

TEST(EnginePromptValidation, BadPromptsAreRejectedWithoutDisturbingOthers) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.model.max_model_len = 64;
  auto engine = LLMEngine::create(config);
  ASSERT_FALSE(engine->add_request("ok", std::string("Once upon a time"), testing::greedy(20)));
  engine->step();  // the good request is running

  const auto empty = engine->add_request("empty", std::vector<int32_t>{}, testing::greedy(4));
  ASSERT_TRUE(empty);
  EXPECT_NE(empty->find("The decoder prompt cannot be empty"), std::string::npos) << *empty;

  const auto too_long =
      engine->add_request("long", std::vector<int32_t>(65, 300), testing::greedy(4));
  ASSERT_TRUE(too_long);
  EXPECT_NE(too_long->find("is longer than the maximum model length of 64"), std::string::npos)
      << *too_long;

  const auto exact =
      engine->add_request("exact", std::vector<int32_t>(64, 300), testing::greedy(4));
  ASSERT_TRUE(exact);
  EXPECT_NE(exact->find("plus the number of requested output tokens"), std::string::npos)
      << *exact;

  SamplingParams bad = testing::greedy(4);
  bad.top_p = 1.5;
  const auto bad_param = engine->add_request("bad", std::string("Hi"), bad);
  ASSERT_TRUE(bad_param);
  EXPECT_NE(bad_param->find("top_p"), std::string::npos) << *bad_param;

  auto done = testing::run_all(*engine);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done.at("ok").outputs[0].token_ids.size(), 20u);
}

TEST(EngineStartup, KvBudgetTooSmallNamesTheLargestFeasibleLength) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.model.max_model_len = 2048;
  config.cache.num_blocks_override = 9;  // 8 usable blocks of 16 tokens = 128 tokens
  try {
    LLMEngine::create(config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("--max-model-len to at most 128"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vellum
