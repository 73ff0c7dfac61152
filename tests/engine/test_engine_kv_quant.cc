// The engine on a quantized KV cache (issue 37): q8_0 blocks are what moves when blocks move
// (prefix-cache hits, swap to host and back, copy-on-write of forked children), so each of those
// paths must give the tokens of a run that never moved a block; the budget buys blocks by bytes;
// the stats name the storage; a model whose head dim does not fit the 32-value blocks is refused
// with the fix. On the random-weight fixture models of ../shared/models/arch (head dim 64) every
// architecture runs greedy on q8_0 K/V.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine_test_util.h"

namespace vellum {
namespace {

std::vector<int32_t> prompt_of(int salt, int num_tokens) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < num_tokens; ++i) prompt.push_back(3 + (i * 37 + 11 * salt) % 500);
  return prompt;
}

SamplingParams seeded_children(int64_t n, int64_t max_tokens) {
  SamplingParams p;
  p.n = n;
  p.seed = 7;
  p.temperature = 1.0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

EngineConfig q8_config(const std::filesystem::path& model) {
  EngineConfig config = testing::tiny_engine_config(model);
  config.cache.cache_dtype = "q8_0";
  return config;
}

// Two greedy requests sharing a 96-token prefix and one forked request (3 children that share
// the prompt's partial block and copy it on write); token ids of every child by request id.
std::map<std::string, std::vector<std::vector<int32_t>>> run_mix(const EngineConfig& config,
                                                                 EngineStats* stats) {
  auto engine = LLMEngine::create(config);
  std::vector<int32_t> shared = prompt_of(1, 96);
  std::vector<int32_t> second = shared;
  for (int32_t t : prompt_of(2, 40)) second.push_back(t);
  EXPECT_FALSE(engine->add_request("first", shared, testing::greedy(24)));
  auto outputs = testing::run_all(*engine);  // the first request's blocks are cached by now
  EXPECT_FALSE(engine->add_request("second", second, testing::greedy(24)));
  EXPECT_FALSE(engine->add_request("forked", prompt_of(3, 150), seeded_children(3, 20)));
  outputs.merge(testing::run_all(*engine));
  *stats = engine->stats();
  std::map<std::string, std::vector<std::vector<int32_t>>> tokens;
  for (const auto& [id, out] : outputs) {
    for (const CompletionOutput& child : out.outputs) {
      auto& children = tokens[id];
      children.resize(std::max(children.size(), static_cast<size_t>(child.index + 1)));
      children[static_cast<size_t>(child.index)] = child.token_ids;
    }
  }
  return tokens;
}

TEST(EngineKvQuant, Q8_0PrefixHitsSwapsAndCopiesKeepTheTokens) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "arch/llama-f16.gguf");
  EngineConfig plain = q8_config(model_path);
  plain.cache.enable_prefix_caching = false;
  EngineStats plain_stats;
  const auto want = run_mix(plain, &plain_stats);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(want.at("forked").size(), 3u);
  EXPECT_EQ(plain_stats.kv_cache_dtype, "q8_0");

  EngineConfig cached = q8_config(model_path);
  EngineStats cached_stats;
  EXPECT_EQ(run_mix(cached, &cached_stats), want) << "a prefix-cache hit changed the tokens";
  EXPECT_GE(cached_stats.prefix_cache_hits, 96 / 16 * 16) << "the shared prefix was not reused";

  // 13 usable blocks of 16: the forked request's 150-token prompt (10 blocks) and its three
  // children do not fit beside the others, so requests are swapped out and back in.
  EngineConfig tight = plain;
  tight.scheduler.preemption_mode = "swap";
  tight.cache.swap_space_bytes = int64_t{64} << 20;
  tight.cache.num_blocks_override = 14;
  tight.model.max_model_len = 192;  // one sequence must fit the 13 blocks
  EngineStats tight_stats;
  EXPECT_EQ(run_mix(tight, &tight_stats), want) << "swapping q8_0 blocks changed the tokens";
  EXPECT_GT(tight_stats.num_preemptions, 0) << "the tight budget should preempt";
  EXPECT_EQ(tight_stats.kv_cache_usage, 0.0) << "blocks leaked";
}

TEST(EngineKvQuant, BudgetCountsBytesAndStatsNameTheStorage) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "arch/llama-f16.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  auto blocks_of = [&](const std::string& dtype, const std::string& type_v, std::string* name) {
    EngineConfig c = config;
    c.cache.cache_dtype = dtype;
    c.cache.cache_type_v = type_v;
    auto engine = LLMEngine::create(c);
    *name = engine->stats().kv_cache_dtype;
    return engine->stats().num_kv_blocks;
  };
  std::string bf16_name, q8_name, mixed_name;
  const int64_t bf16_blocks = blocks_of("bf16", "", &bf16_name);
  const int64_t q8_blocks = blocks_of("q8_0", "", &q8_name);
  const int64_t mixed_blocks = blocks_of("q8_0", "bf16", &mixed_name);
  EXPECT_EQ(bf16_name, "bf16");
  EXPECT_EQ(q8_name, "q8_0");
  EXPECT_EQ(mixed_name, "k=q8_0,v=bf16");
  // Head dim 64: a bf16 row is 128 bytes, a q8_0 row 68 (two 34-byte blocks).
  EXPECT_NEAR(static_cast<double>(q8_blocks) / static_cast<double>(bf16_blocks), 128.0 / 68.0,
              0.01);
  EXPECT_NEAR(static_cast<double>(mixed_blocks) / static_cast<double>(bf16_blocks),
              256.0 / (128.0 + 68.0), 0.01);
}

TEST(EngineKvQuant, RefusesAHeadDimOutsideTheBlocks) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");  // head dim 8
  EngineConfig config = q8_config(model_path);
  try {
    LLMEngine::create(config);
    FAIL() << "a q8_0 cache on head dim 8 should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks of 32 values"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype bf16"), std::string::npos) << e.what();
  }
  config.cache.cache_dtype = "q4_9";
  EXPECT_THROW(LLMEngine::create(config), Error);
}

// Every fixture architecture (GQA, sliding windows and softcaps, q/k norms, MoE) runs greedy
// on q8_0 K/V, batched, for 32 tokens; how many prompts keep the f32-K/V tokens is logged (random
// weights have tiny logit gaps, so some part ways: that is not an error).
TEST(EngineKvQuant, FixtureArchitecturesRunOnQ8_0) {
  for (const std::string file : {"llama-f16.gguf", "gemma2-f16.gguf", "gemma3-f16.gguf",
                                 "qwen3-f16.gguf", "phi3-f16.gguf", "llama-moe-f16.gguf"}) {
    VELLUM_REQUIRE_MODEL_FILE(model_path, "arch/" + file);
    std::vector<std::vector<int32_t>> prompts;
    for (int salt = 0; salt < 4; ++salt) prompts.push_back(prompt_of(salt, 20 + 30 * salt));
    auto run = [&](const std::string& dtype) {
      EngineConfig config = testing::tiny_engine_config(model_path);
      config.cache.cache_dtype = dtype;
      auto engine = LLMEngine::create(config);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_FALSE(engine->add_request(std::to_string(i), prompts[i], testing::greedy(32)));
      }
      return testing::run_all(*engine);
    };
    const auto f32 = run("f32");
    const auto q8 = run("q8_0");
    ASSERT_EQ(q8.size(), prompts.size()) << file;
    int identical = 0;
    for (const auto& [id, out] : q8) {
      ASSERT_EQ(out.outputs.size(), 1u) << file;
      EXPECT_EQ(out.outputs[0].token_ids.size(), 32u) << file << " request " << id;
      identical += out.outputs[0].token_ids == f32.at(id).outputs[0].token_ids;
    }
    std::printf("%s: %d of %zu greedy runs identical to f32 K/V for 32 tokens\n", file.c_str(),
                identical, prompts.size());
  }
}

}  // namespace
}  // namespace vellum
