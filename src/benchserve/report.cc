#include "benchserve/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace vellum::benchserve {

namespace {

struct MetricName {
  const char* key;     // "ttft": the suffix of the JSON keys
  const char* name;    // "TTFT": in the printed lines
  const char* header;  // the section title
  MetricSummary BenchmarkMetrics::*summary;
};

constexpr MetricName kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token", &BenchmarkMetrics::ttft},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &BenchmarkMetrics::tpot},
    {"itl", "ITL", "Inter-token Latency", &BenchmarkMetrics::itl},
    {"e2el", "E2EL", "End-to-end Latency", &BenchmarkMetrics::e2el},
};

bool selected(const RunInfo& info, const char* key) {
  return std::find(info.percentile_metrics.begin(), info.percentile_metrics.end(), key) !=
         info.percentile_metrics.end();
}

// "99" for 99.0, "99.9" for 99.9: vLLM's p_word.
std::string percentile_word(double p) {
  return std::floor(p) == p ? fmt::format("{}", static_cast<int64_t>(p)) : fmt::format("{}", p);
}

}  // namespace

std::string python_float(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::floor(value) == value && std::fabs(value) < 1e16) return fmt::format("{:.1f}", value);
  return fmt::format("{}", value);
}

std::string format_result_block(const RunInfo& info, const BenchmarkMetrics& m,
                                double duration_s) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "{:=^50}\n", " Serving Benchmark Result ");
  fmt::format_to(out, "{:<40} {:<10}\n", "Successful requests:", m.completed);
  fmt::format_to(out, "{:<40} {:<10}\n", "Failed requests:", m.failed);
  if (info.max_concurrency) {
    fmt::format_to(out, "{:<40} {:<10}\n", "Maximum request concurrency:", *info.max_concurrency);
  }
  if (!std::isinf(info.request_rate)) {
    fmt::format_to(out, "{:<40} {:<10.2f}\n", "Request rate configured (RPS):", info.request_rate);
  }
  fmt::format_to(out, "{:<40} {:<10.2f}\n", "Benchmark duration (s):", duration_s);
  fmt::format_to(out, "{:<40} {:<10}\n", "Total input tokens:", m.total_input);
  fmt::format_to(out, "{:<40} {:<10}\n", "Total generated tokens:", m.total_output);
  fmt::format_to(out, "{:<40} {:<10.2f}\n", "Request throughput (req/s):", m.request_throughput);
  if (info.goodput_enabled) {
    fmt::format_to(out, "{:<40} {:<10.2f}\n", "Request goodput (req/s):", m.request_goodput);
  }
  fmt::format_to(out, "{:<40} {:<10.2f}\n", "Output token throughput (tok/s):",
                 m.output_throughput);
  fmt::format_to(out, "{:<40} {:<10.2f}\n", "Peak output token throughput (tok/s):",
                 m.max_output_tokens_per_s);
  fmt::format_to(out, "{:<40} {:<10.2f}\n", "Peak concurrent requests:",
                 static_cast<double>(m.max_concurrent_requests));
  fmt::format_to(out, "{:<40} {:<10.2f}\n", "Total Token throughput (tok/s):",
                 m.total_token_throughput);
  for (const MetricName& metric : kMetrics) {
    if (!selected(info, metric.key)) continue;
    const MetricSummary& summary = m.*metric.summary;
    fmt::format_to(out, "{:-^50}\n", metric.header);
    fmt::format_to(out, "{:<40} {:<10.2f}\n", fmt::format("Mean {} (ms):", metric.name),
                   summary.mean_ms);
    fmt::format_to(out, "{:<40} {:<10.2f}\n", fmt::format("Median {} (ms):", metric.name),
                   summary.median_ms);
    for (const auto& [p, value] : summary.percentiles_ms) {
      fmt::format_to(out, "{:<40} {:<10.2f}\n",
                     fmt::format("P{} {} (ms):", percentile_word(p), metric.name), value);
    }
  }
  fmt::format_to(out, "{}\n", std::string(50, '='));
  return s;
}

nlohmann::ordered_json result_json(const RunInfo& info, const BenchmarkMetrics& m,
                                   const BenchmarkRun& run, bool detailed) {
  nlohmann::ordered_json j;
  j["date"] = info.date;
  j["endpoint_type"] = info.backend;
  j["backend"] = info.backend;
  j["label"] = info.label ? nlohmann::ordered_json(*info.label) : nlohmann::ordered_json(nullptr);
  j["model_id"] = info.model_id;
  j["tokenizer_id"] = info.model_id;
  j["num_prompts"] = info.num_prompts;
  for (const auto& [key, value] : info.metadata) j[key] = value;
  j["request_rate"] = std::isinf(info.request_rate) ? nlohmann::ordered_json("inf")
                                                    : nlohmann::ordered_json(info.request_rate);
  j["burstiness"] = info.burstiness;
  j["max_concurrency"] = info.max_concurrency ? nlohmann::ordered_json(*info.max_concurrency)
                                              : nlohmann::ordered_json(nullptr);
  j["duration"] = run.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = info.goodput_enabled ? nlohmann::ordered_json(m.request_goodput)
                                              : nlohmann::ordered_json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  if (detailed) {
    auto& input_lens = j["input_lens"] = nlohmann::ordered_json::array();
    auto& output_lens = j["output_lens"] = nlohmann::ordered_json::array();
    auto& ttfts = j["ttfts"] = nlohmann::ordered_json::array();
    auto& itls = j["itls"] = nlohmann::ordered_json::array();
    auto& texts = j["generated_texts"] = nlohmann::ordered_json::array();
    auto& errors = j["errors"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < run.outputs.size(); ++i) {
      const RequestOutput& out = run.outputs[i];
      input_lens.push_back(out.prompt_len);
      output_lens.push_back(i < m.output_lens.size() ? m.output_lens[i] : 0);
      ttfts.push_back(out.ttft);
      itls.push_back(out.itl);
      texts.push_back(out.generated_text);
      errors.push_back(out.error);
    }
  }
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  for (const MetricName& metric : kMetrics) {
    if (!selected(info, metric.key)) continue;
    const MetricSummary& summary = m.*metric.summary;
    j[fmt::format("mean_{}_ms", metric.key)] = summary.mean_ms;
    j[fmt::format("median_{}_ms", metric.key)] = summary.median_ms;
    j[fmt::format("std_{}_ms", metric.key)] = summary.std_ms;
    for (const auto& [p, value] : summary.percentiles_ms) {
      j[fmt::format("p{}_{}_ms", percentile_word(p), metric.key)] = value;
    }
  }
  return j;
}

std::string default_result_filename(const RunInfo& info) {
  const size_t slash = info.model_id.rfind('/');
  const std::string base_model_id =
      slash == std::string::npos ? info.model_id : info.model_id.substr(slash + 1);
  const std::string concurrency =
      info.max_concurrency ? fmt::format("-concurrency{}", *info.max_concurrency) : "";
  return fmt::format("{}-{}qps{}-{}-{}.json", info.label.value_or(info.backend),
                     python_float(info.request_rate), concurrency, base_model_id, info.date);
}

}  // namespace vellum::benchserve
