// End-to-end tests of the benchmark client against a fake OpenAI-compatible server started
// in the test (httplib::Server on 127.0.0.1): it streams one chunk per requested token and a
// final usage chunk, and records what it was sent.
#include "benchserve/client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "benchserve/metrics.h"
#include "benchserve/report.h"
#include "vellum/status.h"

namespace vellum::benchserve {
namespace {

class FakeOpenAiServer {
 public:
  FakeOpenAiServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                      "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, false);
    });
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   handle(req, res, true);
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~FakeOpenAiServer() {
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int max_in_flight() const { return max_in_flight_; }
  std::vector<nlohmann::json> payloads() {
    std::lock_guard lock(mutex_);
    return payloads_;
  }
  std::vector<std::string> request_ids() {
    std::lock_guard lock(mutex_);
    return request_ids_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    const nlohmann::json body = nlohmann::json::parse(req.body);
    {
      std::lock_guard lock(mutex_);
      payloads_.push_back(body);
      request_ids_.push_back(req.get_header_value("x-request-id"));
    }
    if (body.value("model", "") != "fake-model") {
      res.status = 404;
      res.set_content(R"({"error":{"message":"model not found"}})", "application/json");
      return;
    }
    const int64_t num_tokens = body.value(chat ? "max_completion_tokens" : "max_tokens", 0);
    const int in_flight = ++in_flight_;
    int seen = max_in_flight_;
    while (in_flight > seen && !max_in_flight_.compare_exchange_weak(seen, in_flight)) {
    }
    res.set_chunked_content_provider(
        "text/event-stream", [this, num_tokens, chat](size_t, httplib::DataSink& sink) {
          // Uneven writes: events split across writes and several events in one write.
          std::string stream;
          for (int64_t t = 0; t < num_tokens; ++t) {
            stream += chat ? R"(data: {"choices":[{"index":0,"delta":{"content":"x"}}]})"
                           : R"(data: {"choices":[{"index":0,"text":"x"}]})";
            stream += "\n\n";
          }
          stream += "data: {\"choices\":[],\"usage\":{\"completion_tokens\":" +
                    std::to_string(num_tokens) + "}}\n\ndata: [DONE]\n\n";
          for (size_t pos = 0; pos < stream.size(); pos += 37) {
            const std::string piece = stream.substr(pos, 37);
            if (!sink.write(piece.data(), piece.size())) break;
          }
          --in_flight_;
          sink.done();
          return true;
        });
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
  std::mutex mutex_;
  std::vector<nlohmann::json> payloads_;
  std::vector<std::string> request_ids_;
};

ClientConfig client_for(const FakeOpenAiServer& server) {
  ClientConfig c;
  c.server = parse_base_url(server.base_url());
  c.model = "fake-model";
  c.ignore_eos = true;
  c.extra_body = {{"temperature", 0.0}};
  return c;
}

std::vector<SampleRequest> small_dataset(int64_t n) {
  RandomDatasetConfig d;
  d.num_prompts = n;
  d.input_len = 16;
  d.output_len = 6;
  d.range_ratio = 0.5;
  d.vocab_size = 512;
  return sample_random_requests(d);
}

TEST(ParseBaseUrlTest, SplitsHostAndPrefix) {
  const ServerAddress a = parse_base_url("http://127.0.0.1:8000");
  EXPECT_EQ(a.scheme_host_port, "http://127.0.0.1:8000");
  EXPECT_EQ(a.path_prefix, "");
  const ServerAddress b = parse_base_url("https://example.com/api/");
  EXPECT_EQ(b.scheme_host_port, "https://example.com");
  EXPECT_EQ(b.path_prefix, "/api");
  const ServerAddress c = parse_base_url("http://[::1]:9000/v1/x");
  EXPECT_EQ(c.scheme_host_port, "http://[::1]:9000");
  EXPECT_EQ(c.path_prefix, "/v1/x");
  EXPECT_THROW(parse_base_url("127.0.0.1:8000"), Error);
  EXPECT_THROW(parse_base_url("ftp://host"), Error);
  EXPECT_THROW(parse_base_url("http://:8000"), Error);
  EXPECT_THROW(parse_base_url("http://host:80a"), Error);
  EXPECT_THROW(parse_base_url("http://host:"), Error);
}

TEST(PayloadTest, CompletionsPayloadLikeVllm) {
  ClientConfig c;
  c.model = "m";
  c.ignore_eos = true;
  c.extra_body = {{"temperature", 0.5}, {"top_k", 3}};
  SampleRequest r;
  r.prompt_token_ids = {5, 6, 7};
  r.prompt_len = 3;
  r.expected_output_len = 9;
  const nlohmann::json p = build_payload(c, r);
  EXPECT_EQ(p["model"], "m");
  EXPECT_EQ(p["prompt"], nlohmann::json::array({5, 6, 7}));
  EXPECT_EQ(p["max_tokens"], 9);
  EXPECT_EQ(p["stream"], true);
  EXPECT_EQ(p["stream_options"]["include_usage"], true);
  EXPECT_EQ(p["repetition_penalty"], 1.0);
  EXPECT_EQ(p["ignore_eos"], true);
  EXPECT_EQ(p["temperature"], 0.5);  // extra body overrides the default 0
  EXPECT_EQ(p["top_k"], 3);

  c.api = ApiKind::kChatCompletions;
  const nlohmann::json chat = build_payload(c, r);
  EXPECT_EQ(chat["max_completion_tokens"], 9);
  EXPECT_FALSE(chat.contains("prompt"));
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["messages"][0]["content"], "is was for");
}

TEST(ClientTest, FetchesTheFirstModelId) {
  FakeOpenAiServer server;
  ClientConfig c = client_for(server);
  EXPECT_EQ(fetch_first_model_id(c), "fake-model");
  c.server = parse_base_url("http://127.0.0.1:1");  // nothing listens there
  EXPECT_THROW(fetch_first_model_id(c), Error);
}

TEST(ClientTest, CompletionsRunWithConcurrencyLimit) {
  FakeOpenAiServer server;
  ClientConfig c = client_for(server);
  c.request_id_prefix = "bench-";
  TrafficConfig traffic;
  traffic.max_concurrency = 3;
  const std::vector<SampleRequest> requests = small_dataset(12);
  std::atomic<int64_t> last_progress{0};
  const BenchmarkRun run =
      run_benchmark(c, traffic, requests, [&](int64_t done) { last_progress = done; });
  EXPECT_EQ(last_progress, 12);
  ASSERT_EQ(run.outputs.size(), 12u);
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestOutput& out = run.outputs[i];
    EXPECT_TRUE(out.success) << out.error;
    EXPECT_EQ(out.prompt_len, requests[i].prompt_len);
    EXPECT_EQ(out.output_tokens, requests[i].expected_output_len);
    EXPECT_EQ(static_cast<int64_t>(out.itl.size()), requests[i].expected_output_len - 1);
    EXPECT_EQ(out.generated_text, std::string(static_cast<size_t>(out.output_tokens), 'x'));
    EXPECT_GE(out.latency, out.ttft);
  }
  EXPECT_LE(server.max_in_flight(), 3);
  EXPECT_GE(server.max_in_flight(), 1);

  const std::vector<nlohmann::json> payloads = server.payloads();
  ASSERT_EQ(payloads.size(), 12u);
  for (const nlohmann::json& p : payloads) {
    EXPECT_EQ(p["ignore_eos"], true);
    EXPECT_EQ(p["temperature"], 0.0);
    EXPECT_EQ(p["stream_options"]["include_usage"], true);
  }
  std::vector<std::string> ids = server.request_ids();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids.front(), "bench-0");
  EXPECT_EQ(ids.back(), "bench-9");  // string order: bench-0, bench-1, bench-10, ...

  // Through the metrics and the saved JSON, as `--save-result --save-detailed` writes it.
  const std::vector<double> ps = {99};
  const BenchmarkMetrics m = calculate_metrics(run.outputs, run.duration_s, ps, GoodputSlo{});
  EXPECT_EQ(m.completed, 12);
  int64_t expected_input = 0, expected_output = 0;
  for (const SampleRequest& r : requests) {
    expected_input += r.prompt_len;
    expected_output += r.expected_output_len;
  }
  EXPECT_EQ(m.total_input, expected_input);
  EXPECT_EQ(m.total_output, expected_output);
  RunInfo info;
  info.model_id = "fake-model";
  info.num_prompts = 12;
  info.max_concurrency = 3;
  const auto path = std::filesystem::temp_directory_path() /
                    ("benchserve_result_" + std::to_string(server.port()) + ".json");
  std::ofstream(path) << result_json(info, m, run, true).dump();
  std::ifstream in(path);
  const nlohmann::json saved = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  EXPECT_EQ(saved["completed"], 12);
  EXPECT_EQ(saved["failed"], 0);
  EXPECT_EQ(saved["max_concurrency"], 3);
  EXPECT_EQ(saved["total_output_tokens"], expected_output);
  EXPECT_EQ(saved["output_lens"].size(), 12u);
  EXPECT_EQ(saved["itls"].size(), 12u);
  EXPECT_TRUE(saved.contains("p99_ttft_ms"));
  EXPECT_TRUE(saved.contains("mean_itl_ms"));
  EXPECT_LE(saved["max_concurrent_requests"].get<int64_t>(), 12);
}

TEST(ClientTest, ChatCompletionsRun) {
  FakeOpenAiServer server;
  ClientConfig c = client_for(server);
  c.api = ApiKind::kChatCompletions;
  c.endpoint = "/v1/chat/completions";
  const std::vector<SampleRequest> requests = small_dataset(4);
  const BenchmarkRun run = run_benchmark(c, TrafficConfig{}, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(run.outputs[i].success) << run.outputs[i].error;
    EXPECT_EQ(run.outputs[i].output_tokens, requests[i].expected_output_len);
  }
  for (const nlohmann::json& p : server.payloads()) {
    EXPECT_TRUE(p["messages"][0]["content"].is_string());
  }
}

TEST(ClientTest, FailuresCarryTheirError) {
  FakeOpenAiServer server;
  ClientConfig c = client_for(server);
  c.model = "other-model";
  const std::vector<SampleRequest> requests = small_dataset(2);
  const BenchmarkRun run = run_benchmark(c, TrafficConfig{}, requests);
  for (const RequestOutput& out : run.outputs) {
    EXPECT_FALSE(out.success);
    EXPECT_NE(out.error.find("404"), std::string::npos) << out.error;
    EXPECT_NE(out.error.find("model not found"), std::string::npos) << out.error;
    EXPECT_EQ(out.http_status, 404);
  }
  c.server = parse_base_url("http://127.0.0.1:1");
  const RequestOutput refused = send_request(c, requests[0], "", Clock::now());
  EXPECT_FALSE(refused.success);
  EXPECT_FALSE(refused.error.empty());
  EXPECT_EQ(refused.http_status, 0);
}

#ifdef VELLUM_CLI_PATH
// Runs a shell command; returns its exit status and fills output with stdout and stderr.
int run_command(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) output.append(buf, n);
  return pclose(pipe);
}
#endif

// The `vellum bench serve` command itself, run as a child process against the fake server:
// model name from /v1/models, the printed block, and the --save-result file.
TEST(BenchServeCommandTest, PrintsVllmBlockAndSavesResult) {
#ifndef VELLUM_CLI_PATH
  GTEST_SKIP() << "the vellum program is not part of this build";
#else
  if (!std::filesystem::exists(VELLUM_CLI_PATH)) GTEST_SKIP() << "vellum is not built";
  FakeOpenAiServer server;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("benchserve_cli_" + std::to_string(server.port()));
  const std::string command =
      std::string(VELLUM_CLI_PATH) + " bench serve --base-url " + server.base_url() +
      " --num-prompts 6 --random-input-len 16 --random-output-len 4 --vocab-size 512"
      " --max-concurrency 2 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99"
      " --goodput e2el:600000 --save-result --save-detailed --result-dir " + dir.string() +
      " --result-filename out.json --disable-tqdm";
  std::string output;
  ASSERT_EQ(run_command(command, output), 0) << output;
  EXPECT_NE(output.find("============ Serving Benchmark Result ============\n"), std::string::npos)
      << output;
  EXPECT_NE(output.find("\nSuccessful requests:                     6         \n"),
            std::string::npos) << output;
  EXPECT_NE(output.find("\nFailed requests:                         0         \n"),
            std::string::npos) << output;
  EXPECT_NE(output.find("\nMaximum request concurrency:             2         \n"),
            std::string::npos) << output;
  EXPECT_NE(output.find("\nTotal generated tokens:                  24        \n"),
            std::string::npos) << output;
  EXPECT_NE(output.find("\nRequest goodput (req/s):"), std::string::npos) << output;
  EXPECT_NE(output.find("\nP50 E2EL (ms):"), std::string::npos) << output;

  // The initial test request plus the six of the run, all with the discovered model name.
  const std::vector<nlohmann::json> payloads = server.payloads();
  ASSERT_EQ(payloads.size(), 7u);
  for (const nlohmann::json& p : payloads) {
    EXPECT_EQ(p["model"], "fake-model");
    EXPECT_EQ(p["prompt"].size(), 16u);
    EXPECT_EQ(p["max_tokens"], 4);
  }

  std::ifstream in(dir / "out.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json saved = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(saved["model_id"], "fake-model");
  EXPECT_EQ(saved["backend"], "openai");
  EXPECT_EQ(saved["num_prompts"], 6);
  EXPECT_EQ(saved["request_rate"], "inf");
  EXPECT_EQ(saved["max_concurrency"], 2);
  EXPECT_EQ(saved["completed"], 6);
  EXPECT_EQ(saved["total_input_tokens"], 96);
  EXPECT_EQ(saved["total_output_tokens"], 24);
  EXPECT_GT(saved["request_goodput"].get<double>(), 0.0);
  EXPECT_EQ(saved["input_lens"], nlohmann::json::array({16, 16, 16, 16, 16, 16}));
  EXPECT_EQ(saved["output_lens"], nlohmann::json::array({4, 4, 4, 4, 4, 4}));
  EXPECT_EQ(saved["errors"], nlohmann::json::array({"", "", "", "", "", ""}));
  for (const char* key : {"date", "duration", "request_throughput", "output_throughput",
                          "total_token_throughput", "max_output_tokens_per_s",
                          "max_concurrent_requests", "ttfts", "itls", "generated_texts",
                          "mean_ttft_ms", "median_tpot_ms", "std_itl_ms", "p99_e2el_ms",
                          "p50_ttft_ms"}) {
    EXPECT_TRUE(saved.contains(key)) << key;
  }
#endif
}

// A request the server rejects (here: an unknown model) stops the initial test run at once,
// with the server's message, instead of being retried until the ready-check timeout.
TEST(BenchServeCommandTest, RejectedTestRequestFailsAtOnce) {
#ifndef VELLUM_CLI_PATH
  GTEST_SKIP() << "the vellum program is not part of this build";
#else
  if (!std::filesystem::exists(VELLUM_CLI_PATH)) GTEST_SKIP() << "vellum is not built";
  FakeOpenAiServer server;
  std::string output;
  EXPECT_NE(run_command(std::string(VELLUM_CLI_PATH) + " bench serve --base-url " +
                            server.base_url() + " --model other-model --num-prompts 2",
                        output),
            0);
  EXPECT_NE(output.find("Initial test run failed"), std::string::npos) << output;
  EXPECT_NE(output.find("model not found"), std::string::npos) << output;
  EXPECT_EQ(server.payloads().size(), 1u);
#endif
}

}  // namespace
}  // namespace vellum::benchserve
