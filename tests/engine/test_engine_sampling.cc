// End-to-end sampling features through the engine on stories260K (issue #6): min_tokens masking of
// EOS, logprobs and prompt logprobs against llama.cpp's reference, and n > 1 parallel sampling
// with forked (copy-on-write) prompt blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"

namespace vellum {
namespace {

using json = nlohmann::json;

constexpr int32_t kStoriesEosId = 2;

json stories_cases(const std::filesystem::path& greedy_path) {
  std::ifstream in(greedy_path);
  const json all = json::parse(in);
  json out = json::array();
  for (const auto& c : all["cases"]) {
    if (c["model"] == "stories260K.gguf") out.push_back(c);
  }
  return out;
}

// Blocks held by requests (the null block excluded), from the engine's usage figure.
int64_t blocks_in_use(const LLMEngine& engine) {
  const EngineStats s = engine.stats();
  return std::llround(s.kv_cache_usage * static_cast<double>(s.num_kv_blocks - 1));
}

// Checks a position's logprobs against a reference top-5 [[id, logprob], ...] (top-1 first).
void expect_matches_top5(const TokenLogprobs& lp, const json& top5, const std::string& where) {
  const int32_t top1 = top5[0][0].get<int32_t>();
  EXPECT_EQ(lp.token_id, top1) << where;
  EXPECT_NEAR(lp.logprob, top5[0][1].get<double>(), 1e-3) << where;
  EXPECT_EQ(lp.rank, 1) << where;
  ASSERT_EQ(lp.top.size(), 5u) << where;
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(lp.top[k].first, top5[k][0].get<int32_t>()) << where << " rank " << k + 1;
    EXPECT_NEAR(lp.top[k].second, top5[k][1].get<double>(), 1e-3) << where << " rank " << k + 1;
  }
}

TEST(EngineSampling, MinTokensMasksEosEvenWithIgnoreEos) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  SamplingParams p = testing::greedy(8);
  p.logit_bias[kStoriesEosId] = 100.0f;  // EOS wins whenever it is not masked
  p.min_tokens = 5;
  p.ignore_eos = true;
  ASSERT_FALSE(engine->add_request("ignore", std::string("Once upon a time"), p));
  p.ignore_eos = false;
  ASSERT_FALSE(engine->add_request("stop", std::string("Once upon a time"), p));
  auto outputs = testing::run_all(*engine);

  const auto& ignored = outputs.at("ignore").outputs.at(0);
  ASSERT_EQ(ignored.token_ids.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    if (i < 5) {
      EXPECT_NE(ignored.token_ids[i], kStoriesEosId) << "EOS sampled below min_tokens at " << i;
    } else {
      EXPECT_EQ(ignored.token_ids[i], kStoriesEosId) << "ignore_eos continues past EOS, at " << i;
    }
  }
  EXPECT_EQ(ignored.finish_reason, "length");

  const auto& stopped = outputs.at("stop").outputs.at(0);
  ASSERT_EQ(stopped.token_ids.size(), 6u);
  EXPECT_EQ(stopped.token_ids.back(), kStoriesEosId);
  EXPECT_EQ(stopped.finish_reason, "stop");
}

TEST(EngineSampling, GreedyLogprobsMatchReferenceTop5) {
  VELLUM_REQUIRE_MODEL_FILE(greedy_path, "reference/greedy.json");
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  const json cases = stories_cases(greedy_path);
  ASSERT_FALSE(cases.empty());
  LLM llm(testing::tiny_engine_config(model_path));
  std::vector<Prompt> prompts;
  for (const auto& c : cases) prompts.emplace_back(c["prompt"].get<std::string>());
  SamplingParams p = testing::greedy(48);
  p.logprobs = 5;
  const auto outputs = llm.generate(prompts, p);
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    ASSERT_EQ(outputs[i].outputs.size(), 1u);
    const CompletionOutput& out = outputs[i].outputs[0];
    ASSERT_TRUE(out.logprobs.has_value());
    ASSERT_EQ(out.logprobs->size(), c["top5"].size()) << c["prompt"];
    double cumulative = 0.0;
    for (size_t step = 0; step < out.logprobs->size(); ++step) {
      expect_matches_top5((*out.logprobs)[step], c["top5"][step],
                          c["prompt"].get<std::string>() + " step " + std::to_string(step));
      cumulative += (*out.logprobs)[step].logprob;
    }
    EXPECT_NEAR(out.cumulative_logprob, cumulative, 1e-3);
  }
}

TEST(EngineSampling, PromptLogprobsMatchReferenceTeacherForced) {
  VELLUM_REQUIRE_MODEL_FILE(greedy_path, "reference/greedy.json");
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  const json c = stories_cases(greedy_path).at(0);
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.cache.block_size = 4;  // several full blocks, so the prefix cache could serve them
  auto engine = LLMEngine::create(config);
  // prompt + the first 10 greedy tokens: positions P-1 .. P+8 predict generated[0..9].
  std::vector<int32_t> ids = c["prompt_token_ids"].get<std::vector<int32_t>>();
  const size_t num_prompt = ids.size();
  const auto generated = c["generated_token_ids"].get<std::vector<int32_t>>();
  ids.insert(ids.end(), generated.begin(), generated.begin() + 10);

  // Warm the prefix cache with the same tokens: prompt_logprobs must not read it.
  ASSERT_FALSE(engine->add_request("warm", ids, testing::greedy(1)));
  testing::run_all(*engine);
  SamplingParams p = testing::greedy(1);
  p.prompt_logprobs = 5;
  ASSERT_FALSE(engine->add_request("plp", ids, p));
  const RequestOutput out = testing::run_all(*engine).at("plp");
  EXPECT_EQ(out.num_cached_tokens, 0);
  ASSERT_TRUE(out.prompt_logprobs.has_value());
  ASSERT_EQ(out.prompt_logprobs->size(), ids.size() - 1);  // no entry for the first token
  for (size_t pos = 0; pos + 1 < ids.size(); ++pos) {
    EXPECT_EQ((*out.prompt_logprobs)[pos].token_id, ids[pos + 1]) << "position " << pos;
    EXPECT_LE((*out.prompt_logprobs)[pos].logprob, 0.0f);
  }
  for (size_t j = 0; j < 10; ++j) {
    expect_matches_top5((*out.prompt_logprobs)[num_prompt - 1 + j], c["top5"][j],
                        "teacher-forced step " + std::to_string(j));
  }
}

TEST(EngineSampling, PromptLogprobsWithChunkedPrefill) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(3 + (i * 37) % 500);
  SamplingParams p = testing::greedy(2);
  p.prompt_logprobs = 0;
  EngineConfig whole = testing::tiny_engine_config(model_path);
  EngineConfig chunked = whole;
  chunked.scheduler.enable_chunked_prefill = true;
  chunked.scheduler.max_num_batched_tokens = 16;
  chunked.scheduler.max_num_seqs = 4;
  std::vector<std::vector<TokenLogprobs>> results;
  for (const EngineConfig& config : {whole, chunked}) {
    auto engine = LLMEngine::create(config);
    ASSERT_FALSE(engine->add_request("r", ids, p));
    auto out = testing::run_all(*engine).at("r");
    ASSERT_TRUE(out.prompt_logprobs.has_value());
    results.push_back(*out.prompt_logprobs);
  }
  ASSERT_EQ(results[0].size(), ids.size() - 1);
  ASSERT_EQ(results[1].size(), ids.size() - 1);
  for (size_t pos = 0; pos < results[0].size(); ++pos) {
    EXPECT_EQ(results[1][pos].token_id, ids[pos + 1]);
    EXPECT_TRUE(results[0][pos].top.empty());
    EXPECT_NEAR(results[0][pos].logprob, results[1][pos].logprob, 1e-4) << "position " << pos;
    EXPECT_EQ(results[0][pos].rank, results[1][pos].rank) << "position " << pos;
  }
}

TEST(EngineSampling, ParallelSamplingForksThePromptOnce) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  const EngineConfig config = testing::tiny_engine_config(model_path);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(3 + (i * 53 + 7) % 500);
  SamplingParams p;
  p.n = 4;
  p.seed = 1234;
  p.temperature = 1.0;
  p.max_tokens = 12;
  p.ignore_eos = true;

  auto engine = LLMEngine::create(config);
  ASSERT_FALSE(engine->add_request("par", prompt, p));
  const int64_t bs = config.cache.block_size;
  const int64_t prompt_blocks = (200 + bs - 1) / bs;
  ASSERT_NE(200 % bs, 0) << "the test needs a shared partial block";
  engine->step();  // the prefill: one request, n first tokens
  EXPECT_EQ(blocks_in_use(*engine), prompt_blocks) << "the prompt's blocks must be held once";
  EXPECT_EQ(engine->stats().num_running, 4);
  engine->step();  // each writer of the shared partial block but the last copies it
  EXPECT_EQ(blocks_in_use(*engine), prompt_blocks + 3);
  auto outputs = testing::run_all(*engine);
  const RequestOutput& par = outputs.at("par");
  ASSERT_EQ(par.outputs.size(), 4u);
  EXPECT_EQ(engine->stats().prompt_tokens, 200);

  // Each child equals an independent request seeded with seed + index.
  auto reference = LLMEngine::create(config);
  for (int i = 0; i < 4; ++i) {
    SamplingParams single = p;
    single.n = 1;
    single.seed = 1234 + i;
    ASSERT_FALSE(reference->add_request("ref" + std::to_string(i), prompt, single));
  }
  auto refs = testing::run_all(*reference);
  std::set<std::vector<int32_t>> distinct;
  for (const CompletionOutput& child : par.outputs) {
    ASSERT_GE(child.index, 0);
    ASSERT_LT(child.index, 4);
    const auto& ref = refs.at("ref" + std::to_string(child.index)).outputs.at(0);
    EXPECT_EQ(child.token_ids, ref.token_ids) << "child " << child.index;
    EXPECT_EQ(child.text, ref.text) << "child " << child.index;
    EXPECT_EQ(child.token_ids.size(), 12u);
    distinct.insert(child.token_ids);
  }
  EXPECT_GT(distinct.size(), 1u) << "children with different seeds should differ";
}

TEST(EngineSampling, ParallelSamplingChildrenCanStopOnTheirFirstToken) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  SamplingParams p;
  p.n = 3;
  p.seed = 7;
  p.max_tokens = 1;
  p.output_kind = RequestOutputKind::kDelta;
  ASSERT_FALSE(engine->add_request("one", std::string("Once upon a time"), p));
  auto outputs = testing::run_all(*engine);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_FALSE(engine->has_unfinished_requests());
  EXPECT_EQ(blocks_in_use(*engine), 0);
}

TEST(EngineSampling, AbortBeforeForkFinishesEveryChild) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  SamplingParams p;
  p.n = 3;
  p.seed = 7;
  ASSERT_FALSE(engine->add_request("a", std::string("Once upon a time"), p));
  ASSERT_TRUE(engine->abort_request("a"));
  auto outputs = testing::run_all(*engine, 10);
  ASSERT_EQ(outputs.count("a"), 1u);
  ASSERT_EQ(outputs.at("a").outputs.size(), 3u);
  for (const auto& o : outputs.at("a").outputs) EXPECT_EQ(o.finish_reason, "abort");
  EXPECT_FALSE(engine->has_unfinished_requests());
}

// Beam search (width 4, 3 steps, EOS handled, length_penalty 1) against an exhaustive search of
// every continuation of up to 3 tokens scored the same way (cum_logprob / seq_len, EOS not
// counted). The exhaustive search is a branch and bound over the model's top-20 logprobs per
// prefix: an extension of a prefix with cumulative logprob c scores at most c / (P + 3) (c < 0
// and seq_len <= P + 3), so prefixes below the beam's worst score minus a margin cannot hold a
// better sequence; the top-20 cut-off is checked to be below that bound too, so no unlisted
// token could have mattered.
TEST(EngineSampling, BeamSearchMatchesExhaustiveSearch) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // "Once upon a time"
  const double num_prompt = static_cast<double>(prompt.size());
  constexpr int kSteps = 3;
  constexpr size_t kWidth = 4;

  SamplingParams beam;
  beam.use_beam_search = true;
  beam.n = kWidth;
  beam.max_tokens = kSteps;
  beam.temperature = 0.0;
  ASSERT_FALSE(engine->add_request("beam", prompt, beam));
  const RequestOutput result = testing::run_all(*engine).at("beam");
  ASSERT_EQ(result.outputs.size(), kWidth);
  auto score = [&](const std::vector<int32_t>& ids, double cum) {
    const bool eos = !ids.empty() && ids.back() == kStoriesEosId;
    return cum / (num_prompt + static_cast<double>(ids.size()) - (eos ? 1.0 : 0.0));
  };
  double threshold = 0.0;
  for (const CompletionOutput& o : result.outputs) {
    threshold = std::min(threshold, score(o.token_ids, o.cumulative_logprob));
  }
  threshold -= 1e-3;

  // Top-20 logprobs after each prefix, through the engine, one batch per level.
  auto next_logprobs = [&](const std::vector<std::vector<int32_t>>& prefixes) {
    SamplingParams p = testing::greedy(1);
    p.logprobs = 20;
    for (size_t i = 0; i < prefixes.size(); ++i) {
      std::vector<int32_t> ids = prompt;
      ids.insert(ids.end(), prefixes[i].begin(), prefixes[i].end());
      EXPECT_FALSE(engine->add_request("x" + std::to_string(i), ids, p));
    }
    auto outs = testing::run_all(*engine);
    std::vector<std::vector<std::pair<int32_t, float>>> lists;
    for (size_t i = 0; i < prefixes.size(); ++i) {
      lists.push_back(outs.at("x" + std::to_string(i)).outputs.at(0).logprobs->at(0).top);
    }
    return lists;
  };
  struct Seq {
    std::vector<int32_t> ids;
    double cum;
  };
  std::vector<Seq> frontier = {{{}, 0.0}};
  std::vector<Seq> finished;
  for (int step = 0; step < kSteps && !frontier.empty(); ++step) {
    std::vector<std::vector<int32_t>> prefixes;
    for (const Seq& s : frontier) prefixes.push_back(s.ids);
    const auto lists = next_logprobs(prefixes);
    std::vector<Seq> next;
    for (size_t i = 0; i < frontier.size(); ++i) {
      ASSERT_EQ(lists[i].size(), 20u);
      const double cut = frontier[i].cum + lists[i].back().second;
      ASSERT_LT(cut / (num_prompt + kSteps), threshold) << "top-20 is too short to be exhaustive";
      for (const auto& [token, lp] : lists[i]) {
        Seq s{frontier[i].ids, frontier[i].cum + lp};
        s.ids.push_back(token);
        if (s.cum / (num_prompt + kSteps) < threshold) continue;  // no extension can reach it
        if (token == kStoriesEosId || step + 1 == kSteps) {
          finished.push_back(std::move(s));
        } else {
          next.push_back(std::move(s));
        }
      }
    }
    frontier = std::move(next);
  }
  std::stable_sort(finished.begin(), finished.end(), [&](const Seq& a, const Seq& b) {
    return score(a.ids, a.cum) > score(b.ids, b.cum);
  });
  ASSERT_GE(finished.size(), kWidth);
  for (size_t k = 0; k < kWidth; ++k) {
    EXPECT_EQ(result.outputs[k].token_ids, finished[k].ids) << "rank " << k;
    EXPECT_NEAR(result.outputs[k].cumulative_logprob, finished[k].cum, 1e-3) << "rank " << k;
  }
}

TEST(EngineSampling, BeamSearchReleasesEveryBlock) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  SamplingParams beam;
  beam.use_beam_search = true;
  beam.n = 3;
  beam.max_tokens = 10;
  beam.length_penalty = 0.5;
  ASSERT_FALSE(engine->add_request("b", std::string("Once upon a time"), beam));
  const RequestOutput out = testing::run_all(*engine).at("b");
  ASSERT_EQ(out.outputs.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(out.outputs[k].index, static_cast<int32_t>(k));
    EXPECT_FALSE(out.outputs[k].token_ids.empty());
    EXPECT_FALSE(out.outputs[k].text.empty());
  }
  EXPECT_EQ(out.outputs[0].token_ids.size(), 10u);
  EXPECT_EQ(blocks_in_use(*engine), 0);
  EXPECT_EQ(engine->stats().num_running, 0);
}

}  // namespace
}  // namespace vellum
