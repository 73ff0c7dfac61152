// ServerMetrics: the Prometheus text exposition (format 0.0.4) with vLLM's names, labels and
// buckets, fed with synthetic StepReports; plus a line-format checker run over whole outputs.
#include "server/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "vellum/status.h"

namespace vellum::server {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The `le` values of one histogram, in output order.
std::vector<std::string> bucket_bounds(const std::string& text, const std::string& name) {
  std::vector<std::string> bounds;
  const std::regex le_re("le=\"([^\"]*)\"");
  for (const std::string& line : lines_of(text)) {
    if (line.rfind(name + "_bucket{", 0) != 0) continue;
    std::smatch match;
    if (std::regex_search(line, match, le_re)) bounds.push_back(match[1]);
  }
  return bounds;
}

// Checks a whole exposition: families are HELP, TYPE, then their samples, each family declared
// once; sample names belong to the family; label lists parse (escapes included) and start with
// model_name and engine="0"; values parse; histogram buckets ascend, are cumulative and end with
// le="+Inf" equal to _count. Returns the problems found.
std::vector<std::string> check_exposition(const std::string& text) {
  std::vector<std::string> problems;
  if (text.empty() || text.back() != '\n') problems.push_back("output does not end with a newline");
  const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  const std::regex label_name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  std::set<std::string> families;
  std::string family, type;
  bool help_seen = false;
  int num_samples = 0;
  double last_le = -1.0, last_bucket = 0.0, inf_bucket = -1.0;
  auto close_family = [&] {
    if (!family.empty() && num_samples == 0) problems.push_back(family + ": no samples");
  };
  const std::vector<std::string> lines = lines_of(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    const std::string where = "line " + std::to_string(n + 1) + " '" + line + "': ";
    if (line.rfind("# HELP ", 0) == 0) {
      close_family();
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      family = rest.substr(0, space);
      if (space == std::string::npos || !std::regex_match(family, name_re)) {
        problems.push_back(where + "malformed HELP");
      }
      if (!families.insert(family).second) problems.push_back(where + "family declared twice");
      help_seen = true;
      type.clear();
      num_samples = 0;
      last_le = -1.0;
      last_bucket = 0.0;
      inf_bucket = -1.0;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream in(line.substr(7));
      std::string name, t, extra;
      in >> name >> t;
      if (!help_seen || name != family || !type.empty() || (in >> extra)) {
        problems.push_back(where + "TYPE does not follow its HELP");
      }
      if (t != "counter" && t != "gauge" && t != "histogram") {
        problems.push_back(where + "unknown type");
      }
      type = t;
      continue;
    }
    if (line.empty() || line[0] == '#') {
      problems.push_back(where + "unexpected line");
      continue;
    }
    // name{labels} value
    const size_t brace = line.find('{');
    if (brace == std::string::npos) {
      problems.push_back(where + "no label list");
      continue;
    }
    const std::string name = line.substr(0, brace);
    if (type.empty()) problems.push_back(where + "sample before HELP/TYPE");
    bool name_ok = false;
    std::string suffix;
    if (type == "histogram") {
      for (const char* s : {"_bucket", "_count", "_sum"}) {
        if (name == family + s) {
          name_ok = true;
          suffix = s;
        }
      }
    } else {
      name_ok = name == family;
      const bool total = family.size() > 6 && family.substr(family.size() - 6) == "_total";
      if (type == "counter" && !total) {
        problems.push_back(where + "counter without _total");
      }
    }
    if (!name_ok) problems.push_back(where + "sample outside its family " + family);
    // Labels: name="value" pairs; values may contain \\, \" and \n escapes only.
    std::vector<std::pair<std::string, std::string>> labels;
    size_t i = brace + 1;
    bool labels_ok = true;
    while (labels_ok && i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
        labels_ok = false;
        break;
      }
      const std::string label = line.substr(i, eq - i);
      if (!std::regex_match(label, label_name_re)) labels_ok = false;
      std::string value;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\') {
          if (j + 1 >= line.size()) {
            labels_ok = false;
            break;
          }
          const char e = line[++j];
          if (e == '\\' || e == '"') {
            value += e;
          } else if (e == 'n') {
            value += '\n';
          } else {
            labels_ok = false;
          }
        } else {
          value += line[j];
        }
      }
      if (j >= line.size()) {
        labels_ok = false;
        break;
      }
      labels.emplace_back(label, value);
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (!labels_ok || i >= line.size() || line[i] != '}' || i + 1 >= line.size() ||
        line[i + 1] != ' ') {
      problems.push_back(where + "malformed label list");
      continue;
    }
    if (labels.size() < 2 || labels[0].first != "model_name" || labels[1] !=
        std::make_pair(std::string("engine"), std::string("0"))) {
      problems.push_back(where + "labels do not start with model_name, engine=\"0\"");
    }
    const std::string value_text = line.substr(i + 2);
    double value = 0.0;
    if (value_text == "+Inf" || value_text == "-Inf" || value_text == "NaN") {
      value = value_text == "-Inf" ? -HUGE_VAL : HUGE_VAL;
    } else {
      char* end = nullptr;
      value = std::strtod(value_text.c_str(), &end);
      if (value_text.empty() || *end != '\0') problems.push_back(where + "malformed value");
    }
    ++num_samples;
    if (suffix == "_bucket") {
      const std::string& le = labels.back().second;
      if (labels.back().first != "le") {
        problems.push_back(where + "bucket without le");
        continue;
      }
      const double bound = le == "+Inf" ? HUGE_VAL : std::strtod(le.c_str(), nullptr);
      if (bound <= last_le) problems.push_back(where + "le not ascending");
      if (value < last_bucket) problems.push_back(where + "buckets not cumulative");
      last_le = bound;
      last_bucket = value;
      if (le == "+Inf") inf_bucket = value;
    } else if (suffix == "_count") {
      if (inf_bucket < 0.0) problems.push_back(where + "_count before le=\"+Inf\"");
      if (value != inf_bucket) problems.push_back(where + "_count differs from le=\"+Inf\"");
    }
  }
  close_family();
  return problems;
}

EngineStats cumulative_stats(int64_t prompt_tokens, int64_t generation_tokens,
                             int64_t prefix_queries, int64_t prefix_hits, int64_t preemptions) {
  EngineStats stats;
  stats.prompt_tokens = prompt_tokens;
  stats.generation_tokens = generation_tokens;
  stats.prefix_cache_queries = prefix_queries;
  stats.prefix_cache_hits = prefix_hits;
  stats.num_preemptions = preemptions;
  return stats;
}

struct Child {
  int64_t num_tokens = 0;
  std::optional<std::string> finish_reason;
};

RequestOutput request_output(const std::string& request_id, int64_t num_prompt_tokens,
                             const std::vector<Child>& children, const RequestMetrics& metrics,
                             bool finished) {
  RequestOutput out;
  out.request_id = request_id;
  out.prompt_token_ids.assign(static_cast<size_t>(num_prompt_tokens), 7);
  for (size_t i = 0; i < children.size(); ++i) {
    CompletionOutput c;
    c.index = static_cast<int32_t>(i);
    c.token_ids.assign(static_cast<size_t>(children[i].num_tokens), 3);
    c.finish_reason = children[i].finish_reason;
    out.outputs.push_back(c);
  }
  out.finished = finished;
  out.metrics = metrics;
  return out;
}

// Runs one step whose stats are `stats` and whose outputs are `outputs`.
void step(ServerMetrics& metrics, const EngineStats& stats, int64_t num_scheduled_tokens,
          const std::vector<RequestOutput>& outputs) {
  StepReport report{stats, num_scheduled_tokens, &outputs};
  metrics.observe_step(report);
}

MetricsOptions vllm_options(int64_t max_model_len = 100) {
  MetricsOptions options;
  options.prefix = "vllm";
  options.model_name = "m";
  options.max_model_len = max_model_len;
  return options;
}

// A request that ran through every phase: arrival 100, scheduled 100.25, first token 100.75,
// last token 102.75, finished 103 (all exact in binary).
RequestMetrics full_timeline(int64_t num_generation_tokens) {
  RequestMetrics m;
  m.arrival_time = 100.0;
  m.first_scheduled_time = 100.25;
  m.first_token_time = 100.75;
  m.last_token_time = 102.75;
  m.finished_time = 103.0;
  m.inter_token_latencies = {0.5, 0.5, 0.5, 0.5};
  m.num_generation_tokens = num_generation_tokens;
  return m;
}

TEST(MetricsFormatTest, NumbersAreWrittenLikePrometheusClient) {
  EXPECT_EQ(format_prometheus_value(0.0), "0.0");
  EXPECT_EQ(format_prometheus_value(5.0), "5.0");
  EXPECT_EQ(format_prometheus_value(0.25), "0.25");
  EXPECT_EQ(format_prometheus_value(0.1), "0.1");
  EXPECT_EQ(format_prometheus_value(0.001), "0.001");
  EXPECT_EQ(format_prometheus_value(1e-5), "1e-05");
  EXPECT_EQ(format_prometheus_value(2560.0), "2560.0");
  EXPECT_EQ(format_prometheus_value(100000.0), "100000.0");
  EXPECT_EQ(format_prometheus_value(1e6), "1e+06");
  EXPECT_EQ(format_prometheus_value(1234567.0), "1.234567e+06");
  EXPECT_EQ(format_prometheus_value(2e7), "2e+07");
  EXPECT_EQ(format_prometheus_value(1e16), "1e+16");
  EXPECT_EQ(format_prometheus_value(-1.5), "-1.5");
  EXPECT_EQ(format_prometheus_value(HUGE_VAL), "+Inf");
  EXPECT_EQ(format_prometheus_value(-HUGE_VAL), "-Inf");
}

TEST(MetricsFormatTest, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsFormatTest, OneTwoFiveBucketsStopAtTheMaximum) {
  EXPECT_THAT(build_1_2_5_buckets(100), ElementsAre(1, 2, 5, 10, 20, 50, 100));
  EXPECT_THAT(build_1_2_5_buckets(2048),
              ElementsAre(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000));
  EXPECT_THAT(build_1_2_5_buckets(1), ElementsAre(1));
  EXPECT_THAT(build_1_2_5_buckets(0), IsEmpty());
}

TEST(ServerMetricsTest, GaugesComeFromStatsWithEitherPrefix) {
  EngineStats stats;
  stats.num_running = 3;
  stats.num_waiting = 2;
  stats.kv_cache_usage = 0.25;
  stats.num_kv_blocks = 512;
  stats.block_size = 16;

  ServerMetrics vllm(vllm_options());
  const std::vector<std::string> lines = lines_of(vllm.render(stats));
  EXPECT_THAT(lines, Contains("# HELP vllm:num_requests_running Number of requests in model "
                              "execution batches."));
  EXPECT_THAT(lines, Contains("# TYPE vllm:num_requests_running gauge"));
  EXPECT_THAT(lines, Contains(R"(vllm:num_requests_running{model_name="m",engine="0"} 3.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:num_requests_waiting{model_name="m",engine="0"} 2.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.25)"));
  EXPECT_THAT(lines, Contains("# TYPE vllm:cache_config_info gauge"));
  EXPECT_THAT(lines,
              Contains(R"(vllm:cache_config_info{model_name="m",engine="0",block_size="16",)"
                       R"(cache_dtype="auto",enable_prefix_caching="True",)"
                       R"(kv_cache_fraction="0.0",kv_cache_memory_bytes="0",)"
                       R"(num_gpu_blocks="512",num_gpu_blocks_override="0",)"
                       R"(swap_space_bytes="0"} 1.0)"));

  MetricsOptions options;  // default prefix
  options.model_name = "m";
  ServerMetrics vellum(options);
  const std::string text = vellum.render(stats);
  EXPECT_THAT(lines_of(text),
              Contains(R"(vellum:num_requests_running{model_name="m",engine="0"} 3.0)"));
  EXPECT_EQ(text.find("vllm:"), std::string::npos);
}

// The engine's resolved KV storage (issue 37) replaces the configured "auto" in cache_config_info.
TEST(ServerMetricsTest, CacheConfigInfoNamesTheKvStorageInForce) {
  EngineStats stats;
  stats.num_kv_blocks = 684;
  stats.block_size = 128;
  stats.kv_cache_dtype = "k=q8_0,v=bf16";
  ServerMetrics vllm(vllm_options());
  const std::string text = vllm.render(stats);
  EXPECT_NE(text.find(R"(block_size="128",cache_dtype="k=q8_0,v=bf16",)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(num_gpu_blocks="684",)"), std::string::npos) << text;
}

TEST(ServerMetricsTest, CountersAreDeltasOfCumulativeStatsWithTotalSuffix) {
  ServerMetrics metrics(vllm_options());
  step(metrics, cumulative_stats(10, 0, 16, 0, 0), 10, {});
  step(metrics, cumulative_stats(25, 3, 32, 16, 1), 3, {});
  step(metrics, cumulative_stats(25, 3, 32, 16, 1), 0, {});  // nothing new: nothing added
  // render's stats feed the gauges only; the counters keep what the steps reported.
  const std::vector<std::string> lines =
      lines_of(metrics.render(cumulative_stats(999, 999, 999, 999, 999)));
  EXPECT_THAT(lines, Contains("# HELP vllm:prompt_tokens_total Number of prefill tokens "
                              "processed."));
  EXPECT_THAT(lines, Contains("# TYPE vllm:prompt_tokens_total counter"));
  EXPECT_THAT(lines, Contains(R"(vllm:prompt_tokens_total{model_name="m",engine="0"} 25.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:generation_tokens_total{model_name="m",engine="0"} 3.0)"));
  EXPECT_THAT(lines,
              Contains(R"(vllm:prefix_cache_queries_total{model_name="m",engine="0"} 32.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:prefix_cache_hits_total{model_name="m",engine="0"} 16.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:num_preemptions_total{model_name="m",engine="0"} 1.0)"));
  EXPECT_THAT(lines, Not(Contains("# TYPE vllm:prompt_tokens counter")));

  // iteration_tokens_total: steps of 10 and 3 tokens (the empty step is not an iteration).
  EXPECT_THAT(lines, Contains("# TYPE vllm:iteration_tokens_total histogram"));
  const std::string bucket = R"(vllm:iteration_tokens_total_bucket{model_name="m",engine="0",le=)";
  EXPECT_THAT(lines, Contains(bucket + R"("1.0"} 0.0)"));
  EXPECT_THAT(lines, Contains(bucket + R"("8.0"} 1.0)"));
  EXPECT_THAT(lines, Contains(bucket + R"("16.0"} 2.0)"));
  EXPECT_THAT(lines, Contains(bucket + R"("16384.0"} 2.0)"));
  EXPECT_THAT(lines, Contains(bucket + R"("+Inf"} 2.0)"));
  const std::string l = R"({model_name="m",engine="0"})";
  EXPECT_THAT(lines, Contains("vllm:iteration_tokens_total_count" + l + " 2.0"));
  EXPECT_THAT(lines, Contains("vllm:iteration_tokens_total_sum" + l + " 13.0"));
}

TEST(ServerMetricsTest, FinishedRequestFillsTheRequestHistograms) {
  ServerMetrics metrics(vllm_options(100));
  RequestOutput out = request_output("r1", 7, {{5, "length"}}, full_timeline(5), true);
  out.num_cached_tokens = 2;
  step(metrics, cumulative_stats(5, 5, 7, 2, 0), 1, {out});
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  auto has = [&](const std::string& line) { EXPECT_THAT(lines, Contains(line)); };
  const std::string l = R"({model_name="m",engine="0")";

  has("vllm:request_success_total" + l + R"(,finished_reason="length"} 1.0)");
  has("vllm:request_success_total" + l + R"(,finished_reason="stop"} 0.0)");
  has("vllm:prompt_tokens_cached_total" + l + "} 2.0");
  // TTFT 0.75 s: cumulative buckets, +Inf, _count, _sum.
  has("vllm:time_to_first_token_seconds_bucket" + l + R"(,le="0.001"} 0.0)");
  has("vllm:time_to_first_token_seconds_bucket" + l + R"(,le="0.5"} 0.0)");
  has("vllm:time_to_first_token_seconds_bucket" + l + R"(,le="0.75"} 1.0)");
  has("vllm:time_to_first_token_seconds_bucket" + l + R"(,le="2560.0"} 1.0)");
  has("vllm:time_to_first_token_seconds_bucket" + l + R"(,le="+Inf"} 1.0)");
  has("vllm:time_to_first_token_seconds_count" + l + "} 1.0");
  has("vllm:time_to_first_token_seconds_sum" + l + "} 0.75");
  // Four inter-token gaps of 0.5 s.
  has("vllm:inter_token_latency_seconds_bucket" + l + R"(,le="0.4"} 0.0)");
  has("vllm:inter_token_latency_seconds_bucket" + l + R"(,le="0.5"} 4.0)");
  has("vllm:inter_token_latency_seconds_count" + l + "} 4.0");
  has("vllm:inter_token_latency_seconds_sum" + l + "} 2.0");
  // Decode 2 s over 5 - 1 tokens.
  has("vllm:request_time_per_output_token_seconds_bucket" + l + R"(,le="0.4"} 0.0)");
  has("vllm:request_time_per_output_token_seconds_bucket" + l + R"(,le="0.5"} 1.0)");
  has("vllm:request_time_per_output_token_seconds_sum" + l + "} 0.5");
  has("vllm:e2e_request_latency_seconds_bucket" + l + R"(,le="2.5"} 0.0)");
  has("vllm:e2e_request_latency_seconds_bucket" + l + R"(,le="5.0"} 1.0)");
  has("vllm:e2e_request_latency_seconds_sum" + l + "} 3.0");
  has("vllm:request_queue_time_seconds_bucket" + l + R"(,le="0.3"} 1.0)");
  has("vllm:request_queue_time_seconds_sum" + l + "} 0.25");
  has("vllm:request_inference_time_seconds_bucket" + l + R"(,le="2.0"} 0.0)");
  has("vllm:request_inference_time_seconds_bucket" + l + R"(,le="2.5"} 1.0)");
  has("vllm:request_prefill_time_seconds_bucket" + l + R"(,le="0.3"} 0.0)");
  has("vllm:request_prefill_time_seconds_bucket" + l + R"(,le="0.5"} 1.0)");
  has("vllm:request_decode_time_seconds_bucket" + l + R"(,le="1.5"} 0.0)");
  has("vllm:request_decode_time_seconds_bucket" + l + R"(,le="2.0"} 1.0)");
  has("vllm:request_decode_time_seconds_sum" + l + "} 2.0");
  // Token counts on 1-2-5 buckets.
  has("vllm:request_prompt_tokens_bucket" + l + R"(,le="5.0"} 0.0)");
  has("vllm:request_prompt_tokens_bucket" + l + R"(,le="10.0"} 1.0)");
  has("vllm:request_prompt_tokens_sum" + l + "} 7.0");
  has("vllm:request_generation_tokens_bucket" + l + R"(,le="2.0"} 0.0)");
  has("vllm:request_generation_tokens_bucket" + l + R"(,le="5.0"} 1.0)");
  has("vllm:request_max_num_generation_tokens_sum" + l + "} 5.0");
  has("vllm:request_prefill_kv_computed_tokens_bucket" + l + R"(,le="2.0"} 0.0)");
  has("vllm:request_prefill_kv_computed_tokens_bucket" + l + R"(,le="5.0"} 1.0)");
  has("vllm:request_prefill_kv_computed_tokens_sum" + l + "} 5.0");
}

TEST(ServerMetricsTest, TokenCountBucketsAreCappedAtMaxModelLen) {
  ServerMetrics metrics(vllm_options(2048));
  SamplingParams params;
  params.max_tokens = 4096;  // above every finite bucket
  metrics.on_request_submitted(params);
  const std::string text = metrics.render(EngineStats{});
  const std::vector<std::string> expected = {"1.0",   "2.0",    "5.0",    "10.0",
                                             "20.0",  "50.0",   "100.0",  "200.0",
                                             "500.0", "1000.0", "2000.0", "+Inf"};
  for (const char* name : {"vllm:request_prompt_tokens", "vllm:request_generation_tokens",
                           "vllm:request_max_num_generation_tokens",
                           "vllm:request_params_max_tokens",
                           "vllm:request_prefill_kv_computed_tokens"}) {
    EXPECT_EQ(bucket_bounds(text, name), expected) << name;
  }
  const std::vector<std::string> lines = lines_of(text);
  const std::string bucket =
      R"(vllm:request_params_max_tokens_bucket{model_name="m",engine="0",le=)";
  EXPECT_THAT(lines, Contains(bucket + R"("2000.0"} 0.0)"));
  EXPECT_THAT(lines, Contains(bucket + R"("+Inf"} 1.0)"));
  EXPECT_EQ(bucket_bounds(text, "vllm:request_params_n"),
            (std::vector<std::string>{"1.0", "2.0", "5.0", "10.0", "20.0", "+Inf"}));
}

TEST(ServerMetricsTest, RequestParamsAreObservedAtSubmission) {
  ServerMetrics metrics(vllm_options());
  SamplingParams params;
  params.n = 1;
  params.max_tokens = 16;
  metrics.on_request_submitted(params);
  params.n = 4;
  params.max_tokens = std::nullopt;  // up to the model length: not observed
  metrics.on_request_submitted(params);
  params.n = 30;
  params.max_tokens = 100;
  metrics.on_request_submitted(params);
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  const std::string l = R"({model_name="m",engine="0")";
  EXPECT_THAT(lines, Contains("vllm:request_params_n_bucket" + l + R"(,le="1.0"} 1.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_params_n_bucket" + l + R"(,le="2.0"} 1.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_params_n_bucket" + l + R"(,le="5.0"} 2.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_params_n_bucket" + l + R"(,le="20.0"} 2.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_params_n_bucket" + l + R"(,le="+Inf"} 3.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_params_n_sum" + l + "} 35.0"));
  EXPECT_THAT(lines, Contains("vllm:request_params_max_tokens_count" + l + "} 2.0"));
  EXPECT_THAT(lines, Contains("vllm:request_params_max_tokens_sum" + l + "} 116.0"));
}

TEST(ServerMetricsTest, RequestSuccessCountsEveryChildByReason) {
  ServerMetrics metrics(vllm_options());
  const std::vector<RequestOutput> outputs = {
      request_output("a", 4, {{2, "stop"}}, full_timeline(2), true),
      request_output("b", 4, {{3, "stop"}, {5, "length"}}, full_timeline(8), true),
      request_output("c", 4, {{1, "abort"}}, full_timeline(1), true),
      request_output("d", 4, {{1, std::nullopt}}, full_timeline(1), false),  // still running
  };
  step(metrics, EngineStats{}, 4, outputs);
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  const std::string l = R"(vllm:request_success_total{model_name="m",engine="0",finished_reason=)";
  EXPECT_THAT(lines, Contains("# TYPE vllm:request_success_total counter"));
  EXPECT_THAT(lines, Contains(l + R"("stop"} 2.0)"));
  EXPECT_THAT(lines, Contains(l + R"("length"} 1.0)"));
  EXPECT_THAT(lines, Contains(l + R"("abort"} 1.0)"));
  EXPECT_THAT(lines, Contains(l + R"("error"} 0.0)"));
  EXPECT_THAT(lines, Contains(l + R"("repetition"} 0.0)"));
  // Three finished requests (not four, not five children) in the per-request histograms.
  EXPECT_THAT(lines,
              Contains(R"(vllm:request_prompt_tokens_count{model_name="m",engine="0"} 3.0)"));
}

TEST(ServerMetricsTest, AbortedBeforeScheduledSkipsTheTimesItNeverHad) {
  ServerMetrics metrics(vllm_options());
  RequestMetrics m;
  m.arrival_time = 50.0;
  m.finished_time = 50.5;
  step(metrics, EngineStats{}, 0, {request_output("r", 12, {{0, "abort"}}, m, true)});
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  const std::string l = R"({model_name="m",engine="0"})";
  EXPECT_THAT(lines, Contains(R"(vllm:request_success_total{model_name="m",engine="0",)"
                              R"(finished_reason="abort"} 1.0)"));
  EXPECT_THAT(lines, Contains("vllm:e2e_request_latency_seconds_count" + l + " 1.0"));
  EXPECT_THAT(lines, Contains("vllm:e2e_request_latency_seconds_sum" + l + " 0.5"));
  for (const char* name :
       {"time_to_first_token_seconds", "inter_token_latency_seconds",
        "request_time_per_output_token_seconds", "request_queue_time_seconds",
        "request_inference_time_seconds", "request_prefill_time_seconds",
        "request_decode_time_seconds", "request_prefill_kv_computed_tokens"}) {
    EXPECT_THAT(lines, Contains("vllm:" + std::string(name) + "_count" + l + " 0.0")) << name;
  }
  EXPECT_THAT(lines, Contains("vllm:request_prompt_tokens_count" + l + " 1.0"));
  EXPECT_THAT(lines, Contains("vllm:request_prompt_tokens_sum" + l + " 12.0"));
  EXPECT_THAT(lines, Contains("vllm:request_generation_tokens_sum" + l + " 0.0"));
  EXPECT_THAT(lines, Contains("vllm:request_max_num_generation_tokens_count" + l + " 1.0"));
}

TEST(ServerMetricsTest, LatenciesRepeatedInLaterOutputsAreObservedOnce) {
  ServerMetrics metrics(vllm_options());
  RequestMetrics m = full_timeline(1);
  m.inter_token_latencies.clear();
  m.last_token_time = m.first_token_time;
  step(metrics, EngineStats{}, 8, {request_output("r", 4, {{1, std::nullopt}}, m, false)});
  m.inter_token_latencies = {0.5};
  m.num_generation_tokens = 2;
  step(metrics, EngineStats{}, 1, {request_output("r", 4, {{2, std::nullopt}}, m, false)});
  m.inter_token_latencies = {0.5, 0.25};
  m.num_generation_tokens = 3;
  step(metrics, EngineStats{}, 1, {request_output("r", 4, {{3, "stop"}}, m, true)});
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  const std::string l = R"({model_name="m",engine="0"})";
  EXPECT_THAT(lines, Contains("vllm:time_to_first_token_seconds_count" + l + " 1.0"));
  EXPECT_THAT(lines, Contains("vllm:inter_token_latency_seconds_count" + l + " 2.0"));
  EXPECT_THAT(lines, Contains("vllm:inter_token_latency_seconds_sum" + l + " 0.75"));
  EXPECT_THAT(lines, Contains("vllm:request_generation_tokens_count" + l + " 1.0"));
  EXPECT_THAT(lines, Contains("vllm:request_max_num_generation_tokens_sum" + l + " 3.0"));
}

TEST(ServerMetricsTest, LongestChildOfDeltaAndCumulativeParallelSampling) {
  ServerMetrics metrics(vllm_options());
  RequestMetrics m;
  m.arrival_time = 9.0;
  m.first_scheduled_time = 9.5;
  m.first_token_time = 10.0;
  m.last_token_time = 11.5;
  m.finished_time = 11.5;
  // Delta outputs (n = 2): child 0 ends with 3 tokens, child 1 with 4; the final output carries
  // only the last step's tokens.
  m.num_generation_tokens = 2;
  step(metrics, EngineStats{}, 8, {request_output("delta", 4, {{1, {}}, {1, {}}}, m, false)});
  m.num_generation_tokens = 5;
  step(metrics, EngineStats{}, 2, {request_output("delta", 4, {{2, "stop"}, {1, {}}}, m, false)});
  m.num_generation_tokens = 7;
  step(metrics, EngineStats{}, 1,
       {request_output("delta", 4, {{0, "stop"}, {2, "length"}}, m, true)});
  // The same sequences as cumulative outputs, finished at once.
  step(metrics, EngineStats{}, 1,
       {request_output("cumulative", 4, {{3, "stop"}, {4, "length"}}, m, true)});
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  const std::string l = R"({model_name="m",engine="0")";
  EXPECT_THAT(lines, Contains("vllm:request_max_num_generation_tokens_bucket" + l +
                              R"(,le="2.0"} 0.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_max_num_generation_tokens_bucket" + l +
                              R"(,le="5.0"} 2.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_max_num_generation_tokens_sum" + l + "} 8.0"));
  EXPECT_THAT(lines, Contains("vllm:request_generation_tokens_sum" + l + "} 14.0"));
  // Decode 1.5 s over the longest child's 4 - 1 tokens.
  EXPECT_THAT(lines, Contains("vllm:request_time_per_output_token_seconds_sum" + l + "} 1.0"));
  EXPECT_THAT(lines, Contains("vllm:request_time_per_output_token_seconds_bucket" + l +
                              R"(,le="0.5"} 2.0)"));
  EXPECT_THAT(lines, Contains("vllm:request_success_total" + l +
                              R"(,finished_reason="stop"} 2.0)"));
}

TEST(ServerMetricsTest, LabelValuesAreEscapedInTheOutput) {
  MetricsOptions options = vllm_options();
  options.model_name = "a\"b\\c\nd";
  ServerMetrics metrics(options);
  const std::string text = metrics.render(EngineStats{});
  EXPECT_THAT(lines_of(text),
              Contains(R"(vllm:num_requests_running{model_name="a\"b\\c\nd",engine="0"} 0.0)"));
  EXPECT_THAT(check_exposition(text), IsEmpty());
}

TEST(ServerMetricsTest, WholeOutputIsWellFormed) {
  for (const char* prefix : {"vellum", "vllm"}) {
    MetricsOptions options = vllm_options(4096);
    options.prefix = prefix;
    options.model_name = "Model \"x\"\\y";
    ServerMetrics metrics(options);
    SamplingParams params;
    metrics.on_request_submitted(params);
    RequestMetrics aborted;
    aborted.arrival_time = 1.0;
    aborted.finished_time = 2.0;
    step(metrics, cumulative_stats(7, 5, 7, 0, 1), 12,
         {request_output("a", 7, {{5, "length"}, {3, "stop"}}, full_timeline(8), true),
          request_output("b", 3, {{0, "abort"}}, aborted, true),
          request_output("c", 3, {{2, "odd \"reason\""}}, full_timeline(2), true)});
    EngineStats stats = cumulative_stats(7, 5, 7, 0, 1);
    stats.num_running = 1;
    stats.kv_cache_usage = 0.5;
    const std::string text = metrics.render(stats);
    EXPECT_THAT(check_exposition(text), IsEmpty()) << text;
    EXPECT_THAT(lines_of(text),
                Contains(std::string(prefix) +
                         R"(:request_success_total{model_name="Model \"x\"\\y",engine="0",)"
                         R"(finished_reason="odd \"reason\""} 1.0)"));
  }
}

TEST(ServerMetricsTest, TheCheckerRejectsMalformedOutput) {
  const std::string good =
      "# HELP x:a_total Help.\n# TYPE x:a_total counter\n"
      "x:a_total{model_name=\"m\",engine=\"0\"} 1.0\n";
  EXPECT_THAT(check_exposition(good), IsEmpty());
  EXPECT_THAT(check_exposition(good + good), Not(IsEmpty()));  // family twice
  EXPECT_THAT(check_exposition("# HELP x:a Help.\n# TYPE x:a counter\n"
                               "x:a{model_name=\"m\",engine=\"0\"} 1.0\n"),
              Not(IsEmpty()));  // counter without _total
  EXPECT_THAT(check_exposition("# HELP x:g Help.\n# TYPE x:g gauge\n"
                               "x:g{model_name=\"m\"\",engine=\"0\"} 1.0\n"),
              Not(IsEmpty()));  // unescaped quote
  EXPECT_THAT(check_exposition("# HELP x:h Help.\n# TYPE x:h histogram\n"
                               "x:h_bucket{model_name=\"m\",engine=\"0\",le=\"1.0\"} 2.0\n"
                               "x:h_bucket{model_name=\"m\",engine=\"0\",le=\"+Inf\"} 1.0\n"
                               "x:h_count{model_name=\"m\",engine=\"0\"} 1.0\n"
                               "x:h_sum{model_name=\"m\",engine=\"0\"} 1.0\n"),
              Not(IsEmpty()));  // not cumulative
  EXPECT_THAT(check_exposition("# TYPE x:g gauge\nx:g{model_name=\"m\",engine=\"0\"} 1.0\n"),
              Not(IsEmpty()));  // no HELP
}

TEST(ServerMetricsTest, LogLineReportsThroughputOverTheInterval) {
  ServerMetrics metrics(vllm_options());
  RequestOutput out = request_output("r", 8, {{2, "stop"}}, full_timeline(2), true);
  out.num_cached_tokens = 2;
  step(metrics, EngineStats{}, 8, {out});
  // The first call sets the interval's start; nothing was counted yet.
  EXPECT_EQ(metrics.log_line(EngineStats{}, 1000.0),
            "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
            "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
            "Prefix cache hit rate: 25.0%");
  EngineStats stats = cumulative_stats(500, 250, 0, 0, 0);
  stats.num_running = 3;
  stats.num_waiting = 1;
  stats.kv_cache_usage = 0.375;
  EXPECT_EQ(metrics.log_line(stats, 1010.0),
            "Avg prompt throughput: 50.0 tokens/s, Avg generation throughput: 25.0 tokens/s, "
            "Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 37.5%, "
            "Prefix cache hit rate: 25.0%");
  // The next interval starts where this one ended.
  stats.prompt_tokens = 600;
  EXPECT_EQ(metrics.log_line(stats, 1020.0).substr(0, 36), "Avg prompt throughput: 10.0 tokens/s");
}

TEST(ServerMetricsTest, ConcurrentStepsAndRendersCountEverything) {
  ServerMetrics metrics(vllm_options());
  constexpr int kSteps = 200;
  std::thread engine([&] {
    for (int i = 1; i <= kSteps; ++i) {
      step(metrics, cumulative_stats(i, i, 0, 0, 0), 1,
           {request_output("r" + std::to_string(i), 2, {{1, "stop"}}, full_timeline(1), true)});
    }
  });
  for (int i = 0; i < 50; ++i) {
    EXPECT_THAT(check_exposition(metrics.render(EngineStats{})), IsEmpty());
  }
  engine.join();
  const std::vector<std::string> lines = lines_of(metrics.render(EngineStats{}));
  EXPECT_THAT(lines, Contains(R"(vllm:prompt_tokens_total{model_name="m",engine="0"} 200.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:request_success_total{model_name="m",engine="0",)"
                              R"(finished_reason="stop"} 200.0)"));
}

TEST(ServerMetricsTest, RejectsAnInvalidPrefix) {
  for (const char* prefix : {"", "vllm:", "1abc", "my-prefix"}) {
    MetricsOptions options;
    options.prefix = prefix;
    EXPECT_THROW(ServerMetrics metrics(options), Error) << prefix;
  }
}

}  // namespace
}  // namespace vellum::server

namespace vellum::server {
namespace {

// Speculative decoding (issue 36): vLLM's spec_decode counters, from the engine's cumulative
// counts, only when speculation is on; the log line adds acceptance over its interval.
TEST(ServerMetricsTest, SpecDecodeCountersAndLogLineWhenSpeculating) {
  ServerMetrics metrics(vllm_options());
  EXPECT_EQ(metrics.render(EngineStats{}).find("spec_decode"), std::string::npos);
  EngineStats stats;
  stats.spec_num_drafts = 10;
  stats.spec_num_draft_tokens = 40;
  stats.spec_num_accepted_tokens = 25;
  stats.spec_num_accepted_tokens_per_pos = {9, 7, 5, 4};
  const std::vector<std::string> lines = lines_of(metrics.render(stats));
  EXPECT_THAT(lines, Contains("# TYPE vllm:spec_decode_num_drafts_total counter"));
  EXPECT_THAT(lines, Contains(R"(vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 10.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:spec_decode_num_draft_tokens_total{model_name="m",engine="0"} 40.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:spec_decode_num_accepted_tokens_total{model_name="m",engine="0"} 25.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="0"} 9.0)"));
  EXPECT_THAT(lines, Contains(R"(vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="3"} 4.0)"));
  const std::string line = metrics.log_line(stats, 1000.0);
  EXPECT_NE(line.find("Spec decode: Mean acceptance length: 3.50, Accepted: 25 tokens, "
                      "Drafted: 40 tokens, Draft acceptance rate: 62.5%"),
            std::string::npos)
      << line;
  stats.spec_num_drafts = 12;
  stats.spec_num_draft_tokens = 48;
  stats.spec_num_accepted_tokens = 27;
  EXPECT_NE(metrics.log_line(stats, 1010.0).find("Mean acceptance length: 2.00, Accepted: 2 "
                                                 "tokens, Drafted: 8 tokens, Draft acceptance "
                                                 "rate: 25.0%"),
            std::string::npos);
}

}  // namespace
}  // namespace vellum::server
