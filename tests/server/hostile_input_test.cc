// The server under hostile input and hostile clients (issue 11 §3): malformed, huge or absurd
// requests answer 4xx, slow and idle clients are cut off or answered 503, a request that throws
// inside the engine answers 500, and through all of it other clients keep being served.
// In process: HttpServer over a real EngineClient with stories260K, small limits so that each
// case runs in seconds.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <memory>
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
using Clock = std::chrono::steady_clock;

constexpr const char* kModelName = "stories";
constexpr size_t kMaxBody = size_t{1} << 20;
constexpr int kWorkers = 4;
constexpr int kMaxQueued = 16;
constexpr double kRequestTimeout = 1.5;  // seconds

// A server (and its engine) of its own, torn down with the object.
struct TestServer {
  explicit TestServer(const std::string& model, FaultInjectionConfig fault = {}) {
    EngineConfig config;
    config.model.model = model;
    config.cache.cache_dtype = "f32";
    config.cache.kv_cache_memory_bytes = int64_t{64} << 20;
    config.parallel.num_threads = 1;
    config.fault_injection = std::move(fault);
    client = std::make_unique<EngineClient>(config);
    ServerOptions options;
    options.port = 0;
    options.served_model_name = kModelName;
    options.model_path = model;
    options.max_body_bytes = kMaxBody;
    options.num_http_threads = kWorkers;
    options.max_queued_connections = kMaxQueued;
    options.request_timeout_seconds = kRequestTimeout;
    server = std::make_unique<HttpServer>(options, *client);
    port = server->bind().value_or(0);
    thread = std::thread([this] { server->serve(); });
    if (!client->wait_until_ready()) return;
    metrics = std::make_unique<ServerMetrics>(MetricsOptions{
        "vellum", kModelName, client->engine().max_model_len(), client->engine().config().cache});
    server->on_engine_ready(metrics.get());
  }
  ~TestServer() {
    server->shutdown(1s);
    thread.join();
  }

  std::unique_ptr<httplib::Client> http() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_read_timeout(60, 0);
    c->set_connection_timeout(10, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    return http()->Post(path.c_str(), body, "application/json");
  }

  std::unique_ptr<ServerMetrics> metrics;  // outlives the engine thread (declared first)
  std::unique_ptr<EngineClient> client;
  std::unique_ptr<HttpServer> server;
  int port = 0;
  std::thread thread;
};

// A raw TCP connection to the server.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // False once the server has closed the connection.
  bool send(const std::string& data) {
    return ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // True when the server closed (or reset) the connection within `timeout`; data it sent first
  // (a response) is collected in received().
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
      received_.append(buf, static_cast<size_t>(n));
    }
    return false;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

class HostileInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto model = ::vellum::testing::model_file("stories260K.gguf");
    if (model.empty()) return;
    model_ = new std::string(model.string());
    FaultInjectionConfig fault;
    fault.request_id_substring = "faulty";
    server_ = new TestServer(*model_, fault);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) {
      VELLUM_SKIP_FOR_MISSING_MODEL() << "test model 'stories260K.gguf' not found: put the "
                                         "shared models at ../shared/models or set "
                                         "VELLUM_TEST_MODELS";
    }
    ASSERT_GT(server_->port, 0);
    ASSERT_EQ(server_->client->state(), EngineClient::State::kReady)
        << server_->client->failure();
  }

  // A well-formed completion that must succeed whatever else is going on.
  static void expect_served() {
    const auto res = server_->post(
        "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})");
    ASSERT_TRUE(res) << "no answer: " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << res->body;
  }

  static std::string* model_;
  static TestServer* server_;
};
std::string* HostileInputTest::model_ = nullptr;
TestServer* HostileInputTest::server_ = nullptr;

struct BadRequest {
  const char* name;
  std::string path;
  std::string body;
  int status;  // the expected 4xx
};

std::vector<BadRequest> bad_requests() {
  const std::string completions = "/v1/completions";
  const std::string chat = "/v1/chat/completions";
  std::string nested_array(200'000, '[');
  nested_array += std::string(200'000, ']');
  std::string nested_object;
  for (int i = 0; i < 50'000; ++i) nested_object += R"({"a":)";
  nested_object += "1" + std::string(50'000, '}');
  const std::string huge_prompt = R"({"prompt": ")" + std::string(kMaxBody + 10, 'a') + R"("})";
  std::vector<int> many_ids(100'000, 5);
  return {
      {"deeply nested array", completions, R"({"prompt": )" + nested_array + "}", 400},
      {"deeply nested prompt object", completions, R"({"prompt": )" + nested_object + "}", 400},
      {"deeply nested body", chat, nested_array, 400},
      {"body over the limit", completions, huge_prompt, 413},
      {"prompt over the context", completions,
       json{{"prompt", json(many_ids)}, {"max_tokens", 1}}.dump(), 400},
      {"not JSON", completions, "{\"prompt\": ", 400},
      {"JSON but not an object", completions, "[1, 2, 3]", 400},
      {"invalid UTF-8 in the prompt", completions, "{\"prompt\": \"ab\xff\xfe" "cd\"}", 400},
      {"lone surrogate in the prompt", completions, R"({"prompt": "ab\udc00cd"})", 400},
      {"invalid UTF-8 in a stop string", completions,
       "{\"prompt\": \"x\", \"stop\": [\"\xc3\"]}", 400},
      {"invalid UTF-8 in chat content", chat,
       "{\"messages\": [{\"role\": \"user\", \"content\": \"\xe2\x82\"}]}", 400},
      {"logit_bias id outside the vocabulary", completions,
       R"({"prompt": "x", "logit_bias": {"100000": 5}})", 400},
      {"logit_bias negative id", completions, R"({"prompt": "x", "logit_bias": {"-3": 5}})", 400},
      {"logit_bias id not a number", completions,
       R"({"prompt": "x", "logit_bias": {"abc": 5}})", 400},
      {"allowed_token_ids outside the vocabulary", completions,
       R"({"prompt": "x", "allowed_token_ids": [1, 999999]})", 400},
      {"prompt token id outside the vocabulary", completions, R"({"prompt": [1, 5, 70000]})", 400},
      {"absurd n", completions, R"({"prompt": "x", "n": 1000000})", 400},
      {"negative n", completions, R"({"prompt": "x", "n": -1})", 400},
      {"absurd best_of", completions, R"({"prompt": "x", "best_of": 1000000})", 400},
      {"max_tokens beyond int64", completions, R"({"prompt": "x", "max_tokens": 1e30})", 400},
      {"negative max_tokens", completions, R"({"prompt": "x", "max_tokens": -5})", 400},
      {"absurd logprobs", completions, R"({"prompt": "x", "logprobs": 100000})", 400},
      {"absurd top_logprobs", chat,
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 100000})",
       400},
      {"negative top_k", completions, R"({"prompt": "x", "top_k": -7})", 400},
      {"top_k beyond int64", completions, R"({"prompt": "x", "top_k": 1e300})", 400},
      {"temperature not a number", completions, R"({"prompt": "x", "temperature": "hot"})", 400},
      {"empty token-id prompt", completions, R"({"prompt": [[]]})", 400},
      {"empty prompt list", completions, R"({"prompt": []})", 400},
      {"no prompt", completions, R"({"max_tokens": 3})", 400},
      {"empty message list", chat, R"({"messages": []})", 400},
      {"messages not a list", chat, R"({"messages": "hi"})", 400},
      {"message without role", chat, R"({"messages": [{"content": "hi"}]})", 400},
  };
}

TEST_F(HostileInputTest, MalformedAndAbsurdRequestsAnswer4xxAndOthersAreServed) {
  for (const BadRequest& bad : bad_requests()) {
    SCOPED_TRACE(bad.name);
    const auto res = server_->post(bad.path, bad.body);
    ASSERT_TRUE(res) << "no answer: " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, bad.status) << res->body.substr(0, 300);
    if (res->status != 413) {
      // vLLM's error JSON, with a message saying what was wrong.
      const json body = json::parse(res->body, nullptr, false);
      ASSERT_TRUE(body.is_object() && body.contains("error")) << res->body.substr(0, 300);
      EXPECT_FALSE(body["error"].value("message", "").empty()) << res->body.substr(0, 300);
    }
    expect_served();
  }
  // An empty prompt is BOS alone, as in vLLM: served.
  const auto empty = server_->post("/v1/completions", R"({"prompt": "", "max_tokens": 2})");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200) << empty->body;
  // A huge max_tokens is vLLM's get_max_tokens: capped by what the context leaves.
  const auto res = server_->post(
      "/v1/completions", R"({"prompt": "Once", "max_tokens": 1000000000000, "ignore_eos": true})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

TEST_F(HostileInputTest, ClientSendingHeadersByteByByteIsCutOff) {
  RawConnection slow(server_->port);
  ASSERT_TRUE(slow.connected());
  const auto start = Clock::now();
  ASSERT_TRUE(slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  // A byte every 100 ms, never ending the headers: httplib's per-read timeout never fires.
  bool cut = false;
  while (!cut && Clock::now() - start < 20s) {
    if (!slow.send("a")) break;
    cut = slow.closed_within(100ms);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(cut || !slow.send("a")) << "still open after " << seconds << " s";
  EXPECT_LT(seconds, kRequestTimeout + 3.0);
  EXPECT_GE(server_->server->num_timed_out_connections(), 1);
  expect_served();
}

TEST_F(HostileInputTest, ClientSendingTheBodyByteByByteIsCutOff) {
  RawConnection slow(server_->port);
  ASSERT_TRUE(slow.connected());
  const auto start = Clock::now();
  ASSERT_TRUE(slow.send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 100000\r\n\r\n{\"prompt\": \""));
  bool cut = false;
  while (!cut && Clock::now() - start < 20s) {
    if (!slow.send("a")) break;
    cut = slow.closed_within(100ms);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(seconds, kRequestTimeout + 3.0);
  expect_served();
}

// More slow clients than HTTP threads: each is cut at the deadline, and a normal client waits
// at most about that long.
TEST_F(HostileInputTest, SlowClientsBeyondTheThreadCountDoNotStarveOthers) {
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 2 * kWorkers; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server_->port));
    ASSERT_TRUE(slow.back()->send("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (auto& c : slow) c->send("a");
      std::this_thread::sleep_for(100ms);
    }
  });
  const auto start = Clock::now();
  expect_served();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  trickle.join();
  EXPECT_LT(seconds, 2 * kRequestTimeout + 5.0);
}

// Thousands of connections that send nothing: those beyond the threads and the queue are
// answered 503 (or closed at the deadline) instead of piling up, a client arriving meanwhile
// hears back within seconds, and once they are gone everything is served again.
TEST_F(HostileInputTest, ThousandsOfIdleConnectionsAreBounded) {
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 2000; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server_->port));
    ASSERT_TRUE(idle.back()->connected()) << "connection " << i;
  }
  const auto start = Clock::now();
  auto http = server_->http();
  const auto res = http->Get("/health");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(res) << "no answer: " << httplib::to_string(res.error());
  EXPECT_TRUE(res->status == 200 || res->status == 503) << res->status;
  EXPECT_LT(seconds, kRequestTimeout + 10.0);
  // The idle ones are closed by the server at the deadline.
  int num_closed = 0;
  for (auto& c : idle) num_closed += c->closed_within(10ms) ? 1 : 0;
  idle.clear();
  EXPECT_GT(num_closed, 0);
  // A request on an overflowing connection is answered 503 with vLLM's error JSON.
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 200; ++i) flood.push_back(std::make_unique<RawConnection>(server_->port));
  RawConnection late(server_->port);
  ASSERT_TRUE(late.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  late.closed_within(5s);
  EXPECT_TRUE(late.received().rfind("HTTP/1.1 200", 0) == 0 ||
              late.received().rfind("HTTP/1.1 503", 0) == 0)
      << late.received();
  flood.clear();
  EXPECT_GT(server_->server->num_overflowed_connections(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(kRequestTimeout * 1000)));
  expect_served();
}

// A request that throws inside the engine answers 500; a concurrent one is served, and so is
// everything after.
TEST_F(HostileInputTest, RequestThatThrowsInsideTheEngineAnswers500) {
  std::thread other([] { expect_served(); });
  const auto res = server_->post(
      "/v1/completions",
      R"({"prompt": "Once upon a time", "max_tokens": 8, "request_id": "faulty-1"})");
  other.join();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500) << res->body;
  const json body = json::parse(res->body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << res->body;
  EXPECT_EQ(body["error"]["code"], 500);

  // Streaming: the error arrives as an SSE error event, then [DONE].
  const auto streamed = server_->post(
      "/v1/completions",
      R"({"prompt": "Once", "max_tokens": 8, "stream": true, "request_id": "faulty-2"})");
  ASSERT_TRUE(streamed);
  EXPECT_NE(streamed->body.find("\"code\":500"), std::string::npos) << streamed->body;
  EXPECT_NE(streamed->body.find("data: [DONE]"), std::string::npos) << streamed->body;

  EXPECT_EQ(server_->client->state(), EngineClient::State::kReady);
  expect_served();
  EXPECT_EQ(server_->client->stats().kv_cache_usage, 0.0);
}

// A failure the engine cannot recover from: /health answers 503 and requests fail with 500
// at once rather than hang (`vellum serve` then exits non-zero: tests/cli).
TEST_F(HostileInputTest, DeadEngineMakesHealthAnswer503) {
  FaultInjectionConfig fatal;
  fatal.request_id_substring = "fatal";
  fatal.fatal = true;
  TestServer dying(*model_, fatal);
  ASSERT_EQ(dying.client->state(), EngineClient::State::kReady);
  ASSERT_EQ(dying.http()->Get("/health")->status, 200);
  const auto res = dying.post("/v1/completions",
                              R"({"prompt": "Once", "max_tokens": 4, "request_id": "fatal-1"})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500) << res->body;
  EXPECT_EQ(dying.client->state(), EngineClient::State::kFailed);
  const auto health = dying.http()->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503) << health->body;
  const auto after = dying.post("/v1/completions", R"({"prompt": "Once", "max_tokens": 4})");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 500) << after->body;
}

}  // namespace
}  // namespace vellum::server
