// End-to-end on the architecture test models (../shared/models/arch): the engine (scheduler,
// KV cache manager, chunked prefill, batched decode, sampler with logprobs) in f32 reproduces
// llama.cpp's f32 greedy tokens and their top-5 logprobs (reference-f32.json), all three prompts
// of a model in flight together with a small token budget so that the long prompts are chunked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"

namespace vellum {
namespace {

using nlohmann::json;

constexpr double kTolerance = 1e-3;  // README: f32 engine vs reference-f32.json

void check_arch_model(const std::string& file, int64_t block_size) {
  VELLUM_REQUIRE_MODEL_FILE(ref_path, "arch/reference-f32.json");
  VELLUM_REQUIRE_MODEL_FILE(model_path, "arch/" + file);
  std::ifstream in(ref_path);
  const json ref = json::parse(in);
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.model.dtype = "float32";
  config.cache.block_size = block_size;
  config.scheduler.max_num_batched_tokens = 64;  // prompts of 100 and 200 tokens are chunked
  config.scheduler.max_num_seqs = 8;
  LLM llm(config);
  std::vector<Prompt> prompts;
  std::vector<const json*> cases;
  for (const auto& c : ref["cases"]) {
    if (c["model"] != file) continue;
    prompts.emplace_back(c["prompt_token_ids"].get<std::vector<int32_t>>());
    cases.push_back(&c);
  }
  ASSERT_EQ(cases.size(), 3u);
  SamplingParams params = testing::greedy(32);
  params.logprobs = 5;
  const std::vector<RequestOutput> outputs = llm.generate(prompts, params);
  ASSERT_EQ(outputs.size(), cases.size());
  for (size_t s = 0; s < cases.size(); ++s) {
    const json& c = *cases[s];
    const auto expected = c["generated_token_ids"].get<std::vector<int32_t>>();
    const CompletionOutput& out = outputs[s].outputs.at(0);
    ASSERT_TRUE(out.logprobs.has_value());
    ASSERT_EQ(out.token_ids.size(), expected.size());
    // Tokens are owed up to the first near tie; past the first difference the inputs differ.
    for (size_t i = 0; i < expected.size(); ++i) {
      if (c["top1_top2_gap"][i].get<double>() < kTolerance || out.token_ids[i] != expected[i]) {
        EXPECT_LT(c["top1_top2_gap"][i].get<double>(), kTolerance)
            << file << " prompt " << s << ": token " << i << " is " << out.token_ids[i]
            << ", reference " << expected[i];
        break;
      }
      const TokenLogprobs& lp = (*out.logprobs)[i];
      for (const auto& entry : c["top5"][i]) {
        const int32_t id = entry[0].get<int32_t>();
        const auto it = std::find_if(lp.top.begin(), lp.top.end(),
                                     [&](const auto& p) { return p.first == id; });
        if (it == lp.top.end()) continue;  // rank 5/6 near tie
        EXPECT_NEAR(it->second, entry[1].get<double>(), kTolerance)
            << file << " prompt " << s << " position " << i << " token " << id;
      }
    }
  }
}

TEST(EngineArch, Gemma2SlidingWindowSoftcaps) { check_arch_model("gemma2-f16.gguf", 16); }
TEST(EngineArch, Gemma3SlidingPatternPerLayerRope) { check_arch_model("gemma3-f16.gguf", 16); }
TEST(EngineArch, Qwen2Biases) { check_arch_model("qwen2-f16.gguf", 16); }
TEST(EngineArch, Qwen3QkNorm) { check_arch_model("qwen3-f16.gguf", 16); }
TEST(EngineArch, Phi3Fused) { check_arch_model("phi3-f16.gguf", 16); }
TEST(EngineArch, MixtralMoe) { check_arch_model("llama-moe-f16.gguf", 16); }
TEST(EngineArch, Qwen3MoeQuantized) { check_arch_model("qwen3moe-q4_k_m.gguf", 8); }

}  // namespace
}  // namespace vellum
