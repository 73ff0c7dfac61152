// `vellum bench serve`: vLLM's online serving benchmark (spec §7.2) on its random dataset
// (§7.1), against any OpenAI-compatible server (vellum serve, vLLM, llama.cpp's server).
// A pure HTTP client: it loads no model and needs no tokenizer (prompts are token ids).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "benchserve/client.h"
#include "benchserve/dataset.h"
#include "benchserve/metrics.h"
#include "benchserve/report.h"
#include "benchserve/spec_metrics.h"
#include "cli/commands.h"
#include "common/check.h"

namespace vellum::cli {
namespace {

namespace bs = vellum::benchserve;

struct ServeBenchOptions {
  std::string backend = "openai";
  std::string base_url;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "/v1/completions";
  std::vector<std::string> headers;
  std::string model;
  std::string served_model_name;
  std::string tokenizer;
  std::string api_key;
  std::string dataset_name = "random";
  bs::RandomDatasetConfig dataset;
  std::string request_rate = "inf";
  double burstiness = 1.0;
  int64_t max_concurrency = 0;
  bool ignore_eos = false;
  std::optional<double> temperature, top_p, min_p, frequency_penalty, presence_penalty,
      repetition_penalty;
  std::optional<int64_t> top_k, logprobs;
  std::string extra_body;
  std::string percentile_metrics = "ttft,tpot,itl";
  std::string metric_percentiles = "99";
  std::vector<std::string> goodput;
  bool save_result = false;
  bool save_detailed = false;
  bool append_result = false;
  std::string result_dir;
  std::string result_filename;
  std::string label;
  std::vector<std::string> metadata;
  bool disable_tqdm = false;
  int num_warmups = 0;
  int ready_check_timeout_sec = 600;
  std::string request_id_prefix;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

double parse_double(const std::string& text, const char* option) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  VELLUM_CHECK(!text.empty() && end == text.c_str() + text.size(), ErrorCode::kInvalidArgument,
               "{} expects a number, got '{}'", option, text);
  return value;
}

std::pair<std::string, std::string> parse_key_value(const std::string& item, const char* option) {
  const size_t eq = item.find('=');
  VELLUM_CHECK(eq != std::string::npos, ErrorCode::kInvalidArgument,
               "{} expects KEY=VALUE, got '{}'", option, item);
  auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t");
    const size_t e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  return {trim(item.substr(0, eq)), trim(item.substr(eq + 1))};
}

bs::GoodputSlo parse_goodput(const std::vector<std::string>& pairs) {
  bs::GoodputSlo slo;
  for (const std::string& pair : pairs) {
    const std::vector<std::string> kv = split(pair, ':');
    VELLUM_CHECK(kv.size() == 2, ErrorCode::kInvalidArgument,
                 "--goodput expects KEY:VALUE pairs (ttft, tpot or e2el, in ms), got '{}'", pair);
    const double ms = parse_double(kv[1], "--goodput");
    VELLUM_CHECK(ms >= 0, ErrorCode::kInvalidArgument,
                 "--goodput {}: the objective must not be negative", pair);
    if (kv[0] == "ttft") {
      slo.ttft_ms = ms;
    } else if (kv[0] == "tpot") {
      slo.tpot_ms = ms;
    } else if (kv[0] == "e2el") {
      slo.e2el_ms = ms;
    } else {
      VELLUM_THROW(ErrorCode::kInvalidArgument,
                   "--goodput {}: the metric must be one of ttft, tpot, e2el", pair);
    }
  }
  return slo;
}

std::string now_string() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// vLLM's initial test run: the first prompt, retried every few seconds until it succeeds or
// the timeout passes (the server may still be loading). Also asks for the model name first
// when none was given. Unlike vLLM, a client error (4xx other than 408/429) fails at once:
// the server is up and rejects the request, so waiting would not help.
void wait_until_ready(bs::ClientConfig& client, const bs::SampleRequest& test_request,
                      int timeout_sec) {
  const auto deadline = bs::Clock::now() + std::chrono::seconds(timeout_sec);
  if (timeout_sec > 0) std::printf("Waiting for endpoint to become up in %d seconds\n", timeout_sec);
  while (true) {
    std::string error;
    bool rejected = false;
    try {
      if (client.model.empty()) client.model = bs::fetch_first_model_id(client);
      if (timeout_sec <= 0) return;
      const bs::RequestOutput out = bs::send_request(client, test_request, "", bs::Clock::now());
      if (out.success) return;
      error = out.error;
      rejected = out.http_status >= 400 && out.http_status < 500 && out.http_status != 408 &&
                 out.http_status != 429;
    } catch (const Error& e) {
      error = e.what();
    }
    const auto now = bs::Clock::now();
    VELLUM_CHECK(now < deadline && !rejected, ErrorCode::kIo,
                 "Initial test run failed - please make sure the benchmark arguments are "
                 "correctly specified{}. Error: {}",
                 rejected ? " (the prompt token ids must be in the model's vocabulary: see "
                            "--vocab-size)"
                          : "",
                 error);
    std::this_thread::sleep_for(std::min<bs::Clock::duration>(std::chrono::seconds(5), deadline - now));
  }
}

int run_serve_bench(ServeBenchOptions& o) {
  VELLUM_CHECK(o.dataset_name == "random", ErrorCode::kUnsupported,
               "--dataset-name {} is not supported; only 'random' is", o.dataset_name);
  bs::ClientConfig client;
  if (o.backend == "openai-chat") {
    client.api = bs::ApiKind::kChatCompletions;
    VELLUM_CHECK(o.endpoint.ends_with("chat/completions"), ErrorCode::kInvalidArgument,
                 "--backend openai-chat needs --endpoint /v1/chat/completions, got {}", o.endpoint);
  } else {
    VELLUM_CHECK(o.endpoint.ends_with("completions") && !o.endpoint.ends_with("chat/completions"),
                 ErrorCode::kInvalidArgument,
                 "--backend {} needs a completions endpoint (/v1/completions), got {}; use "
                 "--backend openai-chat for /v1/chat/completions",
                 o.backend, o.endpoint);
  }
  client.server = bs::parse_base_url(
      o.base_url.empty() ? fmt::format("http://{}:{}", o.host, o.port) : o.base_url);
  client.endpoint = o.endpoint;
  client.model = o.served_model_name.empty() ? o.model : o.served_model_name;
  client.api_key = o.api_key;
  if (client.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY")) client.api_key = env;
  }
  for (const std::string& h : o.headers) client.headers.push_back(parse_key_value(h, "--header"));
  // As vLLM does for the random dataset: generation always runs to the sampled length.
  client.ignore_eos = true;
  client.request_id_prefix = o.request_id_prefix;

  nlohmann::json& body = client.extra_body;
  body["temperature"] = o.temperature.value_or(0.0);
  if (o.top_p) body["top_p"] = *o.top_p;
  if (o.top_k) body["top_k"] = *o.top_k;
  if (o.min_p) body["min_p"] = *o.min_p;
  if (o.frequency_penalty) body["frequency_penalty"] = *o.frequency_penalty;
  if (o.presence_penalty) body["presence_penalty"] = *o.presence_penalty;
  if (o.repetition_penalty) body["repetition_penalty"] = *o.repetition_penalty;
  if (o.logprobs) body["logprobs"] = *o.logprobs;
  if (!o.extra_body.empty()) {
    const nlohmann::json extra = nlohmann::json::parse(o.extra_body, nullptr, false);
    VELLUM_CHECK(extra.is_object(), ErrorCode::kInvalidArgument,
                 "--extra-body must be a JSON object, got '{}'", o.extra_body);
    for (const auto& [key, value] : extra.items()) body[key] = value;
  }

  bs::TrafficConfig traffic;
  traffic.request_rate = parse_double(o.request_rate, "--request-rate");
  traffic.burstiness = o.burstiness;
  traffic.max_concurrency = o.max_concurrency;
  traffic.seed = o.dataset.seed;
  VELLUM_CHECK(o.max_concurrency >= 0, ErrorCode::kInvalidArgument,
               "--max-concurrency must not be negative");

  std::vector<double> percentiles;
  for (const std::string& p : split(o.metric_percentiles, ',')) {
    percentiles.push_back(parse_double(p, "--metric-percentiles"));
    VELLUM_CHECK(percentiles.back() >= 0 && percentiles.back() <= 100,
                 ErrorCode::kInvalidArgument, "--metric-percentiles: {} is not in [0, 100]", p);
  }
  bs::RunInfo info;
  info.percentile_metrics = split(o.percentile_metrics, ',');
  for (const std::string& metric : info.percentile_metrics) {
    VELLUM_CHECK(metric == "ttft" || metric == "tpot" || metric == "itl" || metric == "e2el",
                 ErrorCode::kInvalidArgument,
                 "--percentile-metrics: '{}' is not one of ttft, tpot, itl, e2el", metric);
  }
  const bs::GoodputSlo slo = parse_goodput(o.goodput);
  for (const std::string& m : o.metadata) info.metadata.push_back(parse_key_value(m, "--metadata"));

  const std::vector<bs::SampleRequest> requests = bs::sample_random_requests(o.dataset);
  if (!o.tokenizer.empty()) {
    std::printf("Note: --tokenizer is not used; prompts are sent as token ids.\n");
  }

  std::printf("Starting initial single prompt test run...\n");
  wait_until_ready(client, requests.front(), o.ready_check_timeout_sec);
  std::printf(o.ready_check_timeout_sec > 0 ? "Initial test run completed.\n"
                                            : "Skipping endpoint ready check.\n");
  if (o.num_warmups > 0) {
    std::printf("Warming up with %d requests...\n", o.num_warmups);
    bs::TrafficConfig warmup = traffic;
    warmup.request_rate = INFINITY;
    bs::run_benchmark(client, warmup,
                      std::vector<bs::SampleRequest>(static_cast<size_t>(o.num_warmups),
                                                     requests.front()));
    std::printf("Warmup run completed.\n");
  }

  std::printf("Starting main benchmark run...\n");
  std::printf("Traffic request rate: %s\n", bs::python_float(traffic.request_rate).c_str());
  std::printf("Burstiness factor: %s (%s)\n", bs::python_float(o.burstiness).c_str(),
              o.burstiness == 1.0 ? "Poisson process" : "Gamma distribution");
  std::printf("Maximum request concurrency: %s\n",
              o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "None");
  std::fflush(stdout);
  const std::optional<bs::SpecDecodeCounts> spec_before = bs::fetch_spec_decode_counts(client);
  const bool show_progress = !o.disable_tqdm && isatty(STDERR_FILENO);
  const auto total = static_cast<int64_t>(requests.size());
  const bs::BenchmarkRun run = bs::run_benchmark(client, traffic, requests, [&](int64_t done) {
    if (show_progress) std::fprintf(stderr, "\r%lld/%lld requests", static_cast<long long>(done),
                                    static_cast<long long>(total));
  });
  if (show_progress) std::fprintf(stderr, "\n");

  const bs::BenchmarkMetrics metrics = bs::calculate_metrics(run.outputs, run.duration_s,
                                                             percentiles, slo);
  std::fflush(stdout);
  if (metrics.completed == 0) {
    std::fprintf(stderr, "warning: all requests failed; check the benchmark arguments.\n");
  }
  for (const bs::RequestOutput& out : run.outputs) {
    if (!out.success) {
      std::fprintf(stderr, "first failed request: %s\n", out.error.c_str());
      break;
    }
  }
  info.date = now_string();
  info.backend = o.backend;
  if (!o.label.empty()) info.label = o.label;
  info.model_id = o.model.empty() ? client.model : o.model;
  info.num_prompts = o.dataset.num_prompts;
  info.request_rate = traffic.request_rate;
  info.burstiness = o.burstiness;
  if (o.max_concurrency > 0) info.max_concurrency = o.max_concurrency;
  info.goodput_enabled = slo.enabled();
  std::printf("%s", bs::format_result_block(info, metrics, run.duration_s).c_str());
  if (spec_before) {
    if (const auto spec_after = bs::fetch_spec_decode_counts(client)) {
      std::printf("%s", bs::format_spec_decode_line(*spec_before, *spec_after).c_str());
    }
  }

  if (o.save_result || o.append_result) {
    std::filesystem::path file =
        o.result_filename.empty() ? bs::default_result_filename(info) : o.result_filename;
    if (!o.result_dir.empty()) {
      std::filesystem::create_directories(o.result_dir);
      file = std::filesystem::path(o.result_dir) / file;
    }
    const bool append = o.append_result && std::filesystem::exists(file) &&
                        std::filesystem::file_size(file) > 0;
    std::ofstream stream(file, o.append_result ? std::ios::app : std::ios::trunc);
    VELLUM_CHECK(stream.good(), ErrorCode::kIo, "cannot write the result file {}", file.string());
    if (append) stream << "\n";
    stream << bs::result_json(info, metrics, run, o.save_detailed).dump();
    VELLUM_CHECK(stream.good(), ErrorCode::kIo, "cannot write the result file {}", file.string());
  }
  return metrics.completed > 0 ? 0 : 1;
}

}  // namespace

CommandRunner add_serve_bench_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "serve", "Online serving benchmark of an OpenAI-compatible server (vllm bench serve)");
  auto o = std::make_shared<ServeBenchOptions>();
  cmd->add_option("--backend", o->backend,
                  "openai or vllm (/v1/completions, token-id prompts) or openai-chat "
                  "(/v1/chat/completions, word prompts)")
      ->check(CLI::IsMember({"openai", "vllm", "openai-chat"}));
  cmd->add_option("--base-url", o->base_url, "Server URL, e.g. http://host:8000 (else --host/--port)");
  cmd->add_option("--host", o->host, "Server host");
  cmd->add_option("--port", o->port, "Server port");
  cmd->add_option("--endpoint", o->endpoint, "API endpoint");
  cmd->add_option("--header", o->headers, "Extra request headers, KEY=VALUE ...");
  cmd->add_option("--model", o->model, "Model name (default: the first of GET /v1/models)");
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model name sent in requests, if not --model");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Accepted for vLLM compatibility and not used (prompts are token ids)");
  cmd->add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer' (default: $OPENAI_API_KEY)");
  cmd->add_option("--dataset-name", o->dataset_name, "Dataset; only 'random'");
  cmd->add_option("--random-input-len", o->dataset.input_len, "Mean prompt tokens per request");
  cmd->add_option("--random-output-len", o->dataset.output_len, "Mean output tokens per request");
  cmd->add_option("--random-range-ratio", o->dataset.range_ratio,
                  "Lengths vary uniformly within ±ratio of the means, ratio in [0, 1)");
  cmd->add_option("--random-prefix-len", o->dataset.prefix_len,
                  "Random tokens shared by the start of every prompt");
  cmd->add_option("--num-prompts", o->dataset.num_prompts, "Number of requests");
  cmd->add_option("--seed", o->dataset.seed,
                  "Seed of the dataset and arrival times (std::mt19937_64: the same "
                  "distributions as vLLM's numpy generators, not the same draws)");
  cmd->add_option("--vocab-size", o->dataset.vocab_size,
                  "Prompt token ids are drawn below this; must not exceed the model's vocabulary");
  cmd->add_option("--min-token-id", o->dataset.min_token_id,
                  "Smallest prompt token id (skips the special tokens at the start of most "
                  "vocabularies)");
  cmd->add_option("--num-special-tokens", o->dataset.num_special_tokens,
                  "Subtracted from --random-input-len, as vLLM does for the tokens its tokenizer "
                  "adds (token-id prompts get none)");
  cmd->add_option("--request-rate", o->request_rate,
                  "Requests per second ('inf': all at once), else Poisson/gamma arrivals");
  cmd->add_option("--burstiness", o->burstiness,
                  "Gamma shape of the arrival gaps (1: Poisson; <1 burstier, >1 more uniform)");
  cmd->add_option("--max-concurrency", o->max_concurrency,
                  "Most requests in flight at once (default: no limit beyond 256 threads)");
  cmd->add_flag("--ignore-eos", o->ignore_eos,
                "Send ignore_eos (always on for the random dataset, as in vLLM)");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (default 0: greedy)");
  cmd->add_option("--top-p", o->top_p, "Top-p sampling parameter");
  cmd->add_option("--top-k", o->top_k, "Top-k sampling parameter");
  cmd->add_option("--min-p", o->min_p, "Min-p sampling parameter");
  cmd->add_option("--frequency-penalty", o->frequency_penalty, "Frequency penalty");
  cmd->add_option("--presence-penalty", o->presence_penalty, "Presence penalty");
  cmd->add_option("--repetition-penalty", o->repetition_penalty,
                  "Repetition penalty (completions send 1.0 by default)");
  cmd->add_option("--logprobs", o->logprobs, "Logprobs per token to request");
  cmd->add_option("--extra-body", o->extra_body, "JSON object merged into every request body");
  cmd->add_option("--percentile-metrics", o->percentile_metrics,
                  "Metrics to report: comma-separated of ttft, tpot, itl, e2el");
  cmd->add_option("--metric-percentiles", o->metric_percentiles,
                  "Comma-separated percentiles to report, e.g. 25,50,99");
  cmd->add_option("--goodput", o->goodput,
                  "Service level objectives KEY:VALUE in ms, KEY one of ttft, tpot, e2el");
  cmd->add_flag("--save-result", o->save_result, "Save the results as JSON");
  cmd->add_flag("--save-detailed", o->save_detailed,
                "Also save per-request lists (input_lens, output_lens, ttfts, itls, "
                "generated_texts, errors)");
  cmd->add_flag("--append-result", o->append_result, "Append the JSON to the result file");
  cmd->add_option("--result-dir", o->result_dir, "Directory of the result file");
  cmd->add_option("--result-filename", o->result_filename,
                  "Result file name (default {label}-{rate}qps[-concurrency{n}]-{model}-{date}.json)");
  cmd->add_option("--label", o->label, "Label of the result (default: --backend)");
  cmd->add_option("--metadata", o->metadata, "KEY=VALUE pairs saved in the result file");
  cmd->add_flag("--disable-tqdm", o->disable_tqdm, "No progress line");
  cmd->add_option("--num-warmups", o->num_warmups, "Warm-up requests before the run");
  cmd->add_option("--ready-check-timeout-sec", o->ready_check_timeout_sec,
                  "Retry the initial test request this long (0: skip the check)");
  cmd->add_option("--request-id-prefix", o->request_id_prefix,
                  "Send 'x-request-id: <prefix><index>' with each request");
  return [o] {
    try {
      return run_serve_bench(*o);
    } catch (...) {
      std::fflush(stdout);  // what was printed goes before the error main() prints to stderr
      throw;
    }
  };
}

}  // namespace vellum::cli
