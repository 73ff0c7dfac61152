// What vLLM's own server tests (tests/vllm_api/) showed missing, checked here on the tiny stories
// model so that the default suite holds it: --root-path, --enable-force-include-usage,
// --enable-per-request-metrics, a finished choice of a streamed n > 1 request sending nothing
// more, kv_transfer_params.prompt_token_ids, and the Responses API (/v1/responses).
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "server/metrics.h"
#include "test_util.h"
#include "vellum/engine_client.h"

namespace vellum::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kKey = "parity-key";
constexpr const char* kModelName = "stories";
constexpr const char* kRootPath = "/llm";
constexpr const char* kChatTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

class VllmParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto model = ::vellum::testing::model_file("stories260K.gguf");
    if (model.empty()) return;
    EngineConfig config;
    config.model.model = model.string();
    config.cache.cache_dtype = "f32";
    config.cache.kv_cache_memory_bytes = int64_t{64} << 20;
    config.parallel.num_threads = 2;
    client_ = new EngineClient(config);
    ServerOptions options;
    options.port = 0;
    options.api_key = kKey;
    options.served_model_name = kModelName;
    options.model_path = model.string();
    options.num_http_threads = 8;
    options.root_path = std::string(kRootPath) + "/";  // a trailing '/' names the same prefix
    options.force_include_usage = true;
    options.per_request_metrics = true;
    server_ = new HttpServer(options, *client_);
    port_ = server_->bind().value_or(0);
    thread_ = new std::thread([] { server_->serve(); });
    if (!client_->wait_until_ready()) return;
    metrics_ = new ServerMetrics(MetricsOptions{"vellum", kModelName,
                                                client_->engine().max_model_len(),
                                                client_->engine().config().cache});
    server_->on_engine_ready(metrics_);
  }

  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    server_->shutdown(2s);
    thread_->join();
    delete thread_;
    delete server_;
    delete client_;
    delete metrics_;
  }

  void SetUp() override {
    VELLUM_REQUIRE_MODEL_FILE(model, "stories260K.gguf");
    ASSERT_GT(port_, 0) << "the server could not bind";
    ASSERT_EQ(client_->state(), EngineClient::State::kReady) << client_->failure();
  }

  static std::unique_ptr<httplib::Client> http(bool auth = true) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(120, 0);
    if (auth) c->set_bearer_token_auth(kKey);
    return c;
  }

  static json post_json(const std::string& path, const json& body) {
    auto res = http()->Post(path.c_str(), body.dump(), "application/json");
    if (!res) return json{{"transport_error", true}};
    json out = json::parse(res->body, nullptr, false);
    out["__status"] = res->status;
    return out;
  }

  // The JSON payloads of an SSE body ("event:" lines skipped), without "[DONE]".
  static std::vector<json> sse_events(const std::string& path, const json& body) {
    auto res = http()->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    std::vector<json> events;
    size_t pos = 0;
    while (pos < res->body.size()) {
      const size_t end = res->body.find("\n\n", pos);
      if (end == std::string::npos) break;
      std::string event = res->body.substr(pos, end - pos);
      pos = end + 2;
      if (event.rfind("event: ", 0) == 0) event = event.substr(event.find('\n') + 1);
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
      const std::string data = event.substr(6);
      if (data != "[DONE]") events.push_back(json::parse(data));
    }
    return events;
  }

  static inline EngineClient* client_ = nullptr;
  static inline ServerMetrics* metrics_ = nullptr;
  static inline HttpServer* server_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(VllmParityTest, RoutesAnswerUnderTheRootPathAndWithoutIt) {
  for (const char* path : {"/v1/models", "/llm/v1/models"}) {
    auto res = http()->Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    auto denied = http(false)->Get(path);
    ASSERT_TRUE(denied);
    EXPECT_EQ(denied->status, 401) << path << " must need the API key under the root path too";
  }
  auto other = http()->Get("/other/v1/models");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  auto health = http(false)->Get("/llm/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(VllmParityTest, ForcedUsageOnEveryChunkAndMetricsOnTheLast) {
  const json request{{"messages", {{{"role", "user"}, {"content", "Tell a story"}}}},
                     {"chat_template", kChatTemplate},
                     {"max_tokens", 6},
                     {"min_tokens", 6},
                     {"temperature", 0},
                     {"stream", true}};
  const std::vector<json> chunks = sse_events("/v1/chat/completions", request);
  ASSERT_GE(chunks.size(), 3u);
  int64_t last_completion_tokens = -1;
  for (const json& chunk : chunks) {
    ASSERT_TRUE(chunk.contains("usage") && chunk["usage"].is_object()) << chunk.dump();
    const int64_t completion = chunk["usage"]["completion_tokens"];
    EXPECT_GE(completion, last_completion_tokens);
    EXPECT_EQ(chunk["usage"]["total_tokens"].get<int64_t>(),
              chunk["usage"]["prompt_tokens"].get<int64_t>() + completion);
    last_completion_tokens = completion;
  }
  const json& last = chunks.back();
  EXPECT_TRUE(last["choices"].empty()) << last.dump();
  EXPECT_EQ(last["usage"]["completion_tokens"], 6);
  ASSERT_TRUE(last.contains("metrics")) << last.dump();
  for (const char* field : {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms",
                            "mean_itl_ms", "tokens_per_second"}) {
    ASSERT_TRUE(last["metrics"].contains(field)) << field << " in " << last.dump();
    EXPECT_GE(last["metrics"][field].get<double>(), 0.0) << field;
  }
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_FALSE(chunks[i].contains("metrics"));
}

TEST_F(VllmParityTest, PerRequestMetricsInAnUnstreamedResponse) {
  const json body = post_json("/v1/completions", {{"prompt", "Once upon a time"},
                                                  {"max_tokens", 1},
                                                  {"temperature", 0}});
  ASSERT_EQ(body["__status"], 200) << body.dump();
  ASSERT_TRUE(body.contains("metrics")) << body.dump();
  EXPECT_GE(body["metrics"]["time_to_first_token_ms"].get<double>(), 0.0);
  // One token has no inter-token latency: the field is left out, as vLLM leaves it None.
  EXPECT_FALSE(body["metrics"].contains("mean_itl_ms")) << body.dump();
}

TEST_F(VllmParityTest, AFinishedChoiceOfAStreamedNRequestSendsNothingMore) {
  // Six sampled choices that stop at their first "e" end at different steps; each must send its
  // finish reason once and then nothing (vLLM), not an empty chunk on every later step.
  const json request{{"prompt", "Once upon a time"}, {"n", 6},       {"temperature", 1.0},
                     {"seed", 7},                    {"stop", {"e"}}, {"max_tokens", 40},
                     {"stream", true}};
  const std::vector<json> chunks = sse_events("/v1/completions", request);
  std::map<int, int> finishes;
  std::map<int, size_t> finish_position;
  for (size_t position = 0; position < chunks.size(); ++position) {
    for (const json& choice : chunks[position]["choices"]) {
      const int index = choice["index"];
      EXPECT_EQ(finishes[index], 0) << "choice " << index << " sent a chunk after its finish";
      if (!choice["finish_reason"].is_null()) {
        ++finishes[index];
        finish_position[index] = position;
      }
    }
  }
  ASSERT_EQ(finishes.size(), 6u);
  for (const auto& [index, count] : finishes) EXPECT_EQ(count, 1) << "choice " << index;
  std::set<size_t> distinct;
  for (const auto& [index, position] : finish_position) distinct.insert(position);
  EXPECT_GT(distinct.size(), 1u) << "the choices all finished together: the check is vacuous";
}

TEST_F(VllmParityTest, ForwardedPromptTokenIdsAreUsedAsGiven) {
  const std::vector<int> ids = {1, 400, 401, 402, 403};
  const json body = post_json(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "something else entirely"}}}},
       {"chat_template", kChatTemplate},
       {"max_tokens", 3},
       {"return_token_ids", true},
       {"kv_transfer_params", {{"prompt_token_ids", ids}}}});
  ASSERT_EQ(body["__status"], 200) << body.dump();
  EXPECT_EQ(body["prompt_token_ids"], json(ids));
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);

  const json plain = post_json("/v1/chat/completions",
                               {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"chat_template", kChatTemplate},
                                {"max_tokens", 1}});
  ASSERT_EQ(plain["__status"], 200) << plain.dump();
  EXPECT_TRUE(plain.contains("prompt_token_ids") && plain["prompt_token_ids"].is_null())
      << "vLLM sends prompt_token_ids as null without return_token_ids";

  const json refused = post_json(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
       {"chat_template", kChatTemplate},
       {"kv_transfer_params", {{"do_remote_prefill", true}}}});
  EXPECT_EQ(refused["__status"], 400) << refused.dump();
  EXPECT_EQ(refused["error"]["param"], "kv_transfer_params.do_remote_prefill");
}

TEST_F(VllmParityTest, ARequiredToolCallCutByMaxTokensHasNoCallsAndNoContent) {
  const json tools = {{{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}}};
  const json body = post_json("/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                               {"chat_template", kChatTemplate},
                               {"tools", tools},
                               {"tool_choice", "required"},
                               {"max_completion_tokens", 1},
                               {"temperature", 0}});
  ASSERT_EQ(body["__status"], 200) << body.dump();
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_FALSE(choice["message"].contains("tool_calls")) << body.dump();
  EXPECT_EQ(choice["message"]["content"], "") << body.dump();
}

TEST_F(VllmParityTest, TruncationSideRightKeepsTheFirstTokens) {
  const std::vector<int> ids = {1, 400, 401, 402, 403, 404};
  for (const auto& [side, expected] : {std::pair<std::string, std::vector<int>>{"right", {1, 400, 401}},
                                       std::pair<std::string, std::vector<int>>{"left", {402, 403, 404}}}) {
    const json body = post_json("/v1/completions", {{"prompt", ids},
                                                     {"max_tokens", 1},
                                                     {"truncate_prompt_tokens", 3},
                                                     {"truncation_side", side},
                                                     {"return_token_ids", true}});
    ASSERT_EQ(body["__status"], 200) << body.dump();
    EXPECT_EQ(body["choices"][0]["prompt_token_ids"], json(expected)) << side;
  }
  const json refused = post_json("/v1/completions", {{"prompt", "x"},
                                                     {"logprobs", 1},
                                                     {"logprob_token_ids", {5}}});
  EXPECT_EQ(refused["__status"], 400) << refused.dump();
  EXPECT_EQ(refused["error"]["param"], "logprob_token_ids");
}

TEST_F(VllmParityTest, ResponsesUnstreamedStoredAndContinued) {
  const json first = post_json("/v1/responses", {{"input", "Tell a story"},
                                                 {"instructions", "Be brief."},
                                                 {"chat_template", kChatTemplate},
                                                 {"max_output_tokens", 5},
                                                 {"temperature", 0}});
  ASSERT_EQ(first["__status"], 200) << first.dump();
  EXPECT_EQ(first["object"], "response");
  EXPECT_EQ(first["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(first["model"], kModelName);
  EXPECT_EQ(first["instructions"], "Be brief.");
  ASSERT_FALSE(first["output"].empty());
  const json& message = first["output"].back();
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["content"][0]["type"], "output_text");
  EXPECT_EQ(first["usage"]["output_tokens"].get<int>(), 5);
  // Cut by max_output_tokens: incomplete, with the reason (OpenAI, vLLM).
  EXPECT_EQ(first["status"], "incomplete");
  EXPECT_EQ(first["incomplete_details"]["reason"], "max_output_tokens");

  auto stored = http()->Get(("/v1/responses/" + first["id"].get<std::string>()).c_str());
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->status, 200) << stored->body;
  EXPECT_EQ(json::parse(stored->body)["output"], first["output"]);

  // previous_response_id continues the conversation: the stored turn is part of the prompt.
  const json second = post_json("/v1/responses", {{"input", "And then?"},
                                                  {"previous_response_id", first["id"]},
                                                  {"chat_template", kChatTemplate},
                                                  {"max_output_tokens", 3},
                                                  {"temperature", 0}});
  ASSERT_EQ(second["__status"], 200) << second.dump();
  EXPECT_EQ(second["previous_response_id"], first["id"]);
  EXPECT_GT(second["usage"]["input_tokens"].get<int>(),
            first["usage"]["input_tokens"].get<int>() + first["usage"]["output_tokens"].get<int>());

  const json missing = post_json("/v1/responses", {{"input", "x"},
                                                   {"previous_response_id", "resp_nope"},
                                                   {"chat_template", kChatTemplate}});
  EXPECT_EQ(missing["__status"], 404) << missing.dump();
  auto unknown = http()->Get("/v1/responses/resp_nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(VllmParityTest, ResponsesStreamedEventsNestAndMatchTheFinalText) {
  const std::vector<json> events = sse_events("/v1/responses",
                                              {{"input", "Tell a story"},
                                               {"chat_template", kChatTemplate},
                                               {"max_output_tokens", 8},
                                               {"temperature", 0},
                                               {"top_logprobs", 2},
                                               {"stream", true}});
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front()["type"], "response.created");
  EXPECT_EQ(events[1]["type"], "response.in_progress");
  EXPECT_EQ(events.back()["type"], "response.completed");
  // Starts and ends nest (vLLM's validate_streaming_event_stack), deltas sharing one slot.
  const std::map<std::string, std::string> opener = {
      {"response.completed", "response.created"},
      {"response.output_item.done", "response.output_item.added"},
      {"response.content_part.done", "response.content_part.added"},
      {"response.output_text.done", "response.output_text.delta"}};
  std::vector<std::string> stack;
  std::string streamed;
  int64_t sequence = 0;
  for (const json& event : events) {
    EXPECT_EQ(event["sequence_number"], sequence++);
    const std::string type = event["type"];
    if (type == "response.output_text.delta") {
      streamed += event["delta"].get<std::string>();
      ASSERT_FALSE(event["logprobs"].empty()) << event.dump();
      EXPECT_LE(event["logprobs"][0]["top_logprobs"].size(), 2u);
      if (!stack.empty() && stack.back() == type) continue;
    }
    if (auto it = opener.find(type); it != opener.end()) {
      ASSERT_FALSE(stack.empty()) << type;
      EXPECT_EQ(stack.back(), it->second) << type;
      stack.pop_back();
    } else if (type == "response.created" || type.ends_with(".added") ||
               type == "response.output_text.delta") {
      stack.push_back(type);
    }
  }
  EXPECT_TRUE(stack.empty());
  const json& response = events.back()["response"];
  EXPECT_EQ(response["usage"]["output_tokens"], 8);
  EXPECT_EQ(response["output"].back()["content"][0]["text"], streamed);
}

TEST_F(VllmParityTest, ResponsesRefuseWhatTheEngineDoesNotServe) {
  const json hosted = post_json("/v1/responses", {{"input", "x"},
                                                  {"chat_template", kChatTemplate},
                                                  {"tools", {{{"type", "web_search"}}}}});
  EXPECT_EQ(hosted["__status"], 400) << hosted.dump();
  EXPECT_EQ(hosted["error"]["param"], "tools");
  const json image = post_json(
      "/v1/responses",
      {{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}},
       {"chat_template", kChatTemplate}});
  EXPECT_EQ(image["__status"], 400) << image.dump();
  const json background = post_json(
      "/v1/responses", {{"input", "x"}, {"chat_template", kChatTemplate}, {"background", true}});
  EXPECT_EQ(background["__status"], 400) << background.dump();
  EXPECT_EQ(background["error"]["param"], "background");
}

}  // namespace
}  // namespace vellum::server
