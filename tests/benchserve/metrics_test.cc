#include "benchserve/metrics.h"

#include <gtest/gtest.h>

#include <vector>

namespace vellum::benchserve {
namespace {

TEST(PercentileTest, LinearInterpolationLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile({7.0}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0.0);
}

RequestOutput make_output(double start, double ttft, std::vector<double> itl, int64_t tokens,
                          int64_t prompt_len) {
  RequestOutput out;
  out.success = true;
  out.start_time = start;
  out.ttft = ttft;
  out.latency = ttft;
  for (const double gap : itl) out.latency += gap;
  out.itl = std::move(itl);
  out.output_tokens = tokens;
  out.prompt_len = prompt_len;
  return out;
}

// Three successful requests and a failed one; every expected value worked out by hand.
std::vector<RequestOutput> sample_outputs() {
  std::vector<RequestOutput> outs;
  outs.push_back(make_output(0.0, 0.1, {0.2, 0.3}, 3, 10));           // TPOT 0.25
  outs.push_back(make_output(0.5, 0.4, {}, 1, 20));                   // one token: no TPOT
  RequestOutput failed;
  failed.prompt_len = 30;
  failed.error = "HTTP 500";
  outs.push_back(failed);
  outs.push_back(make_output(1.25, 0.25, {0.5, 0.5, 0.5}, 4, 5));     // TPOT 0.5
  return outs;
}

TEST(MetricsTest, AggregatesMatchHandComputedValues) {
  const std::vector<RequestOutput> outs = sample_outputs();
  const std::vector<double> ps = {25, 99};
  const BenchmarkMetrics m = calculate_metrics(outs, 4.0, ps, GoodputSlo{});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 35);  // the failed request's prompt does not count
  EXPECT_EQ(m.total_output, 8);
  EXPECT_EQ(m.output_lens, (std::vector<int64_t>{3, 1, 0, 4}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 10.75);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.0);

  // TTFT {0.1, 0.4, 0.25}
  EXPECT_NEAR(m.ttft.mean_ms, 250.0, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 250.0, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 122.47448713915890, 1e-9);  // population std
  ASSERT_EQ(m.ttft.percentiles_ms.size(), 2u);
  EXPECT_EQ(m.ttft.percentiles_ms[1].first, 99.0);
  EXPECT_NEAR(m.ttft.percentiles_ms[1].second, 397.0, 1e-9);
  // TPOT {0.25, 0.5}: the one-token request is left out.
  EXPECT_NEAR(m.tpot.mean_ms, 375.0, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, 375.0, 1e-9);
  EXPECT_NEAR(m.tpot.percentiles_ms[1].second, 497.5, 1e-9);
  // ITL pools {0.2, 0.3, 0.5, 0.5, 0.5}.
  EXPECT_NEAR(m.itl.mean_ms, 400.0, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 500.0, 1e-9);
  EXPECT_NEAR(m.itl.percentiles_ms[0].second, 300.0, 1e-9);
  // E2EL {0.6, 0.4, 1.75}
  EXPECT_NEAR(m.e2el.mean_ms, 2750.0 / 3.0, 1e-9);
  EXPECT_NEAR(m.e2el.median_ms, 600.0, 1e-9);

  // 1-second buckets from t = 0: chunk times 0.1 0.3 0.6 0.4→0.9 | 1.5 | 2.0 2.5 | 3.0.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 4.0);
  // Active: bucket 0 has the first two requests, buckets 1-3 the last one.
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(MetricsTest, GoodputCountsRequestsMeetingEverySlo) {
  const std::vector<RequestOutput> outs = sample_outputs();
  GoodputSlo slo;
  slo.ttft_ms = 300;
  slo.tpot_ms = 300;
  // Only the first request: the second misses TTFT, the last misses TPOT.
  EXPECT_DOUBLE_EQ(calculate_metrics(outs, 4.0, {}, slo).request_goodput, 0.25);
  slo.ttft_ms.reset();
  // One-token outputs count as TPOT 0, so the second request is good too.
  EXPECT_DOUBLE_EQ(calculate_metrics(outs, 4.0, {}, slo).request_goodput, 0.5);
  slo = GoodputSlo{};
  slo.e2el_ms = 700;
  EXPECT_DOUBLE_EQ(calculate_metrics(outs, 4.0, {}, slo).request_goodput, 0.5);
}

TEST(MetricsTest, AllFailedGivesZeros) {
  RequestOutput failed;
  failed.error = "refused";
  const std::vector<RequestOutput> outs = {failed, failed};
  const std::vector<double> ps = {99};
  const BenchmarkMetrics m = calculate_metrics(outs, 1.0, ps, GoodputSlo{});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.ttft.mean_ms, 0.0);
  EXPECT_EQ(m.ttft.percentiles_ms[0].second, 0.0);
  EXPECT_EQ(m.max_output_tokens_per_s, 0.0);
  EXPECT_EQ(m.max_concurrent_requests, 0);
}

}  // namespace
}  // namespace vellum::benchserve
