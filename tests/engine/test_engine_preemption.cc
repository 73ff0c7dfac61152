// Preemption of forked sequences (n > 1 children, beam search) under a tiny KV budget: the
// outputs equal those of a run with room to spare, and the running count never passes
// max_num_seqs (issue 11, section 2).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine_test_util.h"

namespace vellum {
namespace {

// 200 tokens by default: 12 full blocks of 16 and a partial one that the children share and
// copy on write.
std::vector<int32_t> long_prompt(int salt, int num_tokens = 200) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < num_tokens; ++i) prompt.push_back(3 + (i * 53 + 7 + salt) % 500);
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

SamplingParams beam_params(int64_t width, int64_t max_tokens) {
  SamplingParams p;
  p.use_beam_search = true;
  p.n = width;
  p.temperature = 0.0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// A mix of n > 1, beam search and single requests; returns the final outputs and checks after
// every step that the running sequences never exceed max_num_seqs.
std::map<std::string, RequestOutput> run_mixed(const EngineConfig& config, EngineStats* stats) {
  auto engine = LLMEngine::create(config);
  EXPECT_FALSE(engine->add_request("single", long_prompt(2, 60), testing::greedy(20)));
  EXPECT_FALSE(engine->add_request("par", long_prompt(3, 50), seeded_n(3, 5, 12)));
  EXPECT_FALSE(engine->add_request("beam", long_prompt(4, 70), beam_params(3, 10)));
  EXPECT_FALSE(engine->add_request("par2", long_prompt(5, 40), seeded_n(2, 8, 8)));
  std::map<std::string, RequestOutput> finished;
  for (int step = 0; engine->has_unfinished_requests() && step < 2000; ++step) {
    for (RequestOutput& out : engine->step()) {
      if (out.finished) finished[out.request_id] = std::move(out);
    }
    EXPECT_LE(engine->stats().num_running, config.scheduler.max_num_seqs) << "step " << step;
  }
  EXPECT_FALSE(engine->has_unfinished_requests());
  *stats = engine->stats();
  return finished;
}

// Forked children and beams count against --max-num-seqs: a request reserves n seats when it is
// admitted, so its forks never push the running count past the cap, with room to spare or under
// a tiny KV budget (preemption by recompute, beam groups preempted and resumed whole).
TEST(EnginePreemption, ForksNeverExceedMaxNumSeqs) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig base = testing::tiny_engine_config(model_path);
  base.model.max_model_len = 96;
  EngineStats roomy_stats;
  const auto roomy = run_mixed(base, &roomy_stats);

  for (const int64_t num_blocks : {int64_t{0}, int64_t{10}}) {
    SCOPED_TRACE(num_blocks == 0 ? "default KV budget" : "tiny KV budget");
    EngineConfig capped = base;
    capped.scheduler.max_num_seqs = 4;
    capped.cache.num_blocks_override = num_blocks;
    EngineStats stats;
    const auto got = run_mixed(capped, &stats);
    if (num_blocks > 0) {
      EXPECT_GT(stats.num_preemptions, 0) << "the tiny KV budget should preempt";
    }
    EXPECT_EQ(stats.kv_cache_usage, 0.0) << "blocks leaked";
    expect_same_children(got, roomy);
    for (const auto& [id, out] : got) {
      for (const CompletionOutput& c : out.outputs) {
        EXPECT_EQ(c.finish_reason, "length") << id << " child " << c.index;
      }
    }
  }
}

TEST(EnginePreemption, RequestWithMoreSequencesThanMaxNumSeqsIsRejected) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.scheduler.max_num_seqs = 2;
  auto engine = LLMEngine::create(config);
  const auto error = engine->add_request("wide", long_prompt(0), seeded_n(3, 1, 4));
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("--max-num-seqs"), std::string::npos) << *error;
}

// A beam group preempted under KV pressure is recomputed and resumed whole, and returns the
// beams of a run that was never preempted (it used to end as aborted).
TEST(EnginePreemption, BeamGroupIsPreemptedAndResumedWhole) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  EngineConfig base = testing::tiny_engine_config(model_path);
  base.model.max_model_len = 240;
  auto run = [&](const EngineConfig& config, EngineStats* stats) {
    auto engine = LLMEngine::create(config);
    // "first" is older: under KV pressure the newest (the beam group) is preempted.
    EXPECT_FALSE(engine->add_request("first", long_prompt(6), testing::greedy(30)));
    EXPECT_FALSE(engine->add_request("beam", long_prompt(7), beam_params(4, 12)));
    auto outputs = testing::run_all(*engine, 5000);
    EXPECT_FALSE(engine->has_unfinished_requests());
    *stats = engine->stats();
    return outputs;
  };
  EngineStats roomy_stats;
  const auto roomy = run(base, &roomy_stats);
  ASSERT_EQ(roomy_stats.num_preemptions, 0);
  EngineConfig tight = base;
  tight.cache.num_blocks_override = 28;
  EngineStats tight_stats;
  const auto got = run(tight, &tight_stats);
  EXPECT_GT(tight_stats.num_preemptions, 0) << "the tiny KV budget should preempt";
  EXPECT_EQ(tight_stats.kv_cache_usage, 0.0) << "blocks leaked";
  ASSERT_EQ(got.count("beam"), 1u);
  const RequestOutput& beam = got.at("beam");
  const RequestOutput& want = roomy.at("beam");
  ASSERT_EQ(beam.outputs.size(), want.outputs.size());
  for (size_t k = 0; k < want.outputs.size(); ++k) {
    EXPECT_EQ(beam.outputs[k].finish_reason, "length") << "rank " << k;
    EXPECT_EQ(beam.outputs[k].token_ids, want.outputs[k].token_ids) << "rank " << k;
    EXPECT_NEAR(beam.outputs[k].cumulative_logprob, want.outputs[k].cumulative_logprob, 1e-3)
        << "rank " << k;
  }
  EXPECT_EQ(got.at("first").outputs[0].token_ids, roomy.at("first").outputs[0].token_ids);
}

}  // namespace
}  // namespace vellum
