// End-to-end: the engine (scheduler + KV cache manager + model + sampler + detokenizer)
// reproduces llama.cpp's greedy tokens, alone and batched, and its text.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"

namespace vellum {
namespace {

using nlohmann::json;

void check_model(const std::string& model_file, bool together, const std::string& kv_dtype) {
  VELLUM_REQUIRE_MODEL_FILE(greedy_path, "reference/greedy.json");
  VELLUM_REQUIRE_MODEL_FILE(model_path, model_file);
  std::ifstream in(greedy_path);
  const json greedy = json::parse(in);
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.cache.cache_dtype = kv_dtype;
  LLM llm(config);
  std::vector<Prompt> prompts;
  std::vector<json> cases;
  for (const auto& c : greedy["cases"]) {
    if (c["model"] != model_file) continue;
    prompts.emplace_back(c["prompt"].get<std::string>());
    cases.push_back(c);
  }
  ASSERT_FALSE(cases.empty());
  auto check = [&](const RequestOutput& out, const json& c) {
    EXPECT_EQ(out.prompt_token_ids, c["prompt_token_ids"].get<std::vector<int32_t>>())
        << c["prompt"];
    ASSERT_EQ(out.outputs.size(), 1u);
    EXPECT_EQ(out.outputs[0].token_ids, c["generated_token_ids"].get<std::vector<int32_t>>())
        << model_file << " '" << c["prompt"].get<std::string>() << "'";
    if (!c.contains("generated_text_valid_utf8")) {
      EXPECT_EQ(out.outputs[0].text, c["generated_text"].get<std::string>());
    }
    EXPECT_EQ(out.outputs[0].finish_reason, "length");
  };
  if (together) {
    const auto outputs = llm.generate(prompts, testing::greedy(48));
    for (size_t i = 0; i < cases.size(); ++i) check(outputs[i], cases[i]);
  } else {
    for (size_t i = 0; i < cases.size(); ++i) {
      check(llm.generate({prompts[i]}, testing::greedy(48))[0], cases[i]);
    }
  }
}

TEST(EngineGreedy, Stories260KAlone) { check_model("stories260K.gguf", false, "f32"); }
TEST(EngineGreedy, Stories260KBatched) { check_model("stories260K.gguf", true, "f32"); }
TEST(EngineGreedy, TinyRandomAlone) { check_model("llama-2-tiny-random.gguf", false, "f32"); }
TEST(EngineGreedy, TinyRandomBatched) { check_model("llama-2-tiny-random.gguf", true, "f32"); }

// A streamed (delta) request's pieces concatenate to the final text of a cumulative one.
TEST(EngineGreedy, DeltaOutputsConcatenateToFinalText) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  SamplingParams delta = testing::greedy(40);
  delta.output_kind = RequestOutputKind::kDelta;
  SamplingParams cumulative = testing::greedy(40);
  ASSERT_FALSE(engine->add_request("d", std::string("Once upon a time"), delta));
  ASSERT_FALSE(engine->add_request("c", std::string("Once upon a time"), cumulative));
  std::string streamed;
  std::vector<int32_t> streamed_ids;
  std::string final_text;
  int num_delta_outputs = 0;
  while (engine->has_unfinished_requests()) {
    for (const RequestOutput& out : engine->step()) {
      if (out.request_id == "d") {
        ++num_delta_outputs;
        streamed += out.outputs[0].text;
        streamed_ids.insert(streamed_ids.end(), out.outputs[0].token_ids.begin(),
                            out.outputs[0].token_ids.end());
      } else if (out.finished) {
        final_text = out.outputs[0].text;
      }
    }
  }
  EXPECT_GT(num_delta_outputs, 10);
  EXPECT_EQ(streamed, final_text);
  EXPECT_EQ(streamed_ids.size(), 40u);
}

TEST(EngineGreedy, StopStringTruncatesWithAndWithoutInclude) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  LLM llm(testing::tiny_engine_config(model_path));
  // Greedy text: ", there was a little girl named Lily. She loved to play outside ..."
  SamplingParams p = testing::greedy(48);
  p.stop = {"Lily"};
  auto out = llm.generate({std::string("Once upon a time")}, p)[0];
  EXPECT_EQ(out.outputs[0].text, ", there was a little girl named ");
  EXPECT_EQ(out.outputs[0].finish_reason, "stop");
  EXPECT_EQ(out.outputs[0].stop_reason_text, "Lily");
  p.include_stop_str_in_output = true;
  out = llm.generate({std::string("Once upon a time")}, p)[0];
  EXPECT_EQ(out.outputs[0].text, ", there was a little girl named Lily");
}

TEST(EngineGreedy, SeededSamplingIsReproducibleInsideABatch) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  LLM llm(testing::tiny_engine_config(model_path));
  SamplingParams seeded;
  seeded.temperature = 1.0;
  seeded.seed = 1234;
  seeded.max_tokens = 32;
  const auto alone = llm.generate({std::string("The little dog")}, seeded)[0];
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (int i = 0; i < 32; ++i) {
    prompts.emplace_back(std::string(i % 2 ? "Lily and Tom" : "One day"));
    SamplingParams other;
    other.temperature = 0.8;
    other.max_tokens = 8 + i;
    params.push_back(other);
  }
  prompts.emplace(prompts.begin() + 7, std::string("The little dog"));
  params.insert(params.begin() + 7, seeded);
  const auto batch = llm.generate(prompts, params);
  EXPECT_EQ(batch[7].outputs[0].token_ids, alone.outputs[0].token_ids);
}

}  // namespace
}  // namespace vellum

namespace vellum {
namespace {

TEST(EngineMetrics, RequestTimesAndCountersAreRecorded) {
  VELLUM_REQUIRE_MODEL_FILE(model_path, "stories260K.gguf");
  auto engine = LLMEngine::create(testing::tiny_engine_config(model_path));
  ASSERT_FALSE(engine->add_request("a", std::string("Once upon a time"), testing::greedy(10)));
  ASSERT_FALSE(engine->add_request("b", std::string("The little dog"), testing::greedy(5)));
  EXPECT_EQ(engine->stats().num_waiting, 2);
  engine->step();
  EXPECT_EQ(engine->stats().num_running, 2);
  EXPECT_GT(engine->stats().kv_cache_usage, 0.0);
  auto done = testing::run_all(*engine);
  const RequestMetrics& m = done.at("a").metrics;
  EXPECT_GT(m.arrival_time, 0.0);
  EXPECT_GE(m.first_scheduled_time, m.arrival_time);
  EXPECT_GE(m.first_token_time, m.first_scheduled_time);
  EXPECT_GE(m.finished_time, m.first_token_time);
  EXPECT_EQ(m.inter_token_latencies.size(), 9u);  // 10 tokens, one per step
  const EngineStats stats = engine->stats();
  EXPECT_EQ(stats.generation_tokens, 15);
  EXPECT_EQ(stats.prompt_tokens, static_cast<int64_t>(done.at("a").prompt_token_ids.size() +
                                                      done.at("b").prompt_token_ids.size()));
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);
}

}  // namespace
}  // namespace vellum
