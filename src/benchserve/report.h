// The printed result block and the --save-result JSON of `vellum bench serve`, in the format
// and with the keys of `vllm bench serve` so existing tooling can read them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "benchserve/client.h"
#include "benchserve/metrics.h"

namespace vellum::benchserve {

// What the run was asked to do, as the report and result file show it.
struct RunInfo {
  std::string date;  // "%Y%m%d-%H%M%S"
  std::string backend = "openai";
  std::optional<std::string> label;
  std::string model_id;
  int64_t num_prompts = 0;
  double request_rate = INFINITY;
  double burstiness = 1.0;
  std::optional<int64_t> max_concurrency;
  std::vector<std::pair<std::string, std::string>> metadata;  // --metadata KEY=VALUE
  std::vector<std::string> percentile_metrics = {"ttft", "tpot", "itl"};  // of ttft, tpot, itl, e2el
  bool goodput_enabled = false;
};

// Python's str(float): "inf", "10.0", "0.5" (used in the printed lines and file names).
std::string python_float(double value);

// "============ Serving Benchmark Result ============" through the closing "=" line.
std::string format_result_block(const RunInfo& info, const BenchmarkMetrics& metrics,
                                double duration_s);

// vLLM's result JSON (setup keys, then the run's). The per-request lists (input_lens,
// output_lens, ttfts, itls, generated_texts, errors) only when detailed (--save-detailed).
nlohmann::ordered_json result_json(const RunInfo& info, const BenchmarkMetrics& metrics,
                                   const BenchmarkRun& run, bool detailed);

// "{label}-{rate}qps[-concurrency{n}]-{model basename}-{date}.json", vLLM's default name.
std::string default_result_filename(const RunInfo& info);

}  // namespace vellum::benchserve
