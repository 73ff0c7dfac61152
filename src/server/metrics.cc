#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "vellum/status.h"

namespace vellum::server {
namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py).
const std::vector<double> kIterationTokensBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                     512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kParamsNBuckets = {1, 2, 5, 10, 20};
const std::vector<double> kTimeToFirstTokenBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
// inter_token_latency and request_time_per_output_token.
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,
                                                  0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0,
                                                  7.5,  10.0,  20.0, 40.0,  80.0};
// e2e, queue, inference, prefill and decode times.
const std::vector<double> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// vLLM's FinishReason values, in its enum order; each is exported from the start (at 0).
const char* const kFinishReasons[] = {"stop", "length", "abort", "error", "repetition"};

// The prefix cache hit rate of the log line covers this many finished requests (vLLM's
// CachingMetrics max_recent_requests).
constexpr size_t kHitRateWindowRequests = 1000;

double steady_now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Python's repr() of a finite float: the shortest round-trip digits, fixed notation for
// exponents in [-4, 16) (always with a fractional part, "5.0"), scientific otherwise ("1e-05").
std::string python_float_repr(double value) {
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));  // [-]d[.ddd]e(+|-)dd
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string repr;
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        repr = digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        repr = digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      repr = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
  } else {
    // Appended in place: `"." + digits.substr(1)` (operator+ of a literal and a temporary,
    // which inserts at its front) trips GCC 12's -Wrestrict false positive at -O3 (GCC bug
    // 105651), which fails Release builds with warnings as errors.
    repr = digits.substr(0, 1);
    if (digits.size() > 1) {
      repr += '.';
      repr.append(digits, 1);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    repr += exp_buf;
  }
  return negative ? "-" + repr : repr;
}

// The text format's escapes: backslash and newline, and the double quote inside label values.
std::string escape_text(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view help) { return escape_text(help, false); }

// Appends HELP/TYPE lines and samples in the text format, every sample with the base labels
// first. Counter families get their `_total` suffix here.
class ExpositionWriter {
 public:
  ExpositionWriter(const std::string& prefix, const std::string& labels)
      : prefix_(prefix + ":"), labels_(labels) {}

  void gauge(std::string_view name, std::string_view help, double value) {
    family(name, "gauge", help);
    sample(name, "", "", value);
  }

  void counter(std::string_view name, std::string_view help, double value) {
    family(name, "counter", help);
    sample(name, "_total", "", value);
  }

  // A counter with one extra label, one sample per value.
  void labeled_counter(std::string_view name, std::string_view help, std::string_view label,
                       const std::vector<std::pair<std::string, double>>& values) {
    family(name, "counter", help);
    for (const auto& [label_value, value] : values) {
      sample(name, "_total",
             std::string(label) + "=\"" + escape_label_value(label_value) + "\"", value);
    }
  }

  void histogram(std::string_view name, std::string_view help, const Histogram& h) {
    family(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(name, "_bucket", "le=\"" + format_prometheus_value(h.bounds[i]) + "\"",
             static_cast<double>(cumulative));
    }
    cumulative += h.counts.back();
    sample(name, "_bucket", "le=\"+Inf\"", static_cast<double>(cumulative));
    sample(name, "_count", "", static_cast<double>(cumulative));
    sample(name, "_sum", "", h.sum);
  }

  // `labels` is the complete label list (for info gauges whose labels are the payload).
  void info_gauge(std::string_view name, std::string_view help, const std::string& labels) {
    family(name, "gauge", help);
    out_ += prefix_;
    out_ += name;
    out_ += "{" + labels + "} 1.0\n";
  }

  std::string take() { return std::move(out_); }

 private:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    const std::string full = prefix_ + std::string(name) + (type == "counter" ? "_total" : "");
    out_ += "# HELP " + full + " " + escape_help(help) + "\n";
    out_ += "# TYPE " + full + " " + std::string(type) + "\n";
  }

  void sample(std::string_view name, std::string_view suffix, const std::string& extra_labels,
              double value) {
    out_ += prefix_;
    out_ += name;
    out_ += suffix;
    out_ += "{" + labels_;
    if (!extra_labels.empty()) out_ += "," + extra_labels;
    out_ += "} " + format_prometheus_value(value) + "\n";
  }

  const std::string prefix_;
  const std::string labels_;
  std::string out_;
};

bool valid_prefix(const std::string& prefix) {
  if (prefix.empty()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    const char c = prefix[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// The interval between two timestamps of RequestMetrics, or a negative value when either was
// never set (0): such a request never reached that phase.
double interval_seconds(double from, double to) {
  if (from <= 0.0 || to <= 0.0) return -1.0;
  return std::max(0.0, to - from);
}

void observe_interval(Histogram& h, double from, double to) {
  const double seconds = interval_seconds(from, to);
  if (seconds >= 0.0) h.observe(seconds);
}

// Increase of a cumulative engine counter; a value below the previous one is a reset.
int64_t counter_delta(int64_t now, int64_t before) { return now >= before ? now - before : now; }

}  // namespace

std::vector<double> build_1_2_5_buckets(int64_t max_value) {
  std::vector<double> buckets;
  for (int64_t scale = 1; scale <= max_value; scale *= 10) {
    for (int64_t mantissa : {1, 2, 5}) {
      if (mantissa * scale > max_value) return buckets;
      buckets.push_back(static_cast<double>(mantissa * scale));
    }
  }
  return buckets;
}

std::string format_prometheus_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  const std::string repr = python_float_repr(value);
  // prometheus_client's floatToGoString: Go switches to exponents sooner than Python.
  const size_t dot = repr.find('.');
  if (value > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = repr.substr(0, 1) + "." + repr.substr(1, dot - 1) + repr.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.')) {
      mantissa.pop_back();
    }
    return mantissa + "e+0" + std::to_string(dot - 1);
  }
  return repr;
}

std::string escape_label_value(const std::string& value) { return escape_text(value, true); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds.begin(), bounds.end(), value);  // first bound >= value
  ++counts[static_cast<size_t>(it - bounds.begin())];
  sum += value;
}

uint64_t Histogram::count() const {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  return total;
}

ServerMetrics::ServerMetrics(MetricsOptions options)
    : options_(std::move(options)),
      labels_("model_name=\"" + escape_label_value(options_.model_name) + "\",engine=\"0\""),
      request_prompt_tokens_(build_1_2_5_buckets(options_.max_model_len)),
      request_generation_tokens_(build_1_2_5_buckets(options_.max_model_len)),
      iteration_tokens_(kIterationTokensBuckets),
      request_max_num_generation_tokens_(build_1_2_5_buckets(options_.max_model_len)),
      request_params_n_(kParamsNBuckets),
      request_params_max_tokens_(build_1_2_5_buckets(options_.max_model_len)),
      request_prefill_kv_computed_tokens_(build_1_2_5_buckets(options_.max_model_len)),
      time_to_first_token_(kTimeToFirstTokenBuckets),
      inter_token_latency_(kTokenLatencyBuckets),
      request_time_per_output_token_(kTokenLatencyBuckets),
      e2e_request_latency_(kRequestLatencyBuckets),
      request_queue_time_(kRequestLatencyBuckets),
      request_inference_time_(kRequestLatencyBuckets),
      request_prefill_time_(kRequestLatencyBuckets),
      request_decode_time_(kRequestLatencyBuckets),
      last_log_time_(steady_now_seconds()) {
  if (!valid_prefix(options_.prefix)) {
    throw Error(ErrorCode::kInvalidArgument,
                "metrics prefix '" + options_.prefix +
                    "' is not a valid Prometheus name part; use letters, digits and '_' "
                    "(e.g. 'vellum' or 'vllm')");
  }
  for (const char* reason : kFinishReasons) request_success_.emplace_back(reason, 0.0);
}

void ServerMetrics::on_request_submitted(const SamplingParams& params) {
  std::lock_guard<std::mutex> lock(mu_);
  request_params_n_.observe(static_cast<double>(params.n));
  if (params.max_tokens) {
    request_params_max_tokens_.observe(static_cast<double>(*params.max_tokens));
  }
}

void ServerMetrics::observe_step(const StepReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  if (report.num_scheduled_tokens > 0) {
    iteration_tokens_.observe(static_cast<double>(report.num_scheduled_tokens));
  }
  const EngineStats& now = report.stats;
  const EngineStats& before = last_step_stats_;
  prompt_tokens_ += static_cast<double>(counter_delta(now.prompt_tokens, before.prompt_tokens));
  generation_tokens_ +=
      static_cast<double>(counter_delta(now.generation_tokens, before.generation_tokens));
  num_preemptions_ +=
      static_cast<double>(counter_delta(now.num_preemptions, before.num_preemptions));
  prefix_cache_queries_ +=
      static_cast<double>(counter_delta(now.prefix_cache_queries, before.prefix_cache_queries));
  prefix_cache_hits_ +=
      static_cast<double>(counter_delta(now.prefix_cache_hits, before.prefix_cache_hits));
  last_step_stats_ = now;
  if (report.outputs == nullptr) return;
  for (const RequestOutput& output : *report.outputs) observe_output(output);
}

void ServerMetrics::observe_output(const RequestOutput& output) {
  RequestTrack& track = tracks_[output.request_id];
  const RequestMetrics& m = output.metrics;
  // Every output repeats the request's timestamps and latencies so far; each is observed once.
  if (!track.first_token_observed) {
    const double ttft = interval_seconds(m.arrival_time, m.first_token_time);
    if (ttft >= 0.0) {
      time_to_first_token_.observe(ttft);
      track.first_token_observed = true;
    }
  }
  for (size_t i = track.num_latencies_observed; i < m.inter_token_latencies.size(); ++i) {
    inter_token_latency_.observe(m.inter_token_latencies[i]);
  }
  track.num_latencies_observed = std::max(track.num_latencies_observed,
                                          m.inter_token_latencies.size());
  for (const CompletionOutput& completion : output.outputs) {
    const size_t index = static_cast<size_t>(std::max(0, completion.index));
    if (index >= track.child_token_sums.size()) track.child_token_sums.resize(index + 1, 0);
    track.child_token_sums[index] += static_cast<int64_t>(completion.token_ids.size());
  }
  if (output.finished) {
    observe_finished(output, track);
    tracks_.erase(output.request_id);
  }
}

void ServerMetrics::observe_finished(const RequestOutput& output, const RequestTrack& track) {
  for (const CompletionOutput& completion : output.outputs) {
    // A finished request's children all carry their reason; one without is not counted.
    if (!completion.finish_reason) continue;
    const std::string& reason = *completion.finish_reason;
    auto it = std::find_if(request_success_.begin(), request_success_.end(),
                           [&](const auto& entry) { return entry.first == reason; });
    if (it == request_success_.end()) {
      request_success_.emplace_back(reason, 1.0);
    } else {
      it->second += 1.0;
    }
  }

  const RequestMetrics& m = output.metrics;
  const int64_t num_prompt_tokens = static_cast<int64_t>(output.prompt_token_ids.size());
  const int64_t num_cached_tokens = std::clamp<int64_t>(output.num_cached_tokens, 0,
                                                        num_prompt_tokens);
  const bool scheduled = m.first_scheduled_time > 0.0;

  // The longest child's token count. Cumulative and final-only outputs carry whole sequences
  // (their token counts add up to num_generation_tokens); delta outputs carry only what is new,
  // so their sums over the request's outputs are used instead.
  int64_t final_total = 0;
  int64_t max_child_tokens = 0;
  for (const CompletionOutput& completion : output.outputs) {
    final_total += static_cast<int64_t>(completion.token_ids.size());
    max_child_tokens = std::max(max_child_tokens,
                                static_cast<int64_t>(completion.token_ids.size()));
  }
  if (final_total != m.num_generation_tokens) {
    max_child_tokens = 0;
    for (int64_t sum : track.child_token_sums) max_child_tokens = std::max(max_child_tokens, sum);
  }
  max_child_tokens = std::min(max_child_tokens, m.num_generation_tokens);

  request_prompt_tokens_.observe(static_cast<double>(num_prompt_tokens));
  request_generation_tokens_.observe(static_cast<double>(m.num_generation_tokens));
  request_max_num_generation_tokens_.observe(static_cast<double>(max_child_tokens));
  prompt_tokens_cached_ += static_cast<double>(num_cached_tokens);
  if (scheduled) {
    request_prefill_kv_computed_tokens_.observe(
        static_cast<double>(num_prompt_tokens - num_cached_tokens));
    recent_prefix_lookups_.emplace_back(num_prompt_tokens, num_cached_tokens);
    recent_prefix_queries_ += num_prompt_tokens;
    recent_prefix_hits_ += num_cached_tokens;
    if (recent_prefix_lookups_.size() > kHitRateWindowRequests) {
      recent_prefix_queries_ -= recent_prefix_lookups_.front().first;
      recent_prefix_hits_ -= recent_prefix_lookups_.front().second;
      recent_prefix_lookups_.pop_front();
    }
  }

  observe_interval(e2e_request_latency_, m.arrival_time, m.finished_time);
  observe_interval(request_queue_time_, m.arrival_time, m.first_scheduled_time);
  observe_interval(request_inference_time_, m.first_scheduled_time, m.last_token_time);
  observe_interval(request_prefill_time_, m.first_scheduled_time, m.first_token_time);
  const double decode = interval_seconds(m.first_token_time, m.last_token_time);
  if (decode >= 0.0) {
    request_decode_time_.observe(decode);
    // vLLM's mean_time_per_output_token: 0 for a request with a single token.
    request_time_per_output_token_.observe(
        max_child_tokens > 1 ? decode / static_cast<double>(max_child_tokens - 1) : 0.0);
  }
}

std::string ServerMetrics::render(const EngineStats& stats) const {
  std::lock_guard<std::mutex> lock(mu_);
  ExpositionWriter w(options_.prefix, labels_);

  w.gauge("num_requests_running", "Number of requests in model execution batches.",
          static_cast<double>(stats.num_running));
  w.gauge("num_requests_waiting", "Number of requests waiting to be processed.",
          static_cast<double>(stats.num_waiting));
  w.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
          stats.kv_cache_usage);
  const CacheConfig& cache = options_.cache;
  const int64_t block_size = stats.block_size > 0 ? stats.block_size : cache.block_size;
  const std::string cache_labels =
      labels_ + ",block_size=\"" + std::to_string(block_size) + "\",cache_dtype=\"" +
      escape_label_value(stats.kv_cache_dtype.empty() ? cache.cache_dtype : stats.kv_cache_dtype) +
      "\",enable_prefix_caching=\"" +
      (cache.enable_prefix_caching ? "True" : "False") + "\",kv_cache_fraction=\"" +
      python_float_repr(cache.kv_cache_fraction) + "\",kv_cache_memory_bytes=\"" +
      std::to_string(cache.kv_cache_memory_bytes) + "\",num_gpu_blocks=\"" +
      std::to_string(stats.num_kv_blocks) + "\",num_gpu_blocks_override=\"" +
      std::to_string(cache.num_blocks_override) + "\",swap_space_bytes=\"" +
      std::to_string(cache.swap_space_bytes) + "\"";
  w.info_gauge("cache_config_info", "Information of the LLMEngine CacheConfig", cache_labels);

  w.counter("prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
            prefix_cache_queries_);
  w.counter("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            prefix_cache_hits_);
  w.counter("num_preemptions", "Cumulative number of preemption from the engine.",
            num_preemptions_);
  w.counter("prompt_tokens", "Number of prefill tokens processed.", prompt_tokens_);
  w.counter("prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
            prompt_tokens_cached_);
  w.counter("generation_tokens", "Number of generation tokens processed.", generation_tokens_);
  w.labeled_counter("request_success", "Count of successfully processed requests.",
                    "finished_reason", request_success_);
  if (!stats.spec_num_accepted_tokens_per_pos.empty()) {
    // Speculative decoding is on (vLLM's SpecDecodingProm); the engine's counters are cumulative.
    w.counter("spec_decode_num_drafts", "Number of spec decoding drafts.",
              static_cast<double>(stats.spec_num_drafts));
    w.counter("spec_decode_num_draft_tokens", "Number of draft tokens.",
              static_cast<double>(stats.spec_num_draft_tokens));
    w.counter("spec_decode_num_accepted_tokens", "Number of accepted tokens.",
              static_cast<double>(stats.spec_num_accepted_tokens));
    std::vector<std::pair<std::string, double>> per_position;
    for (size_t pos = 0; pos < stats.spec_num_accepted_tokens_per_pos.size(); ++pos) {
      per_position.emplace_back(std::to_string(pos),
                                static_cast<double>(stats.spec_num_accepted_tokens_per_pos[pos]));
    }
    w.labeled_counter("spec_decode_num_accepted_tokens_per_pos",
                      "Accepted tokens per draft position.", "position", per_position);
  }

  w.histogram("request_prompt_tokens", "Number of prefill tokens processed.",
              request_prompt_tokens_);
  w.histogram("request_generation_tokens", "Number of generation tokens processed.",
              request_generation_tokens_);
  w.histogram("iteration_tokens_total", "Histogram of number of tokens per engine_step.",
              iteration_tokens_);
  w.histogram("request_max_num_generation_tokens",
              "Histogram of maximum number of requested generation tokens.",
              request_max_num_generation_tokens_);
  w.histogram("request_params_n", "Histogram of the n request parameter.", request_params_n_);
  w.histogram("request_params_max_tokens", "Histogram of the max_tokens request parameter.",
              request_params_max_tokens_);
  w.histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              time_to_first_token_);
  w.histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              inter_token_latency_);
  w.histogram("request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.",
              request_time_per_output_token_);
  w.histogram("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              e2e_request_latency_);
  w.histogram("request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", request_queue_time_);
  w.histogram("request_inference_time_seconds",
              "Histogram of time spent in RUNNING phase for request.", request_inference_time_);
  w.histogram("request_prefill_time_seconds",
              "Histogram of time spent in PREFILL phase for request.", request_prefill_time_);
  w.histogram("request_decode_time_seconds",
              "Histogram of time spent in DECODE phase for request.", request_decode_time_);
  w.histogram("request_prefill_kv_computed_tokens",
              "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
              request_prefill_kv_computed_tokens_);
  return w.take();
}

std::string ServerMetrics::log_line(const EngineStats& stats, double now_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  const double elapsed = now_seconds - last_log_time_;
  auto throughput = [&](int64_t now, int64_t before) {
    return elapsed > 0.0 ? static_cast<double>(counter_delta(now, before)) / elapsed : 0.0;
  };
  const double prompt_throughput = throughput(stats.prompt_tokens, last_log_stats_.prompt_tokens);
  const double generation_throughput =
      throughput(stats.generation_tokens, last_log_stats_.generation_tokens);
  const double hit_rate = recent_prefix_queries_ > 0
                              ? static_cast<double>(recent_prefix_hits_) /
                                    static_cast<double>(recent_prefix_queries_)
                              : 0.0;
  last_log_stats_ = stats;
  last_log_time_ = now_seconds;
  char line[320];
  std::snprintf(line, sizeof(line),
                "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
                "Running: %lld reqs, Waiting: %lld reqs, GPU KV cache usage: %.1f%%, "
                "Prefix cache hit rate: %.1f%%",
                prompt_throughput, generation_throughput,
                static_cast<long long>(stats.num_running),
                static_cast<long long>(stats.num_waiting), stats.kv_cache_usage * 100.0,
                hit_rate * 100.0);
  if (stats.spec_num_accepted_tokens_per_pos.empty()) return line;
  // vLLM's SpecDecodingLogging, over the same interval.
  const int64_t num_drafts = counter_delta(stats.spec_num_drafts, spec_log_stats_.spec_num_drafts);
  const int64_t num_draft_tokens =
      counter_delta(stats.spec_num_draft_tokens, spec_log_stats_.spec_num_draft_tokens);
  const int64_t num_accepted =
      counter_delta(stats.spec_num_accepted_tokens, spec_log_stats_.spec_num_accepted_tokens);
  spec_log_stats_ = stats;
  return std::string(line) +
         fmt::format(", Spec decode: Mean acceptance length: {:.2f}, Accepted: {} tokens, "
                     "Drafted: {} tokens, Draft acceptance rate: {:.1f}%",
                     num_drafts > 0 ? 1.0 + static_cast<double>(num_accepted) /
                                                static_cast<double>(num_drafts)
                                    : 0.0,
                     num_accepted, num_draft_tokens,
                     num_draft_tokens > 0 ? 100.0 * static_cast<double>(num_accepted) /
                                                static_cast<double>(num_draft_tokens)
                                          : 0.0);
}

}  // namespace vellum::server
