#include "benchserve/report.h"

#include <gtest/gtest.h>

namespace vellum::benchserve {
namespace {

BenchmarkMetrics simple_metrics() {
  RequestOutput out;
  out.success = true;
  out.ttft = 0.01;
  out.itl = {0.02, 0.03};
  out.latency = 0.06;
  out.output_tokens = 3;
  out.prompt_len = 8;
  out.generated_text = "abc";
  const std::vector<RequestOutput> outs = {out};
  const std::vector<double> ps = {50, 99.9};
  return calculate_metrics(outs, 2.0, ps, GoodputSlo{});
}

TEST(ReportTest, PythonFloat) {
  EXPECT_EQ(python_float(INFINITY), "inf");
  EXPECT_EQ(python_float(10.0), "10.0");
  EXPECT_EQ(python_float(0.5), "0.5");
  EXPECT_EQ(python_float(1.0), "1.0");
}

TEST(ReportTest, BlockHasVllmLayout) {
  RunInfo info;
  info.max_concurrency = 4;
  const std::string block = format_result_block(info, simple_metrics(), 2.0);
  EXPECT_EQ(block.substr(0, 51), "============ Serving Benchmark Result ============\n");
  EXPECT_NE(block.find("\nSuccessful requests:                     1         \n"), std::string::npos)
      << block;
  EXPECT_NE(block.find("\nMaximum request concurrency:             4         \n"), std::string::npos);
  EXPECT_NE(block.find("\nBenchmark duration (s):                  2.00      \n"), std::string::npos);
  EXPECT_NE(block.find("\nTotal input tokens:                      8         \n"), std::string::npos);
  EXPECT_NE(block.find("\nTotal generated tokens:                  3         \n"), std::string::npos);
  EXPECT_NE(block.find("\nRequest throughput (req/s):              0.50      \n"), std::string::npos);
  EXPECT_NE(block.find("\nPeak output token throughput (tok/s):    3.00      \n"), std::string::npos);
  EXPECT_NE(block.find("\nPeak concurrent requests:                1.00      \n"), std::string::npos);
  EXPECT_NE(block.find("\nTotal Token throughput (tok/s):          5.50      \n"), std::string::npos);
  EXPECT_NE(block.find("\n---------------Time to First Token----------------\n"), std::string::npos);
  EXPECT_NE(block.find("\n-----Time per Output Token (excl. 1st token)------\n"), std::string::npos);
  EXPECT_NE(block.find("\n---------------Inter-token Latency----------------\n"), std::string::npos);
  EXPECT_NE(block.find("\nMean TTFT (ms):                          10.00     \n"), std::string::npos);
  EXPECT_NE(block.find("\nMean TPOT (ms):                          25.00     \n"), std::string::npos);
  EXPECT_NE(block.find("\nP99.9 ITL (ms):"), std::string::npos);
  EXPECT_NE(block.find("\nP50 ITL (ms):                            25.00     \n"), std::string::npos);
  EXPECT_EQ(block.find("End-to-end Latency"), std::string::npos);  // not selected by default
  EXPECT_EQ(block.find("Request rate configured"), std::string::npos);  // rate is inf
  EXPECT_EQ(block.find("goodput"), std::string::npos);
  EXPECT_TRUE(block.ends_with("\n" + std::string(50, '=') + "\n"));
}

TEST(ReportTest, JsonHasVllmKeys) {
  RunInfo info;
  info.date = "20250101-000000";
  info.model_id = "org/tiny";
  info.num_prompts = 1;
  info.percentile_metrics = {"ttft", "e2el"};
  info.metadata = {{"tp", "1"}};
  BenchmarkRun run;
  run.duration_s = 2.0;
  RequestOutput out;
  out.success = true;
  out.ttft = 0.01;
  out.itl = {0.02, 0.03};
  out.latency = 0.06;
  out.output_tokens = 3;
  out.prompt_len = 8;
  run.outputs = {out};
  const std::vector<double> ps = {99};
  const BenchmarkMetrics m = calculate_metrics(run.outputs, run.duration_s, ps, GoodputSlo{});

  const nlohmann::ordered_json brief = result_json(info, m, run, false);
  for (const char* key :
       {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
        "tp", "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
        "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
        "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
        "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
        "p99_ttft_ms", "mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms"}) {
    EXPECT_TRUE(brief.contains(key)) << key;
  }
  EXPECT_EQ(brief["request_rate"], "inf");
  EXPECT_TRUE(brief["max_concurrency"].is_null());
  EXPECT_TRUE(brief["request_goodput"].is_null());
  EXPECT_FALSE(brief.contains("mean_tpot_ms"));  // not selected
  EXPECT_FALSE(brief.contains("ttfts"));
  EXPECT_NEAR(brief["p99_e2el_ms"].get<double>(), 60.0, 1e-9);

  const nlohmann::ordered_json detailed = result_json(info, m, run, true);
  EXPECT_EQ(detailed["input_lens"], nlohmann::ordered_json::array({8}));
  EXPECT_EQ(detailed["output_lens"], nlohmann::ordered_json::array({3}));
  EXPECT_EQ(detailed["itls"][0].size(), 2u);
  EXPECT_EQ(detailed["errors"][0], "");

  EXPECT_EQ(default_result_filename(info), "openai-infqps-tiny-20250101-000000.json");
  info.max_concurrency = 8;
  info.request_rate = 4;
  info.label = "vellum";
  EXPECT_EQ(default_result_filename(info), "vellum-4.0qps-concurrency8-tiny-20250101-000000.json");
}

}  // namespace
}  // namespace vellum::benchserve
