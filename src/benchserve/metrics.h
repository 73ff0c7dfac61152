// Per-request results of a serving benchmark and their aggregates, computed as vLLM's
// calculate_metrics does (spec §7.2). All times in seconds except the *_ms statistics.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace vellum::benchserve {

struct RequestOutput {
  bool success = false;
  double start_time = 0.0;  // when the request was sent, seconds after the run started
  double ttft = 0.0;        // send → first chunk with non-empty choices
  double latency = 0.0;     // send → last chunk with non-empty choices
  std::vector<double> itl;  // gaps between consecutive content chunks
  int64_t output_tokens = 0;  // usage.completion_tokens, else the number of content chunks
  int64_t prompt_len = 0;
  std::string generated_text;
  std::string error;  // empty on success
  int http_status = 0;  // of the reply; 0 when none came (connection failed)
};

// Service level objectives for goodput, in milliseconds; unset ones are not checked.
struct GoodputSlo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool enabled() const { return ttft_ms || tpot_ms || e2el_ms; }
};

struct MetricSummary {
  double mean_ms = 0.0, median_ms = 0.0, std_ms = 0.0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value), in the order asked
};

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;   // prompt tokens of the successful requests
  int64_t total_output = 0;  // output tokens of the successful requests
  double request_throughput = 0.0;
  double request_goodput = 0.0;
  double output_throughput = 0.0;
  double total_token_throughput = 0.0;
  MetricSummary ttft, tpot, itl, e2el;
  double max_output_tokens_per_s = 0.0;  // most content chunks in one 1-second bucket
  int64_t max_concurrent_requests = 0;   // most requests active in one 1-second bucket
  std::vector<int64_t> output_lens;      // per request, 0 for failed ones
};

// numpy.percentile's default (linear interpolation between closest ranks); p in [0, 100].
// 0 for an empty list, as vLLM's `np.percentile(xs or 0, p)`.
double percentile(std::vector<double> values, double p);

// Mean, median, population std and percentiles of values given in seconds, reported in ms.
MetricSummary summarize_ms(const std::vector<double>& values_s,
                           std::span<const double> percentiles);

// TPOT = (latency − ttft) / (output_len − 1), only for output_len > 1. ITL pools all gaps.
// Goodput counts successful requests meeting every SLO (TPOT 0 for one-token outputs).
BenchmarkMetrics calculate_metrics(std::span<const RequestOutput> outputs, double duration_s,
                                   std::span<const double> percentiles, const GoodputSlo& slo);

}  // namespace vellum::benchserve
