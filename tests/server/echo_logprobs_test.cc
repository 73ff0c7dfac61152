// /v1/completions with echo and logprobs, as loglikelihood-based evaluation harnesses call it,
// on the real SmolLM2 Q4_1 model: the prompt token logprobs the API returns must be the engine's
// own prompt_logprobs for the same prompt. lm-evaluation-harness's `local-completions` sends
// {"prompt": [[ids...], ...], "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234,
// "echo": true} and sums choices[i].logprobs.token_logprobs[ctxlen:-1].
//
// Both engines run with --batch-invariant, so a prompt's logits do not depend on which other
// prompts share its step (the server and the reference may batch differently).
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "test_util.h"
#include "vellum/engine.h"
#include "vellum/engine_client.h"

namespace vellum::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kModelName = "smollm2";
constexpr double kTolerance = 1e-5;

EngineConfig smollm2_config(const std::string& path) {
  EngineConfig config;
  config.model.model = path;
  config.model.batch_invariant = true;
  config.cache.cache_dtype = "f32";
  config.model.max_model_len = 512;
  config.cache.kv_cache_memory_bytes = int64_t{64} << 20;
  config.parallel.num_threads = 2;
  return config;
}

// Code points of a UTF-8 string (Python's len(), which vLLM's text_offset counts in).
int64_t num_code_points(const std::string& text) {
  int64_t count = 0;
  for (unsigned char c : text) count += (c & 0xC0) != 0x80;
  return count;
}

class EchoLogprobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto model = ::vellum::testing::real_model_file("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (model.empty()) return;
    client_ = new EngineClient(smollm2_config(model.string()));
    reference_ = new LLM(smollm2_config(model.string()));
    ServerOptions options;
    options.port = 0;
    options.served_model_name = kModelName;
    options.model_path = model.string();
    options.num_http_threads = 4;
    server_ = new HttpServer(options, *client_);
    port_ = server_->bind().value_or(0);
    thread_ = new std::thread([] { server_->serve(); });
    if (!client_->wait_until_ready()) return;
    server_->on_engine_ready(nullptr);
  }

  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    server_->shutdown(2s);
    thread_->join();
    delete thread_;
    delete server_;
    delete client_;
    delete reference_;
  }

  void SetUp() override {
    VELLUM_REQUIRE_REAL_MODEL(model, "SmolLM2-135M-Instruct.Q4_1.gguf");
    ASSERT_GT(port_, 0) << "the server could not bind";
    ASSERT_EQ(client_->state(), EngineClient::State::kReady) << client_->failure();
  }

  static json post_completion(const json& body) {
    httplib::Client http("127.0.0.1", port_);
    // The ctest TIMEOUT (600 s) is the limit: a shorter read timeout races the machine's
    // load (the scalar kernels on a loaded 2-core machine took over 120 s for one request).
    http.set_read_timeout(600, 0);
    auto res = http.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body);
  }

  // The engine's own prompt logprobs (entry k: prompt token k + 1) of each prompt.
  static std::vector<RequestOutput> engine_prompt_logprobs(const std::vector<Prompt>& prompts,
                                                           int64_t num_top) {
    SamplingParams params;
    params.prompt_logprobs = num_top;
    params.max_tokens = 1;
    params.temperature = 0.0;
    return reference_->generate(prompts, params);
  }

  static std::vector<int32_t> encode(const std::string& text) {
    return reference_->engine().encode(text, true);
  }

  // Checks an echoed choice's logprobs block against the engine's prompt logprobs.
  static void expect_echoed_prompt(const json& choice, const RequestOutput& expected,
                                   size_t num_generated) {
    const json& logprobs = choice["logprobs"];
    const size_t prompt_len = expected.prompt_token_ids.size();
    ASSERT_TRUE(expected.prompt_logprobs.has_value());
    ASSERT_EQ(expected.prompt_logprobs->size(), prompt_len - 1);
    ASSERT_EQ(logprobs["tokens"].size(), prompt_len + num_generated) << choice.dump();
    ASSERT_EQ(logprobs["token_logprobs"].size(), prompt_len + num_generated);
    ASSERT_EQ(logprobs["top_logprobs"].size(), prompt_len + num_generated);
    ASSERT_EQ(logprobs["text_offset"].size(), prompt_len + num_generated);
    // The first prompt token has no logprob (nothing precedes it).
    EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
    EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
    const LLMEngine& engine = reference_->engine();
    for (size_t k = 1; k < prompt_len; ++k) {
      const TokenLogprobs& want = (*expected.prompt_logprobs)[k - 1];
      ASSERT_EQ(want.token_id, expected.prompt_token_ids[k]);
      const std::string token = engine.decode({want.token_id}, false);
      EXPECT_EQ(logprobs["tokens"][k], token) << "position " << k;
      ASSERT_TRUE(logprobs["token_logprobs"][k].is_number()) << "position " << k;
      EXPECT_NEAR(logprobs["token_logprobs"][k].get<double>(), want.logprob, kTolerance)
          << "position " << k;
      // top_logprobs holds the prompt token itself with the same value (lm-eval's is_greedy
      // compares the two).
      const json& top = logprobs["top_logprobs"][k];
      ASSERT_TRUE(top.contains(token)) << top.dump();
      EXPECT_NEAR(top[token].get<double>(), want.logprob, kTolerance);
    }
    // text_offset counts characters of the tokens, from 0 (vLLM: len() of each token string).
    EXPECT_EQ(logprobs["text_offset"][0], 0);
    for (size_t k = 1; k < logprobs["tokens"].size(); ++k) {
      EXPECT_EQ(logprobs["text_offset"][k].get<int64_t>() -
                    logprobs["text_offset"][k - 1].get<int64_t>(),
                num_code_points(logprobs["tokens"][k - 1].get<std::string>()))
          << "position " << k;
    }
  }

  static inline EngineClient* client_ = nullptr;
  static inline LLM* reference_ = nullptr;
  static inline HttpServer* server_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline int port_ = 0;
};

// lm-evaluation-harness's loglikelihood request: token-id prompts, one generated token.
TEST_F(EchoLogprobsTest, LmEvalLoglikelihoodRequestGivesTheEnginesPromptLogprobs) {
  const std::vector<int32_t> first =
      encode("The capital of France is Paris. The capital of Italy is Rome.");
  const std::vector<int32_t> second =
      encode("Question: what is 2 + 2?\nAnswer: 4 (four) ✓ café");
  const json body{{"model", kModelName},   {"prompt", {first, second}}, {"temperature", 0},
                  {"max_tokens", 1},       {"logprobs", 1},             {"seed", 1234},
                  {"echo", true}};
  const json response = post_completion(body);
  ASSERT_EQ(response["choices"].size(), 2u) << response.dump();
  const std::vector<RequestOutput> expected = engine_prompt_logprobs({first, second}, 1);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const json& choice = response["choices"][i];
    EXPECT_EQ(choice["index"], i);
    expect_echoed_prompt(choice, expected[i], 1);
    // The generated token follows the prompt: lm-eval drops it with [ctxlen:-1].
    const size_t prompt_len = expected[i].prompt_token_ids.size();
    EXPECT_TRUE(choice["logprobs"]["token_logprobs"][prompt_len].is_number());
    EXPECT_EQ(choice["text"].get<std::string>().rfind(reference_->engine().decode(
                  expected[i].prompt_token_ids, true), 0),
              0u)
        << "the echoed text starts with the prompt";
  }
}

// echo with max_tokens = 0 returns the prompt alone; vLLM's prompt_logprobs field carries the same
// values keyed by token id.
TEST_F(EchoLogprobsTest, EchoOnlyAndPromptLogprobsFieldGiveTheEnginesValues) {
  const std::string text = "Once upon a time, in a land far away, there lived a small dragon.";
  const json body{{"model", kModelName}, {"prompt", text},       {"temperature", 0},
                  {"max_tokens", 0},     {"logprobs", 2},        {"echo", true},
                  {"prompt_logprobs", 2}};
  const json response = post_completion(body);
  ASSERT_EQ(response["choices"].size(), 1u) << response.dump();
  const json& choice = response["choices"][0];
  const std::vector<RequestOutput> expected = engine_prompt_logprobs({text}, 2);
  EXPECT_EQ(choice["text"], text);
  expect_echoed_prompt(choice, expected[0], 0);
  const json& prompt_logprobs = choice["prompt_logprobs"];
  const RequestOutput& want = expected[0];
  ASSERT_EQ(prompt_logprobs.size(), want.prompt_token_ids.size()) << choice.dump();
  EXPECT_TRUE(prompt_logprobs[0].is_null());
  for (size_t k = 1; k < prompt_logprobs.size(); ++k) {
    const TokenLogprobs& position = (*want.prompt_logprobs)[k - 1];
    const json& entry = prompt_logprobs[k];
    const std::string key = std::to_string(position.token_id);
    ASSERT_TRUE(entry.contains(key)) << entry.dump();
    EXPECT_NEAR(entry[key]["logprob"].get<double>(), position.logprob, kTolerance);
    EXPECT_EQ(entry[key]["rank"], position.rank);
    for (const auto& [id, logprob] : position.top) {
      ASSERT_TRUE(entry.contains(std::to_string(id))) << entry.dump();
      EXPECT_NEAR(entry[std::to_string(id)]["logprob"].get<double>(), logprob, kTolerance);
    }
  }
}

}  // namespace
}  // namespace vellum::server
