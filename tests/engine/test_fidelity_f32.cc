// Fidelity on the F32 copies of the real models (issue section 4): Vellum computes what llama.cpp
// computes. Greedy ids equal the reference's wherever its top1-top2 gap is >= 0.01, and the
// reference token's logprob is within 0.01 — alone, batched with 15 other requests, with chunked
// prefill, from a prefix-cache hit, and after preemption under a tiny KV budget.
//
// Each scenario checks two ways: teacher-forced (prompt_logprobs over the prompt and all 64
// reference tokens: every step is compared, through the prefill path) and by greedy generation
// with logprobs=5 (the decode path), compared step by step until the first step where the
// tokens differ, which must be a near tie of the reference (gap < 0.01).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "fidelity_util.h"

namespace vellum {
namespace {

using testing::fidelity::Agreement;
using testing::fidelity::ReferenceCase;
using testing::fidelity::ReferenceModel;

constexpr double kGapThreshold = 0.01;
constexpr double kLogprobTolerance = 0.01;
constexpr int64_t kTopLogprobs = 5;

class FidelityF32 : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ref_ = testing::fidelity::load_reference("reference-f32.json", GetParam()); }

  // Adds the teacher-forced and the generation request of each case ("forced/<name>",
  // "gen/<name>").
  static void add_case_requests(LLMEngine& engine, const std::vector<const ReferenceCase*>& cases) {
    for (const ReferenceCase* c : cases) {
      ASSERT_EQ(engine.add_request("forced/" + c->name, c->forced_prompt(),
                                   testing::fidelity::forced_scoring(kTopLogprobs)),
                std::nullopt);
      ASSERT_EQ(engine.add_request("gen/" + c->name, c->prompt_token_ids,
                                   testing::fidelity::greedy_with_logprobs(c->num_steps())),
                std::nullopt);
    }
  }

  static void check_case(const ReferenceCase& c,
                         const std::map<std::string, RequestOutput>& outputs, Agreement* forced,
                         Agreement* generated) {
    const RequestOutput& f = outputs.at("forced/" + c.name);
    ASSERT_TRUE(f.prompt_logprobs.has_value()) << c.name;
    testing::fidelity::expect_forced_agreement(c, *f.prompt_logprobs, kGapThreshold,
                                               kLogprobTolerance, forced);
    const RequestOutput& g = outputs.at("gen/" + c.name);
    ASSERT_EQ(g.outputs.size(), 1u);
    testing::fidelity::expect_generation_agreement(c, g.outputs[0], kGapThreshold,
                                                   kLogprobTolerance, generated);
  }

  void report(const std::string& scenario, const Agreement& forced,
              const Agreement& generated) const {
    std::cout << "[fidelity f32] " << GetParam() << " " << scenario
              << "\n  teacher-forced: " << forced.summary()
              << "\n  generation:     " << generated.summary() << std::endl;
    testing::fidelity::expect_argmax_checked(forced, scenario + " (teacher-forced)");
    testing::fidelity::expect_argmax_checked(generated, scenario + " (generation)");
  }

  EngineConfig config(const std::filesystem::path& model) const {
    EngineConfig c = testing::fidelity::reference_engine_config(model);
    c.cache.enable_prefix_caching = false;  // the scenarios that want it turn it on
    return c;
  }

  ReferenceModel ref_;
};

// Each request alone in the engine, every case.
TEST_P(FidelityF32, Alone) {
  VELLUM_REQUIRE_F32_MODEL(model, ref_.file);
  auto engine = LLMEngine::create(config(model));
  Agreement forced, generated;
  for (const ReferenceCase& c : ref_.cases) {
    ASSERT_EQ(engine->add_request("forced/" + c.name, c.forced_prompt(),
                                  testing::fidelity::forced_scoring(kTopLogprobs)),
              std::nullopt);
    auto outputs = testing::run_all(*engine);
    ASSERT_EQ(engine->add_request("gen/" + c.name, c.prompt_token_ids,
                                  testing::fidelity::greedy_with_logprobs(c.num_steps())),
              std::nullopt);
    outputs.merge(testing::run_all(*engine));
    check_case(c, outputs, &forced, &generated);
  }
  report("alone", forced, generated);
}

// Every case's two requests in one batch, made up to 16 with seeded sampled requests on the
// same prompts; the prompts share the first steps, then decode together.
TEST_P(FidelityF32, BatchedWithFifteenOthers) {
  VELLUM_REQUIRE_F32_MODEL(model, ref_.file);
  auto engine = LLMEngine::create(config(model));
  std::vector<const ReferenceCase*> cases;
  for (const ReferenceCase& c : ref_.cases) cases.push_back(&c);
  add_case_requests(*engine, cases);
  const size_t num_fillers = 16 - 2 * cases.size();
  for (size_t i = 0; i < num_fillers; ++i) {
    SamplingParams p;
    p.temperature = 0.8;
    p.seed = static_cast<int64_t>(i);
    p.max_tokens = 64;
    p.ignore_eos = true;
    const ReferenceCase& c = *cases[i % cases.size()];
    ASSERT_EQ(engine->add_request("filler/" + std::to_string(i), c.prompt_token_ids, p),
              std::nullopt);
  }
  const auto outputs = testing::run_all(*engine);
  ASSERT_EQ(outputs.size(), 16u);
  Agreement forced, generated;
  for (const ReferenceCase* c : cases) check_case(*c, outputs, &forced, &generated);
  report("batched with 15 others", forced, generated);
}

// A token budget of 24 per step, smaller than the prompts and not a multiple of the block size:
// the two longest cases' prompts (and the 64 forced tokens) are prefilled in chunks.
TEST_P(FidelityF32, ChunkedPrefill) {
  VELLUM_REQUIRE_F32_MODEL(model, ref_.file);
  EngineConfig cfg = config(model);
  cfg.scheduler.max_num_batched_tokens = 24;
  cfg.scheduler.max_num_seqs = 4;
  auto engine = LLMEngine::create(cfg);
  std::vector<const ReferenceCase*> cases;
  for (const ReferenceCase& c : ref_.cases) {
    if (static_cast<int64_t>(c.prompt_token_ids.size()) > cfg.scheduler.max_num_batched_tokens) {
      cases.push_back(&c);
    }
  }
  ASSERT_FALSE(cases.empty());
  std::sort(cases.begin(), cases.end(), [](const ReferenceCase* a, const ReferenceCase* b) {
    return a->prompt_token_ids.size() > b->prompt_token_ids.size();
  });
  if (cases.size() > 2) cases.resize(2);
  add_case_requests(*engine, cases);
  const auto outputs = testing::run_all(*engine);
  Agreement forced, generated;
  for (const ReferenceCase* c : cases) check_case(*c, outputs, &forced, &generated);
  report("chunked prefill (24-token budget)", forced, generated);
}

// The generation request starts from the blocks its teacher-forced twin cached (the forced
// prompt begins with the case's prompt): every full block of the prompt but the last token's.
// The first two cases with a full block of prompt.
TEST_P(FidelityF32, FromPrefixCacheHit) {
  VELLUM_REQUIRE_F32_MODEL(model, ref_.file);
  EngineConfig cfg = config(model);
  cfg.cache.enable_prefix_caching = true;
  auto engine = LLMEngine::create(cfg);
  Agreement forced, generated;
  int64_t num_cases = 0;
  for (const ReferenceCase& c : ref_.cases) {
    const auto prompt_len = static_cast<int64_t>(c.prompt_token_ids.size());
    if (prompt_len <= cfg.cache.block_size) continue;  // no full block to hit
    if (num_cases == 2) break;
    ++num_cases;
    ASSERT_EQ(engine->add_request("forced/" + c.name, c.forced_prompt(),
                                  testing::fidelity::forced_scoring(kTopLogprobs)),
              std::nullopt);
    auto outputs = testing::run_all(*engine);
    ASSERT_EQ(engine->add_request("gen/" + c.name, c.prompt_token_ids,
                                  testing::fidelity::greedy_with_logprobs(c.num_steps())),
              std::nullopt);
    outputs.merge(testing::run_all(*engine));
    EXPECT_EQ(outputs.at("gen/" + c.name).num_cached_tokens,
              (prompt_len - 1) / cfg.cache.block_size * cfg.cache.block_size)
        << c.name << ": prefix-cache hit";
    check_case(c, outputs, &forced, &generated);
  }
  ASSERT_GT(num_cases, 0);
  report("from a prefix-cache hit", forced, generated);
}

// K and V of one token in f32 over all layers: SmolLM2 30 layers x 3 KV heads x 64, Gemma 3 270M
// 18 x 1 x 256 (a byte budget, not a block count: Gemma's sliding and full layers are separate
// block groups in the hybrid KV cache manager, so its blocks hold fewer layers).
int64_t kv_bytes_per_token(const std::string& key) {
  const int64_t per_layer_kv = key == "smollm2" ? 3 * 64 : 1 * 256;
  const int64_t num_layers = key == "smollm2" ? 30 : 18;
  return num_layers * per_layer_kv * 2 * static_cast<int64_t>(sizeof(float));
}

// Every case's greedy generation at once in K/V room for 240 tokens: each fits alone (at most
// 194 tokens), together they do not, so requests are preempted (recomputed: prefix caching is
// off) and resumed.
TEST_P(FidelityF32, AfterPreemption) {
  VELLUM_REQUIRE_F32_MODEL(model, ref_.file);
  EngineConfig cfg = config(model);
  cfg.cache.kv_cache_memory_bytes = 240 * kv_bytes_per_token(GetParam());
  cfg.model.max_model_len = 224;
  auto engine = LLMEngine::create(cfg);
  for (const ReferenceCase& c : ref_.cases) {
    ASSERT_EQ(engine->add_request("gen/" + c.name, c.prompt_token_ids,
                                  testing::fidelity::greedy_with_logprobs(c.num_steps())),
              std::nullopt);
  }
  const auto outputs = testing::run_all(*engine);
  const EngineStats stats = engine->stats();
  EXPECT_GT(stats.num_preemptions, 0) << "the tiny KV budget should preempt";
  EXPECT_EQ(stats.kv_cache_usage, 0.0) << "blocks leaked";
  Agreement generated;
  for (const ReferenceCase& c : ref_.cases) {
    const RequestOutput& g = outputs.at("gen/" + c.name);
    ASSERT_EQ(g.outputs.size(), 1u);
    testing::fidelity::expect_generation_agreement(c, g.outputs[0], kGapThreshold,
                                                   kLogprobTolerance, &generated);
  }
  std::cout << "[fidelity f32] " << GetParam() << " after " << stats.num_preemptions
            << " preemptions\n  generation:     " << generated.summary() << std::endl;
  testing::fidelity::expect_argmax_checked(generated, "under preemption (generation)");
}

INSTANTIATE_TEST_SUITE_P(RealModels, FidelityF32, ::testing::Values("smollm2", "gemma3"),
                         testing::fidelity::model_key_name);

}  // namespace
}  // namespace vellum
