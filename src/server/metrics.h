// Prometheus metrics of the OpenAI-compatible server (spec §6; vLLM's PrometheusStatLogger and
// LoggingStatLogger in vllm/v1/metrics/loggers.py).
//
// Goals: vLLM's metric names, label sets, help texts and buckets, so that a dashboard built for
// vLLM works with `prefix = "vllm"`; the text exposition format 0.0.4 written by hand, numbers
// formatted the way Python's prometheus_client writes them ("5.0", "1e+06", "+Inf").
// Non-goals: a general Prometheus client library, multi-engine (data parallel) labels (engine is
// always "0"), LoRA, multi-modal and KV-connector metrics,
// num_requests_waiting_by_reason, engine_sleep_state and prompt_tokens_by_source.
//
//   ServerMetrics metrics({.prefix = "vllm", .model_name = name, .max_model_len = len,
//                          .cache = config.cache});
//   client.set_step_observer([&](const StepReport& r) { metrics.observe_step(r); });
//   metrics.on_request_submitted(params);           // HTTP thread, once per engine request
//   response = metrics.render(client.stats());     // GET /metrics
//   log_info(metrics.log_line(client.stats(), now)); // every 10 s
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vellum/config.h"
#include "vellum/engine.h"
#include "vellum/engine_client.h"
#include "vellum/outputs.h"
#include "vellum/sampling_params.h"

namespace vellum::server {

struct MetricsOptions {
  // Metric names are "<prefix>:<vLLM's name>"; "vllm" makes Vellum a drop-in for vLLM dashboards.
  // Must match [a-zA-Z_][a-zA-Z0-9_]*.
  std::string prefix = "vellum";
  std::string model_name;     // the model_name label on every metric (the served model name)
  int64_t max_model_len = 0;  // upper end of the 1-2-5 buckets of the token-count histograms
  CacheConfig cache;          // labels of cache_config_info
};

// vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... while <= max_value (empty below 1).
std::vector<double> build_1_2_5_buckets(int64_t max_value);

// A sample value or `le` bound as prometheus_client writes it (Python repr of the float, with
// Go's exponent form for values >= 1e6): 5 -> "5.0", 0.25 -> "0.25", 1e6 -> "1e+06",
// 1e-5 -> "1e-05", infinity -> "+Inf".
std::string format_prometheus_value(double value);

// A label value escaped for the text format: backslash, double quote and newline.
std::string escape_label_value(const std::string& value);

// A fixed-bucket histogram. counts[i] counts observations in (bounds[i-1], bounds[i]]; the last
// entry counts those above every bound (le="+Inf"). Rendering makes the counts cumulative.
struct Histogram {
  std::vector<double> bounds;  // ascending upper bounds, without +Inf
  std::vector<uint64_t> counts;  // bounds.size() + 1
  double sum = 0.0;

  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  uint64_t count() const;
};

// Thread-safe (one mutex): observe_step runs on the engine thread, on_request_submitted and render
// on HTTP threads.
class ServerMetrics {
 public:
  // Throws vellum::Error (kInvalidArgument) for a prefix that is not a valid metric name part.
  explicit ServerMetrics(MetricsOptions options);

  // At submission of one engine request (its n children count once, with n):
  // request_params_n and, when max_tokens is set, request_params_max_tokens.
  void on_request_submitted(const SamplingParams& params);

  // Engine thread, after every step: iteration_tokens_total (steps that computed tokens);
  // prompt_tokens, generation_tokens, num_preemptions, prefix_cache_queries and
  // prefix_cache_hits as deltas of the cumulative EngineStats since the previous step;
  // time_to_first_token and inter_token_latency as soon as a request's output shows them; and
  // for every finished RequestOutput: request_success{finished_reason} per completion output,
  // request_prompt_tokens, request_generation_tokens, request_max_num_generation_tokens,
  // request_prefill_kv_computed_tokens, prompt_tokens_cached and the per-request time
  // histograms (e2e, queue, inference, prefill, decode, time per output token). Time histograms
  // whose inputs were never set (a request aborted before it was scheduled) are skipped.
  void observe_step(const StepReport& report);

  // The whole exposition: the gauges from `stats` (num_requests_running, num_requests_waiting,
  // kv_cache_usage_perc, cache_config_info), then the counters and histograms.
  std::string render(const EngineStats& stats) const;

  // vLLM's periodic log line, over the interval since the previous call (or since construction):
  // "Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s, Running: N reqs,
  // Waiting: M reqs, GPU KV cache usage: Z%, Prefix cache hit rate: W%". `now_seconds` is on the
  // engine's clock (std::chrono::steady_clock, seconds); the hit rate covers the prompt tokens of
  // the last 1000 finished requests that were scheduled.
  std::string log_line(const EngineStats& stats, double now_seconds);

 private:
  // What is remembered about an unfinished request between its outputs.
  struct RequestTrack {
    std::vector<int64_t> child_token_sums;  // per child: Σ token_ids.size() over its outputs
    bool first_token_observed = false;
    size_t num_latencies_observed = 0;      // inter_token_latencies already in the histogram
  };

  void observe_output(const RequestOutput& output);
  void observe_finished(const RequestOutput& output, const RequestTrack& track);

  const MetricsOptions options_;
  const std::string labels_;  // model_name="...",engine="0"

  mutable std::mutex mu_;
  EngineStats last_step_stats_;  // the cumulative stats the counters have taken up to
  EngineStats spec_log_stats_;   // speculative decoding counters at the previous log line
  std::unordered_map<std::string, RequestTrack> tracks_;

  // Counters.
  double prefix_cache_queries_ = 0.0;
  double prefix_cache_hits_ = 0.0;
  double num_preemptions_ = 0.0;
  double prompt_tokens_ = 0.0;
  double prompt_tokens_cached_ = 0.0;
  double generation_tokens_ = 0.0;
  std::vector<std::pair<std::string, double>> request_success_;  // by finished_reason

  // Histograms of counts.
  Histogram request_prompt_tokens_;
  Histogram request_generation_tokens_;
  Histogram iteration_tokens_;
  Histogram request_max_num_generation_tokens_;
  Histogram request_params_n_;
  Histogram request_params_max_tokens_;
  Histogram request_prefill_kv_computed_tokens_;
  // Histograms of time (seconds).
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram request_time_per_output_token_;
  Histogram e2e_request_latency_;
  Histogram request_queue_time_;
  Histogram request_inference_time_;
  Histogram request_prefill_time_;
  Histogram request_decode_time_;

  // Periodic log line.
  EngineStats last_log_stats_;
  double last_log_time_ = 0.0;
  std::deque<std::pair<int64_t, int64_t>> recent_prefix_lookups_;  // (queried, hit) per request
  int64_t recent_prefix_queries_ = 0;
  int64_t recent_prefix_hits_ = 0;
};

}  // namespace vellum::server
