// End to end: the HTTP server on 127.0.0.1 (any free port) over a real EngineClient with
// stories260K, talked to with httplib::Client and a raw socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <sstream>
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

constexpr const char* kKey = "test-key";
constexpr const char* kModelName = "stories";
constexpr size_t kMaxBody = size_t{1} << 20;
constexpr const char* kChatTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

class ServerHttpTest : public ::testing::Test {
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
    options.max_body_bytes = kMaxBody;
    options.num_http_threads = 8;
    server_ = new HttpServer(options, *client_);
    port_ = server_->bind().value_or(0);
    thread_ = new std::thread([] { server_->serve(); });
    // Until the server is told the engine is ready, model endpoints answer 503.
    httplib::Client http("127.0.0.1", port_);
    http.set_bearer_token_auth(kKey);
    if (auto res = http.Get("/health")) loading_health_status_ = res->status;
    if (auto res = http.Post("/v1/completions", R"({"prompt": "x"})", "application/json")) {
      loading_completion_status_ = res->status;
      loading_completion_body_ = res->body;
    }
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
    if (server_ == nullptr) {
      VELLUM_SKIP_FOR_MISSING_MODEL() << "test model 'stories260K.gguf' not found: put the "
                                         "shared models at ../shared/models or set "
                                         "VELLUM_TEST_MODELS";
    }
    ASSERT_GT(port_, 0) << "the server could not bind";
    ASSERT_EQ(client_->state(), EngineClient::State::kReady) << client_->failure();
  }

  static std::unique_ptr<httplib::Client> http(bool auth = true) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    // The ctest TIMEOUT (600 s) is the limit: a shorter read timeout races the machine's
    // load (the scalar kernels on a loaded 2-core machine took over 120 s for one request).
    c->set_read_timeout(600, 0);
    if (auth) c->set_bearer_token_auth(kKey);
    return c;
  }

  static httplib::Result post(const std::string& path, const json& body) {
    return http()->Post(path.c_str(), body.dump(), "application/json");
  }

  // The JSON payloads of an SSE body, with "[DONE]" as a string.
  static std::vector<json> sse_events(const std::string& body) {
    std::vector<json> events;
    size_t pos = 0;
    while (pos < body.size()) {
      const size_t end = body.find("\n\n", pos);
      if (end == std::string::npos) break;
      const std::string event = body.substr(pos, end - pos);
      pos = end + 2;
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
      const std::string data = event.substr(6);
      events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    }
    EXPECT_EQ(pos, body.size()) << "trailing bytes after the last event";
    return events;
  }

  // vellum:request_success_total{...,finished_reason="<reason>"} from /metrics.
  static double finished_count(const std::string& reason) {
    auto res = http()->Get("/metrics");
    if (!res || res->status != 200) return -1;
    std::istringstream lines(res->body);
    std::string line;
    const std::string needle = "finished_reason=\"" + reason + "\"}";
    while (std::getline(lines, line)) {
      if (line.rfind("vellum:request_success_total{", 0) == 0 &&
          line.find(needle) != std::string::npos) {
        return std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return -1;
  }

  static void expect_error(const httplib::Result& res, int status, const std::string& type,
                           const json& param) {
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    const json body = json::parse(res->body);
    EXPECT_EQ(body["error"]["type"], type) << res->body;
    EXPECT_EQ(body["error"]["code"], status) << res->body;
    EXPECT_EQ(body["error"]["param"], param) << res->body;
  }

  static inline EngineClient* client_ = nullptr;
  static inline ServerMetrics* metrics_ = nullptr;
  static inline HttpServer* server_ = nullptr;
  static inline std::thread* thread_ = nullptr;
  static inline int port_ = 0;
  static inline int loading_health_status_ = 0;
  static inline int loading_completion_status_ = 0;
  static inline std::string loading_completion_body_;
};

TEST_F(ServerHttpTest, AnswersServiceUnavailableUntilTheEngineIsReady) {
  EXPECT_EQ(loading_health_status_, 503);
  EXPECT_EQ(loading_completion_status_, 503);
  EXPECT_EQ(json::parse(loading_completion_body_)["error"]["type"], "ServiceUnavailableError");
  auto res = http(false)->Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(res->body.empty());
}

TEST_F(ServerHttpTest, CompletionNonStreamed) {
  const json request{{"model", kModelName}, {"prompt", "Once upon a time"}, {"max_tokens", 12},
                     {"temperature", 0},     {"ignore_eos", true}};
  auto res = post("/v1/completions", request);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  const json body = json::parse(res->body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], kModelName);
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(body["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["usage"]["total_tokens"].get<int>(),
            body["usage"]["prompt_tokens"].get<int>() + 12);
  EXPECT_TRUE(body["usage"]["prompt_tokens_details"].contains("cached_tokens"));

  // Greedy is deterministic; the repeat hits the prefix cache for its full prompt blocks.
  auto again = post("/v1/completions", request);
  ASSERT_TRUE(again);
  EXPECT_EQ(json::parse(again->body)["choices"][0]["text"], body["choices"][0]["text"]);
}

TEST_F(ServerHttpTest, CompletionStreamedMatchesNonStreamed) {
  json request{{"prompt", "The little dog"}, {"max_tokens", 10}, {"temperature", 0},
               {"ignore_eos", true}};
  auto plain = post("/v1/completions", request);
  ASSERT_TRUE(plain);
  const std::string expected = json::parse(plain->body)["choices"][0]["text"];

  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  request["logprobs"] = 1;
  auto res = post("/v1/completions", request);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const auto events = sse_events(res->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json& usage_chunk = events[events.size() - 2];
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 10);
  std::string text;
  int num_tokens = 0;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json& choice = events[i]["choices"][0];
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_FALSE(events[i].contains("usage"));  // no continuous_usage_stats
    text += choice["text"].get<std::string>();
    num_tokens += static_cast<int>(choice["logprobs"]["tokens"].size());
    const bool last = i + 3 == events.size();
    EXPECT_EQ(choice["finish_reason"].is_null(), !last);
  }
  EXPECT_EQ(text, expected);
  EXPECT_EQ(num_tokens, 10);
}

TEST_F(ServerHttpTest, ChoicesOfSeveralPromptsAndN) {
  auto res = post("/v1/completions", {{"prompt", json::array({"Once", "The cat"})},
                                      {"n", 2},
                                      {"seed", 7},
                                      {"max_tokens", 4},
                                      {"ignore_eos", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  ASSERT_EQ(body["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(body["choices"][i]["index"], i);
  EXPECT_EQ(body["usage"]["completion_tokens"], 16);
}

TEST_F(ServerHttpTest, ChatCompletionWithRequestTemplate) {
  const json request{{"messages", json::array({{{"role", "user"}, {"content", "Tell a story"}}})},
                     {"chat_template", kChatTemplate},
                     {"max_completion_tokens", 6},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  auto res = post("/v1/chat/completions", request);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"].size(), 6u);
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);

  json streamed = request;
  streamed["stream"] = true;
  auto sres = post("/v1/chat/completions", streamed);
  ASSERT_TRUE(sres);
  const auto events = sse_events(sres->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string text;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    text += events[i]["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, body["choices"][0]["message"]["content"]);
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST_F(ServerHttpTest, ErrorsHaveVllmShapes) {
  // Validation before any status line: 400 with the offending field.
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"logprobs", 21}}), 400,
               "BadRequestError", "logprobs");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"temperature", -1}}), 400,
               "BadRequestError", "temperature");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"n", 2}, {"temperature", 0}}), 400,
               "BadRequestError", "n");
  expect_error(post("/v1/completions", {{"prompt", json::array({1, 99999})}}), 400,
               "BadRequestError", "prompt");
  std::string long_prompt;
  for (int i = 0; i < 3000; ++i) long_prompt += " story";
  auto too_long = post("/v1/completions", {{"prompt", long_prompt}});
  expect_error(too_long, 400, "BadRequestError", "input_tokens");
  EXPECT_NE(too_long->body.find("maximum context length"), std::string::npos);
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}), 404,
               "NotFoundError", "model");
  expect_error(http()->Post("/v1/completions", "{\"prompt\": ", "application/json"), 400,
               "Bad Request", nullptr);
  expect_error(http()->Post("/v1/completions", std::string(kMaxBody + 1, ' '),
                            "application/json"),
               413, "BadRequestError", nullptr);
  expect_error(http()->Get("/v1/nothing-here"), 404, "NotFoundError", nullptr);
  // The server keeps working after errors.
  auto res = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(ServerHttpTest, ApiKeyGuardsOnlyV1Paths) {
  auto missing = http(false)->Get("/v1/models");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(json::parse(missing->body), json({{"error", "Unauthorized"}}));
  httplib::Client wrong("127.0.0.1", port_);
  wrong.set_bearer_token_auth("test-kex");
  auto bad = wrong.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  for (const char* path : {"/health", "/version", "/load", "/metrics"}) {
    auto res = http(false)->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
  }
  auto models = http()->Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["id"], kModelName);
  EXPECT_EQ(list["data"][0]["max_model_len"], client_->engine().max_model_len());
}

TEST_F(ServerHttpTest, TokenizeDetokenizeVersionLoadMetrics) {
  auto tok = http(false)->Post("/tokenize", R"({"prompt": "Once upon", "return_token_strs": true})",
                               "application/json");
  ASSERT_TRUE(tok);
  ASSERT_EQ(tok->status, 200) << tok->body;
  const json t = json::parse(tok->body);
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["token_strs"].size(), t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], client_->engine().max_model_len());
  auto detok = http(false)->Post("/detokenize", json{{"tokens", t["tokens"]}}.dump(),
                                 "application/json");
  ASSERT_TRUE(detok);
  ASSERT_EQ(detok->status, 200) << detok->body;
  EXPECT_NE(json::parse(detok->body)["prompt"].get<std::string>().find("Once upon"),
            std::string::npos);

  EXPECT_EQ(json::parse(http(false)->Get("/version")->body)["version"], "0.1.0");
  EXPECT_EQ(json::parse(http(false)->Get("/load")->body)["server_load"], 0);
  auto metrics = http(false)->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_NE(metrics->body.find("vellum:num_requests_running{"), std::string::npos);
}

TEST_F(ServerHttpTest, ClientThatDisconnectsAbortsItsRequest) {
  const double aborted_before = finished_count("abort");
  ASSERT_GE(aborted_before, 0);
  const json long_request{{"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}};

  // Streaming: the client stops reading after the first chunk and closes the connection.
  json streamed = long_request;
  streamed["stream"] = true;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = streamed.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Authorization", std::string("Bearer ") + kKey);
  int num_chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    ++num_chunks;
    return false;
  };
  http()->send(req);
  EXPECT_EQ(num_chunks, 1);
  // Its abort reaches the engine in its own time: wait for it (a generous cap), so that the next
  // request is the only one the engine can be running.
  for (int i = 0; i < 600 && finished_count("abort") < aborted_before + 1; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(finished_count("abort"), aborted_before + 1);

  // Non-streaming: the client sends the request and hangs up without reading.
  const std::string body = long_request.dump();
  const std::string raw = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Authorization: Bearer " + std::string(kKey) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::send(fd, raw.data(), raw.size(), 0), static_cast<ssize_t>(raw.size()));
  // Hang up once the engine has the request (not after a fixed pause, which a loaded machine
  // can outlast before the server has even read it).
  for (int i = 0; i < 600; ++i) {
    const EngineStats stats = client_->stats();
    if (stats.num_running + stats.num_waiting > 0) break;
    std::this_thread::sleep_for(10ms);
  }
  ::close(fd);

  // Both requests finish as aborted (waits for the engine, with a generous cap).
  double aborted = aborted_before;
  for (int i = 0; i < 600 && aborted < aborted_before + 2; ++i) {
    std::this_thread::sleep_for(50ms);
    aborted = finished_count("abort");
  }
  EXPECT_EQ(aborted, aborted_before + 2);
  EXPECT_EQ(client_->stats().num_running, 0);
}

}  // namespace
}  // namespace vellum::server
