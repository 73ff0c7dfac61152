#include "benchserve/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vellum::benchserve {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

MetricSummary summarize_ms(const std::vector<double>& values_s,
                           std::span<const double> percentiles) {
  MetricSummary s;
  if (!values_s.empty()) {
    const auto n = static_cast<double>(values_s.size());
    const double mean = std::accumulate(values_s.begin(), values_s.end(), 0.0) / n;
    double var = 0.0;
    for (const double v : values_s) var += (v - mean) * (v - mean);
    s.mean_ms = mean * 1000.0;
    s.std_ms = std::sqrt(var / n) * 1000.0;
    s.median_ms = percentile(values_s, 50.0) * 1000.0;
  }
  for (const double p : percentiles) s.percentiles_ms.emplace_back(p, percentile(values_s, p) * 1000.0);
  return s;
}

namespace {

// Content chunks per 1-second bucket (the peak output rate) and requests active per bucket,
// over the span of the successful requests.
void fill_peaks(std::span<const RequestOutput> outputs, BenchmarkMetrics& m) {
  double min_start = INFINITY, max_end = -INFINITY;
  for (const RequestOutput& out : outputs) {
    if (!out.success) continue;
    min_start = std::min(min_start, out.start_time);
    max_end = std::max(max_end, out.start_time + out.latency);
  }
  if (!(min_start <= max_end)) return;
  const auto num_buckets = static_cast<size_t>(std::ceil(max_end - min_start)) + 1;
  std::vector<int64_t> tokens(num_buckets, 0), active(num_buckets, 0);
  auto bucket = [&](double t) { return static_cast<int64_t>(t - min_start); };
  for (const RequestOutput& out : outputs) {
    if (!out.success) continue;
    double t = out.start_time + out.ttft;
    auto count_token = [&](double time) {
      const int64_t b = bucket(time);
      if (b >= 0 && b < static_cast<int64_t>(num_buckets)) ++tokens[static_cast<size_t>(b)];
    };
    count_token(t);
    for (const double gap : out.itl) count_token(t += gap);
    const int64_t last = std::min<int64_t>(bucket(out.start_time + out.latency),
                                           static_cast<int64_t>(num_buckets) - 1);
    for (int64_t b = std::max<int64_t>(0, bucket(out.start_time)); b <= last; ++b) {
      ++active[static_cast<size_t>(b)];
    }
  }
  m.max_output_tokens_per_s = static_cast<double>(*std::max_element(tokens.begin(), tokens.end()));
  m.max_concurrent_requests = *std::max_element(active.begin(), active.end());
}

}  // namespace

BenchmarkMetrics calculate_metrics(std::span<const RequestOutput> outputs, double duration_s,
                                   std::span<const double> percentiles, const GoodputSlo& slo) {
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, itls, e2els;
  int64_t good = 0;
  for (const RequestOutput& out : outputs) {
    if (!out.success) {
      m.output_lens.push_back(0);
      ++m.failed;
      continue;
    }
    const int64_t output_len = out.output_tokens;
    m.output_lens.push_back(output_len);
    m.total_input += out.prompt_len;
    m.total_output += output_len;
    double tpot = 0.0;
    if (output_len > 1) {
      tpot = (out.latency - out.ttft) / static_cast<double>(output_len - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), out.itl.begin(), out.itl.end());
    ttfts.push_back(out.ttft);
    e2els.push_back(out.latency);
    ++m.completed;
    const bool is_good = (!slo.ttft_ms || *slo.ttft_ms / 1000.0 >= out.ttft) &&
                         (!slo.tpot_ms || *slo.tpot_ms / 1000.0 >= tpot) &&
                         (!slo.e2el_ms || *slo.e2el_ms / 1000.0 >= out.latency);
    if (slo.enabled() && is_good) ++good;
  }
  m.request_throughput = static_cast<double>(m.completed) / duration_s;
  m.request_goodput = static_cast<double>(good) / duration_s;
  m.output_throughput = static_cast<double>(m.total_output) / duration_s;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
  m.ttft = summarize_ms(ttfts, percentiles);
  m.tpot = summarize_ms(tpots, percentiles);
  m.itl = summarize_ms(itls, percentiles);
  m.e2el = summarize_ms(e2els, percentiles);
  fill_peaks(outputs, m);
  return m;
}

}  // namespace vellum::benchserve
