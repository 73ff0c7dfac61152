// Preemption of forked sequences (n > 1 children, beam search) under a tiny KV budget: the
// outputs equal those of a run with room to spare, and the running count never passes
// max_num_seqs (issue 11, section 2).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine_test_util.h"

namespace vellum {
namespace {

// 200 tokens: 12 full blocks of 16 and a partial one that the children share and copy on write.
std::vector<int32_t> long_prompt(int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(3 + (i * 53 + 7 + salt) % 500);
  return prompt;
}

SamplingParams seeded_n(int64_t n, int64_t seed, int64_t max_tokens) {
  SamplingParams p;
  p.n = n;
  p.seed = seed;
  p.temperature = 1.0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::map<std::string, RequestOutput> run_n_requests(const EngineConfig& config,
                                                    EngineStats* stats) {
  auto engine = LLMEngine::create(config);
  EXPECT_FALSE(engine->add_request("a", long_prompt(0), seeded_n(4, 1234, 12)));
  EXPECT_FALSE(engine->add_request("b", long_prompt(1), seeded_n(3, 99, 10)));
  auto outputs = testing::run_all(*engine);
  *stats = engine->stats();
  return outputs;
}

void expect_same_children(const std::map<std::string, RequestOutput>& got,
                          const std::map<std::string, RequestOutput>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, out] : want) {
    const RequestOutput& g = got.at(id);
    ASSERT_EQ(g.outputs.size(), out.outputs.size()) << id;
    std::map<int32_t, std::vector<int32_t>> by_index;
    for (const CompletionOutput& c : g.outputs) by_index[c.index] = c.token_ids;
    for (const CompletionOutput& c : out.outputs) {
      EXPECT_EQ(by_index[c.index], c.token_ids) << "request " << id << " child " << c.index;
    }
  }
}

// The priority policy preempts the worst running request even when it was already served in
// the step: a child whose copy-on-write of the shared partial block was just planned. Swapped
// out, its host copy must hold the copied block, not the uninitialised destination.
TEST(EnginePreemption, SwappedForkedChildrenMatchTheUnpreemptedRun) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig base = testing::tiny_engine_config(model_path);
  base.model.max_model_len = 224;
  base.scheduler.policy = "priority";
  base.scheduler.preemption_mode = "swap";
  base.cache.swap_space_bytes = int64_t{64} << 20;
  base.cache.enable_prefix_caching = false;
  EngineStats roomy_stats;
  const auto roomy = run_n_requests(base, &roomy_stats);
  ASSERT_EQ(roomy_stats.num_preemptions, 0);

  EngineConfig tight = base;
  tight.cache.num_blocks_override = 16;  // 15 usable: two 13-block prompts do not fit together
  EngineStats tight_stats;
  const auto got = run_n_requests(tight, &tight_stats);
  EXPECT_GT(tight_stats.num_preemptions, 0) << "the tiny KV budget should preempt";
  EXPECT_EQ(tight_stats.kv_cache_usage, 0.0) << "blocks leaked";
  expect_same_children(got, roomy);
}

}  // namespace
}  // namespace vellum
